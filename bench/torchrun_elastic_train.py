#!/usr/bin/python3
"""PyTorch elastic peer of `tenax bench elastic`: a worker under torchrun.

Run by PyTorch's elastic launcher (python3-torch 1.13), one process per rank:

  /usr/bin/python3 -m torch.distributed.run --nnodes 1 --nproc_per_node 4 \\
      --max_restarts 3 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:PORT \\
      --monitor_interval 1 bench/torchrun_elastic_train.py --run-dir DIR --steps N [opts]

It trains what `tenax bench train`'s DDP peer trains (pytorch_ddp_train.py:
the same model, Fashion-MNIST files, per-epoch permutation seeded with
derive_seed(seed, epoch) as tenax seeds it, each rank's slice of every global batch, SGD with momentum,
Gloo, DistributedDataParallel), for exactly --steps optimizer steps.

Fault tolerance is what torchrun's documentation asks of a script: torchrun
restarts *every* worker when one fails, so the script checkpoints and resumes.
Rank 0 writes the model, the optimizer state and the step every
--checkpoint-every steps (default: every 10% of the run) with torch.save to a
temporary file and os.replace (a kill during the write leaves the previous
checkpoint whole); every (re)started worker loads it if present and continues
from its step with the same samples (the sampler is a function of the step).

Files in --run-dir, for the benchmark that drives the faults:
  checkpoint.pt  the checkpoint (rank 0)
  progress       the number of steps applied so far (rank 0, after every step)
  pid-<rank>     each worker's pid (rewritten on every restart)
  started        the time the first attempt's rank 0 started (for wall_seconds)
  first-step     the time the first attempt's rank 0 began its first step
                 (for loop_seconds)
  pace           with --pace-every K: "step time" lines rank 0 appends every K
                 steps, on every attempt (the benchmark's pace estimate of
                 what the fault cost; bench/step_pace.h)

At the end rank 0 evaluates the model on the test set and prints one JSON line:
final_test_accuracy, steps, wall_seconds (since the first attempt started),
loop_seconds (from the first attempt's first step to the end of the last),
restarts (torchrun's restart count), resumed_from_step, checkpoint_every, world.
"""
import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

# Same directory: the other peers own the model definitions, the idx reader,
# the normalisation and the evaluation, so every peer trains the same network
# on the same data.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_ddp_train import FIRST_EPOCH, evaluate, load  # noqa: E402
from pytorch_train_single import Cnn, Mlp, derive_seed  # noqa: E402


def example_net():
    """The Net of examples/python/ddp.py: what examples/python/elastic.py
    trains, so that `tenax bench python`'s elastic section runs the same
    model on both sides. ddp.py sits beside this script in the build's
    bench-files/, and in examples/python/ in the source tree. ddp.py
    imports tenax.torch (it registers the backend; this script still runs
    on Gloo), so the tenax package must be importable, as `tenax bench
    python` makes it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (here, os.path.join(here, "..", "examples", "python")):
        if os.path.exists(os.path.join(d, "ddp.py")):
            sys.path.insert(0, d)
            break
    from ddp import Net
    return Net()


def write_atomic(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def save_checkpoint(path, model, opt, step):
    tmp = f"{path}.tmp.{os.getpid()}"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, tmp)
    os.replace(tmp, path)


def env_int(name):
    value = os.environ.get(name)
    if value is None:
        sys.exit(f"${name} is not set: run this script under python3 -m torch.distributed.run")
    return int(value)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run-dir", required=True, help="checkpoint, progress and pid files (shared by all ranks)")
    p.add_argument("--steps", type=int, required=True, help="optimizer steps in total")
    p.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints; 0 = 10%% of --steps")
    p.add_argument("--model", choices=["mlp", "cnn", "example-cnn"], default="cnn",
                   help="cnn and mlp: tenax's models (tenax bench elastic); example-cnn: the Net of "
                        "examples/python/ddp.py (tenax bench python)")
    p.add_argument("--batch-size", type=int, default=64, help="per worker")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--train-limit", type=int, default=0, help="use the first N training samples; 0 = all")
    p.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N test samples; 0 = all")
    p.add_argument("--pace-every", type=int, default=0,
                   help="rank 0 appends 'step time' to RUN_DIR/pace every N steps; 0 = never")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds before rendezvous or a collective gives up (a hung peer must not hang us)")
    a = p.parse_args()
    if a.steps < 1 or a.checkpoint_every < 0 or a.batch_size < 1 or a.threads < 1 or a.pace_every < 0:
        p.error("--steps, --batch-size, --threads must be >= 1; --checkpoint-every, --pace-every >= 0")
    every = a.checkpoint_every or max(1, a.steps // 10)

    rank, world = env_int("RANK"), env_int("WORLD_SIZE")
    restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    os.makedirs(a.run_dir, exist_ok=True)
    write_atomic(os.path.join(a.run_dir, f"pid-{rank}"), f"{os.getpid()}\n")
    started_path = os.path.join(a.run_dir, "started")
    if rank == 0 and not os.path.exists(started_path):
        write_atomic(started_path, f"{time.time()!r}\n")

    # torchrun set MASTER_ADDR/MASTER_PORT, RANK and WORLD_SIZE (env://).
    # Gloo picks its interface from the hostname; keep it on loopback like the
    # rendezvous (a user override wins).
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.timeout))

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)  # the same initial weights on every attempt; DDP broadcasts rank 0's anyway
    x_all, y_all = load(a.data, "train", a.train_limit)
    n = y_all.shape[0]
    b = a.batch_size
    steps_per_epoch = n // (world * b)  # the last partial global batch is dropped
    if steps_per_epoch == 0:
        sys.exit(f"training set of {n} is smaller than one global batch ({world} x {b})")

    net = {"mlp": Mlp, "cnn": Cnn, "example-cnn": example_net}[a.model]()
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=a.momentum)
    checkpoint_path = os.path.join(a.run_dir, "checkpoint.pt")
    step = 0
    if os.path.exists(checkpoint_path):
        state = torch.load(checkpoint_path)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = state["step"]
    resumed_from = step
    model = DistributedDataParallel(net)
    model.train()

    progress_path = os.path.join(a.run_dir, "progress")
    pace = open(os.path.join(a.run_dir, "pace"), "a") if rank == 0 and a.pace_every else None
    perm_epoch, perm = None, None
    first_step_path = os.path.join(a.run_dir, "first-step")
    if rank == 0 and not os.path.exists(first_step_path):
        write_atomic(first_step_path, f"{time.time()!r}\n")
    try:
        while step < a.steps:
            epoch = FIRST_EPOCH + step // steps_per_epoch
            if epoch != perm_epoch:
                gen = torch.Generator()
                gen.manual_seed(derive_seed(a.seed, epoch))
                perm, perm_epoch = torch.randperm(n, generator=gen), epoch
            lo = (step % steps_per_epoch) * world * b + rank * b
            idx = perm[lo:lo + b]
            x = x_all.index_select(0, idx)
            y = y_all.index_select(0, idx)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()  # DDP's gradient allreduce finishes inside backward
            opt.step()
            step += 1
            if rank == 0:
                if step % every == 0 and step < a.steps:
                    save_checkpoint(checkpoint_path, net, opt, step)
                write_atomic(progress_path, f"{step}\n")
                if pace and step % a.pace_every == 0:
                    pace.write(f"{step} {time.time()!r}\n")
                    pace.flush()
    except RuntimeError as e:
        # A peer died in a collective: torchrun stops and restarts the group.
        # One line instead of a traceback per survivor.
        sys.exit(f"rank {rank}: step {step + 1} failed: {str(e).splitlines()[0]}")

    if rank == 0:
        with open(first_step_path) as f:
            loop = time.time() - float(f.read())
        x_test, y_test = load(a.data, "t10k", a.test_limit)
        accuracy = evaluate(net, x_test, y_test)  # the bare module: evaluation is local
        with open(started_path) as f:
            wall = time.time() - float(f.read())
        sys.stdout.write(json.dumps({"final_test_accuracy": accuracy, "steps": step, "wall_seconds": wall,
                                     "loop_seconds": loop,
                                     "restarts": restarts, "resumed_from_step": resumed_from,
                                     "checkpoint_every": every, "world": world}) + "\n")
        sys.stdout.flush()
    # Keep every rank's connections up until rank 0 has finished evaluating.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

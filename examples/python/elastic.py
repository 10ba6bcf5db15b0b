#!/usr/bin/python3
"""examples/python/ddp.py made elastic with tenax.torch.Manager: the same
model class, data and optimizer; members may be SIGKILLed, join late or be
preempted (SIGTERM) while the job goes on, without a restart.

Start the job's coordinator, then one process per member (any number, at
any time; a member started after the first generation formed joins it):

  build/src/tenax coordinator --job examples/python/elastic.toml --port-file /tmp/port &
  for r in 0 1 2; do
    TENAX_COORDINATOR=127.0.0.1:$(cat /tmp/port) TENAX_JOB_ID=python-elastic TENAX_RANK=$r \\
    TENAX_SECRET=elastic-example-secret-0123456789 PYTHONPATH=build/python \\
    /usr/bin/python3 examples/python/elastic.py --steps 300 &
  done

The global batch (--global-batch) stays the same whatever the number of
members: each takes its slice of every step (Manager.batch_slice). Each
member that finishes prints the SHA-256 of its parameters (equal on every
member) and rank 0 the test accuracy.
"""
import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp import FashionMnist, Net  # noqa: E402  (the user's own model and data, unchanged)

import tenax.torch  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=int(os.environ.get("TENAX_TOTAL_STEPS", "300")),
                   help="optimizer steps of the job (under tenax run: the job file's train.max_steps)")
    p.add_argument("--global-batch", type=int, default=96, help="samples per step over all members")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--train-limit", type=int, default=0, help="the first N training samples; 0 = all")
    p.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N test samples; 0 = all")
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--model", choices=["cnn", "linear"], default="cnn",
                   help="cnn: ddp.py's Net; linear: one layer (members of one job must agree)")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--stock-ddp", action="store_true",
                   help="the same loop on stock DDP with backend=\"tenax\" (MASTER_ADDR/RANK/WORLD_SIZE), no "
                        "Manager: what `tenax bench python` compares the Manager's overhead with")
    p.add_argument("--warmup-steps", type=int, default=10, help="steps left out of the printed steps/s")
    p.add_argument("--progress-file", help="rank 0 writes the steps applied here after every step (for benchmarks)")
    p.add_argument("--pace-file", help="rank 0 appends 'step time' here every 10 steps (for benchmarks: the pace "
                                       "estimate of what a fault cost, bench/step_pace.h)")
    a = p.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(1)
    train = FashionMnist(a.data, "train", a.train_limit)
    net = Net() if a.model == "cnn" else torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10))
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=0.9)

    def state_dict():
        return {"model": net.state_dict(), "opt": opt.state_dict()}

    def load_state_dict(s):
        net.load_state_dict(s["model"])
        opt.load_state_dict(s["opt"])

    if a.stock_ddp:
        return stock_ddp(a, train, net, opt)
    manager = tenax.torch.Manager(state_dict=state_dict, load_state_dict=load_state_dict, total_steps=a.steps)
    model = tenax.torch.DistributedDataParallel(net, manager)

    indices = sample_order(len(train), a.global_batch)
    start, dropped, loss, warm = time.time(), 0, None, None
    while manager.step < a.steps:
        if manager.step == a.warmup_steps and warm is None:
            warm = time.time()
        if not manager.start_step():
            print(f"member left the job at step {manager.step} (preemption notice)", flush=True)
            manager.close()
            return
        offset, count = manager.batch_slice(a.global_batch)
        idx = indices(manager.step, offset, count)
        opt.zero_grad()
        loss = F.cross_entropy(model(train.x[idx]), train.y[idx])
        loss.backward()
        if manager.should_commit():
            opt.step()
            if a.progress_file and manager.rank == 0:
                with open(a.progress_file + ".tmp", "w") as f:
                    f.write(f"{manager.step}\n")
                os.replace(a.progress_file + ".tmp", a.progress_file)
            if a.pace_file and manager.rank == 0 and manager.step % 10 == 0:
                with open(a.pace_file, "a") as f:
                    f.write(f"{manager.step} {time.time()!r}\n")
            if manager.step % a.log_every == 0:
                tenax.torch.report(loss=loss.item())  # tenax run's live view, metrics.jsonl, summary.json
                print(f"step {manager.step}/{a.steps} rank {manager.rank}/{manager.world_size} "
                      f"generation {manager.generation} loss {loss.item():.4f}", flush=True)
        else:
            dropped += 1
    seconds = time.time() - start

    digest = hashlib.sha256()
    for t in net.state_dict().values():
        digest.update(t.detach().contiguous().numpy().tobytes())
    summary = {"steps": manager.step, "seconds": seconds, "state_hash": digest.hexdigest()}
    rank = manager.rank
    if rank == 0:
        test = FashionMnist(a.data, "test", a.test_limit)
        net.eval()
        with torch.no_grad():
            correct = sum((net(test.x[i:i + 1000]).argmax(1) == test.y[i:i + 1000]).sum().item()
                          for i in range(0, len(test), 1000))
        summary["test_accuracy"] = correct / len(test)
        tenax.torch.report(accuracy=summary["test_accuracy"])
        print(f"test accuracy {summary['test_accuracy']:.4f}", flush=True)
    print(f"rank {rank}: {manager.step} steps in {seconds:.1f} s ({dropped} dropped), last loss {loss.item():.4f}, "
          f"param-hash {digest.hexdigest()}", flush=True)
    if warm is not None:
        print(json.dumps({"steps_per_second": (manager.step - a.warmup_steps) / (time.time() - warm),
                          "test_accuracy": summary.get("test_accuracy"), "loop_seconds": seconds}), flush=True)
    manager.finish(summary)


def sample_order(n, global_batch):
    """indices(step, offset, count): the samples of a step's slice. The
    order of every epoch is fixed by its number, so a member's slice of
    step s is known from s alone (what a joiner resumes from)."""
    steps_per_epoch = n // global_batch
    orders = {}

    def indices(step, offset, count):
        epoch = step // steps_per_epoch
        if epoch not in orders:
            orders.clear()
            orders[epoch] = torch.from_numpy(np.random.default_rng(epoch).permutation(n))
        start = (step % steps_per_epoch) * global_batch + offset
        return orders[epoch][start:start + count]

    return indices


def stock_ddp(a, train, net, opt):
    """The same loop, data and slices on stock DDP over backend "tenax" (fixed membership)."""
    import datetime
    import torch.distributed as dist
    dist.init_process_group("tenax", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    model = torch.nn.parallel.DistributedDataParallel(net)
    indices = sample_order(len(train), a.global_batch)
    base, extra = divmod(a.global_batch, world)
    offset, count = rank * base + min(rank, extra), base + (1 if rank < extra else 0)
    warm = None
    for step in range(a.steps):
        if step == a.warmup_steps:
            warm = time.time()
        idx = indices(step, offset, count)
        opt.zero_grad()
        loss = F.cross_entropy(model(train.x[idx]), train.y[idx])
        loss.backward()
        opt.step()
    if warm is not None and rank == 0:
        print(json.dumps({"steps_per_second": (a.steps - a.warmup_steps) / (time.time() - warm)}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

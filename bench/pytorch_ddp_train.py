#!/usr/bin/python3
"""PyTorch DDP peer of `tenax bench train`, and both sides of `tenax bench
python` (--backend tenax: the same stock DDP script on tenax's
torch.distributed backend; --model big: an MLP of 11.9M parameters, as
much compute as gradient; --model wide: an embedding of 12.8M parameters
with little compute, whose 51 MB of gradients make each step
communication-heavy; --no-sync: DDP's
no_sync() on every step, the compute alone, so the bench can say how much
of a step communication leaves exposed).

One process per rank, Gloo backend on CPU by default, the idiomatic fast way: the whole
training set normalised once into one tensor (as pytorch_train_single.py
does), DistributedDataParallel with its default gradient buckets, SGD with
momentum. Every rank draws the same per-epoch permutation and takes its slice
of each global batch, which is tenax's sharding, so both see the same samples
per step. Rank 0 prints one JSON object with the steady-state samples per
second (all workers, steps after --warmup-steps) and the test accuracy.

  /usr/bin/python3 bench/pytorch_ddp_train.py --rank R --world W --master-port PORT [opts]
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

# Same directory: the single-process peer owns the model definitions and the
# idx reader, so both peers train exactly the same networks on the same data.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_train_single import MEAN, STD, Cnn, Mlp, derive_seed, read_idx  # noqa: E402

# tenax numbers epochs from 1 (src/train/training_loop.cc); the permutation
# of epoch e is drawn from a generator seeded with DeriveSeed(seed, e)
# (include/tenax/core/seeds.h; derive_seed mirrors it).
FIRST_EPOCH = 1


class BigMlp(torch.nn.Module):
    """784-3072-3072-10: 11.9M parameters (communication-heavy)."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(28 * 28, 3072)
        self.fc2 = torch.nn.Linear(3072, 3072)
        self.fc3 = torch.nn.Linear(3072, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))


class WideEmbedding(torch.nn.Module):
    """Communication-heavy: each pixel's (position, intensity level of 16)
    is a token of an EmbeddingBag of 12544 x 1024 (12.8M parameters, 51 MB
    of dense gradients a step) averaged and classified by one linear layer;
    little compute per parameter, so the allreduce dominates the step."""

    def __init__(self):
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(28 * 28 * 16, 1024, mode="mean")
        self.out = torch.nn.Linear(1024, 10)
        self.register_buffer("positions", torch.arange(28 * 28) * 16, persistent=False)

    def forward(self, x):
        level = (x.flatten(1) * STD + MEAN).mul(16).long().clamp_(0, 15)
        return self.out(F.relu(self.bag(self.positions + level)))


MODELS = {"mlp": Mlp, "cnn": Cnn, "big": BigMlp, "wide": WideEmbedding}


def load(data_dir, prefix, limit):
    images = read_idx(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"))
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    x = torch.from_numpy(images.copy()).float().div_(255.0).sub_(MEAN).div_(STD).unsqueeze(1).contiguous()
    return x, torch.from_numpy(labels.copy()).long()


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, y.shape[0], 1000):
            pred = model(x[start:start + 1000]).argmax(1)
            correct += (pred == y[start:start + 1000]).sum().item()
    return correct / y.shape[0]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--master-port", type=int, required=True)
    p.add_argument("--model", choices=sorted(MODELS), default="cnn")
    p.add_argument("--backend", default="gloo", help="gloo (default) or tenax (needs the tenax package on PYTHONPATH)")
    p.add_argument("--no-sync", action="store_true", help="skip the gradient allreduce: the compute alone")
    p.add_argument("--batch-size", type=int, default=64, help="per worker")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps in total; 0 = all")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--train-limit", type=int, default=0, help="use the first N training samples; 0 = all")
    p.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N test samples; 0 = all")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds before rendezvous or a collective gives up (a dead peer must not hang us)")
    a = p.parse_args()
    if a.world < 1 or not 0 <= a.rank < a.world:
        p.error("need 0 <= --rank < --world")
    if a.batch_size < 1 or a.threads < 1 or a.epochs < 1 or a.max_steps < 0 or a.warmup_steps < 0:
        p.error("--batch-size, --threads, --epochs must be >= 1; --max-steps, --warmup-steps >= 0")

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.master_port)
    # Gloo picks its interface from the hostname; keep it on loopback like the
    # rendezvous (a user override wins).
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if a.backend == "tenax":
        import tenax.torch  # noqa: F401  registers the backend
    dist.init_process_group(a.backend, rank=a.rank, world_size=a.world,
                            timeout=datetime.timedelta(seconds=a.timeout))

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)  # DDP broadcasts rank 0's initial weights anyway
    x_all, y_all = load(a.data, "train", a.train_limit)
    n = y_all.shape[0]
    b, w = a.batch_size, a.world
    steps_per_epoch = n // (w * b)  # the last partial global batch is dropped
    if steps_per_epoch == 0:
        sys.exit(f"training set of {n} is smaller than one global batch ({w} x {b})")
    total_steps = steps_per_epoch * a.epochs
    if a.max_steps:
        total_steps = min(total_steps, a.max_steps)
    if total_steps <= a.warmup_steps:
        sys.exit(f"{total_steps} steps leave nothing to time after {a.warmup_steps} warmup steps")

    model = DistributedDataParallel(MODELS[a.model]())
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)

    step = 0
    t_start = None
    loss = None
    for epoch in range(FIRST_EPOCH, FIRST_EPOCH + a.epochs):
        gen = torch.Generator()
        gen.manual_seed(derive_seed(a.seed, epoch))
        perm = torch.randperm(n, generator=gen)
        for s in range(steps_per_epoch):
            if step == total_steps:
                break
            if step == a.warmup_steps:
                t_start = time.perf_counter()
            lo = s * w * b + a.rank * b
            idx = perm[lo:lo + b]
            x = x_all.index_select(0, idx)
            y = y_all.index_select(0, idx)
            opt.zero_grad()
            if a.no_sync:
                with model.no_sync():
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
            else:
                loss = F.cross_entropy(model(x), y)
                loss.backward()  # DDP's gradient allreduce finishes inside backward
            opt.step()
            step += 1
    train_seconds = time.perf_counter() - t_start

    if a.rank == 0:
        x_test, y_test = load(a.data, "t10k", a.test_limit)
        # The bare module: evaluation is local, DDP's forward hooks would only add sync.
        accuracy = evaluate(model.module, x_test, y_test)
        steady = step - a.warmup_steps
        json.dump({"samples_per_second": w * b * steady / train_seconds, "test_accuracy": accuracy,
                   "steps": step, "train_seconds": train_seconds, "final_loss": loss.item()}, sys.stdout)
        sys.stdout.write("\n")
        sys.stdout.flush()
    # Keep every rank's connections up until rank 0 has finished evaluating.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

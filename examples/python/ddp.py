#!/usr/bin/python3
"""A plain PyTorch DDP training script on Fashion-MNIST: your own model
class, data loader and optimizer. Its only tenax lines are the import and
backend="tenax" (marked below); with --backend gloo it is stock PyTorch.

  PYTHONPATH=build/python /usr/bin/python3 -m torch.distributed.run \\
      --nproc_per_node 2 examples/python/ddp.py --epochs 1

torchrun sets MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, as for any
backend. Each rank prints the SHA-256 of its parameters at the end (DDP keeps
them identical); rank 0 prints the test accuracy.
"""
import argparse
import datetime
import gzip
import hashlib
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

import tenax.torch  # noqa: F401  <- tenax line 1 of 2: registers the "tenax" backend


class FashionMnist(Dataset):
    """The idx files of Debian's dataset-fashion-mnist, normalised."""

    def __init__(self, root, split, limit=0):
        prefix = "train" if split == "train" else "t10k"
        with gzip.open(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz")) as f:
            images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
        with gzip.open(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz")) as f:
            labels = np.frombuffer(f.read(), np.uint8, offset=8)
        if limit:
            images, labels = images[:limit], labels[:limit]
        self.x = torch.from_numpy(images.copy()).float().div_(255).sub_(0.2860).div_(0.3530)
        self.y = torch.from_numpy(labels.copy()).long()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="tenax", help="tenax (default) or gloo")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps; 0 = all")
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--train-limit", type=int, default=0, help="the first N training samples; 0 = all")
    p.add_argument("--test-limit", type=int, default=0, help="evaluate on the first N test samples; 0 = all")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()

    # <- tenax line 2 of 2: the backend's name.
    dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(1)

    train = FashionMnist(a.data, "train", a.train_limit)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=1)
    loader = DataLoader(train, batch_size=a.batch_size, sampler=sampler, drop_last=True)
    model = DistributedDataParallel(Net())
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)

    step, start, first_loss, loss = 0, time.time(), None, None
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            first_loss = loss.item() if first_loss is None else first_loss
            step += 1
            if step == a.max_steps:
                break
        if step == a.max_steps:
            break
    seconds = time.time() - start

    digest = hashlib.sha256()
    for t in model.module.state_dict().values():
        digest.update(t.detach().contiguous().numpy().tobytes())
    print(f"rank {rank}: {step} steps in {seconds:.1f} s, loss {first_loss:.3f} -> {loss.item():.3f}, "
          f"param-hash {digest.hexdigest()}", flush=True)
    if rank == 0:
        test = FashionMnist(a.data, "test", a.test_limit)
        model.module.eval()
        with torch.no_grad():
            correct = sum((model.module(test.x[i:i + 1000]).argmax(1) == test.y[i:i + 1000]).sum().item()
                          for i in range(0, len(test), 1000))
        print(f"test accuracy {correct / len(test):.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

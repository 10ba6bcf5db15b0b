#!/usr/bin/python3
"""PyTorch peer of `tenax bench train-single`.

Trains the same model as tenax (src/train/model.cc) with the same batch size,
optimizer, thread count and data (the Fashion-MNIST idx files, normalised the
same way and held in memory as one tensor), the idiomatic fast way: a random
permutation per epoch and index_select per batch, no per-sample DataLoader
work. Prints one JSON object with the steady-state samples per second (steps
after --warmup-steps), measured exactly like tenax's.
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(32 * 5 * 5, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def read_idx(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", choices=["mlp", "cnn"], default="cnn")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    images = read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz"))
    x_all = torch.from_numpy(images.copy()).float().div_(255.0).sub_(MEAN).div_(STD).unsqueeze(1).contiguous()
    y_all = torch.from_numpy(labels.copy()).long()
    n = y_all.shape[0]

    model = Mlp() if a.model == "mlp" else Cnn()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)

    step = 0
    steady_seconds = 0.0
    steady_samples = 0
    loss_value = float("nan")
    while step < a.steps:
        perm = torch.randperm(n)
        for start in range(0, n, a.batch_size):
            if step >= a.steps:
                break
            t0 = time.perf_counter()
            idx = perm[start:start + a.batch_size]
            x = x_all.index_select(0, idx)
            y = y_all.index_select(0, idx)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            loss_value = loss.item()
            dt = time.perf_counter() - t0
            step += 1
            if step > a.warmup_steps:
                steady_seconds += dt
                steady_samples += idx.shape[0]

    json.dump({"samples_per_second": steady_samples / steady_seconds, "steps": step, "final_loss": loss_value,
               "threads": torch.get_num_threads(), "torch_version": torch.__version__}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""PyTorch peer of `tenax bench train-single`.

Trains the same model as tenax (src/train/model.cc) with the same batch size,
optimizer, thread count and data (the Fashion-MNIST idx files, normalised the
same way and held in memory as one tensor), the idiomatic fast way: a random
permutation per epoch and index_select per batch, no per-sample DataLoader
work. Prints one JSON object with the steady-state samples per second (steps
after --warmup-steps), measured exactly like tenax's.

With --epochs it trains whole epochs (the last partial batch kept, as tenax's
single mode does) and, with --eval, reports the test accuracy after them: the
accuracy half of `tenax bench train-single`. Two flags reproduce one tenax run
step for step (tests/single_vs_pytorch_test.cc): --init loads the initial
weights tenax saved (`tenax train --save-initial-model`), and --order tenax
draws each epoch's permutation as tenax does (a generator seeded with
derive_seed(seed, epoch)); --losses N then prints the first N step losses.
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
MASK64 = (1 << 64) - 1


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


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def derive_seed(seed, stream):
    """tenax's DeriveSeed (include/tenax/core/seeds.h): the seed of each
    epoch's permutation. torch.Generator takes a signed 64-bit seed; mt19937
    reads its low 32 bits only, so dropping the top bit changes nothing."""
    return splitmix64(splitmix64(seed) ^ stream) & (MASK64 >> 1)


def load_images(data, prefix):
    images = read_idx(os.path.join(data, prefix + "-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data, prefix + "-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.copy()).float().div_(255.0).sub_(MEAN).div_(STD).unsqueeze(1).contiguous()
    return x, torch.from_numpy(labels.copy()).long()


def test_accuracy(model, data):
    x, y = load_images(data, "t10k")
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, y.shape[0], 1000):
            correct += int((model(x[start:start + 1000]).argmax(1) == y[start:start + 1000]).sum())
    return correct / y.shape[0]


def load_tenax_weights(model, path):
    """Copies the parameters of a tenax model file (a TorchScript archive of
    the built-in module) into `model`; every name and shape must match."""
    saved = dict(torch.jit.load(path).named_parameters())
    own = dict(model.named_parameters())
    if sorted(saved) != sorted(own):
        sys.exit(f"{path}: parameters {sorted(saved)} do not match the model's {sorted(own)}")
    with torch.no_grad():
        for name, param in own.items():
            if saved[name].shape != param.shape:
                sys.exit(f"{path}: {name} has shape {tuple(saved[name].shape)}, expected {tuple(param.shape)}")
            param.copy_(saved[name])


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
    p.add_argument("--epochs", type=int, default=0, help="train whole epochs (overrides --steps)")
    p.add_argument("--eval", action="store_true", help="report the test accuracy at the end")
    p.add_argument("--init", help="initial weights: a model file tenax wrote (--save-initial-model)")
    p.add_argument("--order", choices=["torch", "tenax"], default="torch",
                   help="batch order: torch's global generator, or tenax's (derive_seed(seed, epoch) per epoch)")
    p.add_argument("--losses", type=int, default=0, help="print the first N step losses")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    x_all, y_all = load_images(a.data, "train")
    n = y_all.shape[0]

    model = Mlp() if a.model == "mlp" else Cnn()
    if a.init:
        load_tenax_weights(model, a.init)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)

    steps_per_epoch = (n + a.batch_size - 1) // a.batch_size
    total_steps = a.epochs * steps_per_epoch if a.epochs > 0 else a.steps
    step = 0
    epoch = 0
    steady_seconds = 0.0
    steady_samples = 0
    loss_value = float("nan")
    losses = []
    while step < total_steps:
        epoch += 1
        if a.order == "tenax":
            perm = torch.randperm(n, generator=torch.Generator().manual_seed(derive_seed(a.seed, epoch)))
        else:
            perm = torch.randperm(n)
        for start in range(0, n, a.batch_size):
            if step >= total_steps:
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
            if len(losses) < a.losses:
                losses.append(loss_value)
            step += 1
            if step > a.warmup_steps:
                steady_seconds += dt
                steady_samples += idx.shape[0]

    result = {"samples_per_second": steady_samples / steady_seconds if steady_seconds > 0 else 0.0, "steps": step,
              "final_loss": loss_value, "threads": torch.get_num_threads(), "torch_version": torch.__version__,
              "seed": a.seed}
    if a.losses:
        result["losses"] = losses
    if a.eval:
        result["test_accuracy"] = test_accuracy(model, a.data)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""PyTorch peer of `tenax bench gpu`: trains on a GPU the way a PyTorch user
would, on the same data, model, batch size and optimizer as tenax.

--model cnn: tenax's built-in cnn on Fashion-MNIST (1x28x28, the idx files).
--model resnet18: torchvision's ResNet-18 (10 classes) on the npy files that
gpu_bench.py writes (Fashion-MNIST padded to 32x32, repeated to 3 channels).
Batches are gathered on the host, pinned and copied with non_blocking=True;
the loss is read back every --log-every steps (as tenax does), not every
step. With --ddp, runs as one rank of DistributedDataParallel over the
process group named by --backend (env:// rendezvous: MASTER_ADDR/PORT,
RANK, WORLD_SIZE); each rank reads its own slice of every global batch.

Prints one JSON object: samples/s over the steps after --warmup-steps
(timed with the device synchronised at both ends of that window: what the
GPU really did), and with --eval the test accuracy.
"""
import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The cnn and the idx reader are those of the CPU peer (same folder).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_train_single import MEAN, STD, Cnn, read_idx  # noqa: E402


def load(a, split):
    if a.model == "cnn":
        prefix = "train" if split == "train" else "t10k"
        x = read_idx(os.path.join(a.data, prefix + "-images-idx3-ubyte.gz"))
        y = read_idx(os.path.join(a.data, prefix + "-labels-idx1-ubyte.gz"))
        xt = torch.from_numpy(x.copy()).float().div_(255.0).sub_(MEAN).div_(STD).unsqueeze(1)
        return xt.contiguous(), torch.from_numpy(y.copy()).long()
    x = np.load(os.path.join(a.npy_dir, f"{split}_images.npy"))
    y = np.load(os.path.join(a.npy_dir, f"{split}_labels.npy"))
    train = np.load(os.path.join(a.npy_dir, "train_images.npy"), mmap_mode="r")
    mean, std = float(train.mean()) / 255.0, float(train.std()) / 255.0  # as tenax standardises uint8 npy
    xt = torch.from_numpy(x).float().div_(255.0).sub_(mean).div_(std)
    return xt.contiguous(), torch.from_numpy(y.astype(np.int64))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    """torchvision's resnet18 layer for layer (used where torchvision is absent)."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def make_model(name):
    """The cnn, or ResNet-18: torchvision's when it is installed, else the
    same architecture defined above."""
    if name == "cnn":
        return Cnn()
    try:
        import torchvision
        return torchvision.models.resnet18(num_classes=10)
    except ImportError:
        return ResNet18(10)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["cnn", "resnet18"], default="cnn")
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup-steps", type=int, default=30)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--npy-dir", help="resnet18: the folder of train/test_images/labels.npy")
    p.add_argument("--device", default="cuda")
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--eval", action="store_true")
    p.add_argument("--test-limit", type=int, default=0, help="evaluate the first N test samples (0 = all)")
    a = p.parse_args()

    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    rank, world = 0, 1
    if a.ddp:
        import torch.distributed as dist
        dist.init_process_group(a.backend)
        rank, world = dist.get_rank(), dist.get_world_size()
    x_all, y_all = load(a, "train")
    n = y_all.shape[0]
    model = make_model(a.model).to(dev)
    if a.ddp:
        model = nn.parallel.DistributedDataParallel(model)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    global_batch = a.batch_size * world
    gen = torch.Generator().manual_seed(a.seed)
    perm = torch.randperm(n, generator=gen)
    pos = 0
    steady_t0 = None
    loss_sum = None
    last_loss = float("nan")
    for step in range(1, a.steps + 1):
        if pos + global_batch > n:
            perm, pos = torch.randperm(n, generator=gen), 0
        idx = perm[pos + rank * a.batch_size:pos + (rank + 1) * a.batch_size]
        pos += global_batch
        x = x_all.index_select(0, idx)
        y = y_all.index_select(0, idx)
        if dev.type == "cuda":
            x = x.pin_memory().to(dev, non_blocking=True)
            y = y.pin_memory().to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
        if step % a.log_every == 0 or step == a.steps:
            last_loss = float(loss_sum.item()) / (a.log_every if step % a.log_every == 0 else step % a.log_every)
            loss_sum = None
        if step == a.warmup_steps:
            torch.cuda.synchronize(dev) if dev.type == "cuda" else None
            steady_t0 = time.perf_counter()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    seconds = time.perf_counter() - steady_t0
    steady_steps = a.steps - a.warmup_steps
    result = {"samples_per_second": steady_steps * global_batch / seconds, "steps": a.steps, "world": world,
              "final_loss": last_loss, "torch_version": torch.__version__, "device": str(dev)}
    inner = model.module if a.ddp else model
    h = hashlib.sha256()
    for prm in inner.parameters():
        h.update(prm.detach().cpu().numpy().tobytes())
    result["parameter_sha256"] = h.hexdigest()[:16]
    if a.eval and rank == 0:
        xt, yt = load(a, "test")
        if a.test_limit:
            xt, yt = xt[:a.test_limit], yt[:a.test_limit]
        inner.eval()
        correct = 0
        with torch.no_grad():
            for s in range(0, yt.shape[0], 500):
                correct += int((inner(xt[s:s + 500].to(dev)).argmax(1).cpu() == yt[s:s + 500]).sum())
        result["test_accuracy"] = correct / yt.shape[0]
    if rank == 0:
        json.dump(result, sys.stdout)
        sys.stdout.write("\n")
    if a.ddp:
        import torch.distributed as dist
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

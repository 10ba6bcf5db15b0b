#!/usr/bin/python3
"""Writes a TorchScript model for `[model] path` (examples/own_model.toml).

    /usr/bin/python3 examples/own_model/make_model.py /tmp/net.pt

The module is the built-in cnn written in PyTorch (same layers and shapes):
edit it into your own. tenax trains any scripted module whose forward maps
float32 images [N, C, H, W] to logits [N, classes]; the weights it starts
from are the ones saved here.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, channels: int = 1, height: int = 28, width: int = 28, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(32 * ((height // 2 - 4) // 2) * ((width // 2 - 4) // 2), 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_model.py OUT.pt")
    torch.manual_seed(0)
    torch.jit.script(Net()).save(sys.argv[1])
    print(f"wrote {sys.argv[1]}")

#!/usr/bin/python3
"""Writes a TorchScript model for `[model] path` (examples/own_model.toml).

    /usr/bin/python3 examples/own_model/make_model.py /tmp/net.pt
    /usr/bin/python3 examples/own_model/make_model.py /tmp/net.pt --weights runs/x/model.pt

The module is the built-in cnn written in PyTorch (same layers and shapes):
edit it into your own. tenax trains any scripted module whose forward maps
float32 images [N, C, H, W] to logits [N, classes]; the weights it starts
from are the ones saved here. With --weights, they are those of a tenax
model.pt of the built-in cnn (for Fashion-MNIST's 1 x 28 x 28, 10 classes):
the names and shapes must match exactly, which proves the architectures do.
"""
import argparse

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


def main():
    parser = argparse.ArgumentParser(description="Write the built-in cnn as a TorchScript model.")
    parser.add_argument("out", help="where to write the TorchScript file")
    parser.add_argument("--weights", help="a tenax model.pt of the built-in cnn to take the weights from")
    args = parser.parse_args()
    torch.manual_seed(0)
    net = Net()
    if args.weights:
        builtin = torch.jit.load(args.weights)
        # strict: every name and shape must match the built-in's
        net.load_state_dict({name: p.detach() for name, p in builtin.named_parameters()})
    torch.jit.script(net).save(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Writes an image set as NumPy .npy files for `data.format = "npy"` (examples/own_data.toml).

    /usr/bin/python3 examples/own_data/make_data.py [OUT_DIR]    # default: own_data

It writes OUT_DIR/{train,test}_{images,labels}.npy: a subset of Fashion-MNIST
(Debian's dataset-fashion-mnist) in colour, each garment tinted with a random
colour, so the images are uint8 N x 3 x 28 x 28 (the colour says nothing about
the class; the shape does) and the labels int64 class indices 0..9.

Your own data goes the same way: np.save any uint8 or float32 array of
N x C x H x W (or N x H x W) images and an integer array of N labels
0..classes-1 in the same order. uint8 images are scaled to [0, 1] and
standardised by the training images' mean and std; float32 images are used as
given. The class count is the largest training label + 1.
"""
import gzip
import os
import sys

import numpy as np

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
TRAIN, TEST = 12000, 2000


def read_idx(stem):
    """An idx file of the Debian package as a numpy array (gzip or plain)."""
    path = os.path.join(FASHION_MNIST, stem)
    if os.path.exists(path + ".gz"):
        with gzip.open(path + ".gz", "rb") as f:
            data = f.read()
    else:
        with open(path, "rb") as f:
            data = f.read()
    rank = data[3]
    dims = np.frombuffer(data, dtype=">u4", count=rank, offset=4).astype(np.int64)
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def tinted(images, rng):
    """N x 28 x 28 grey -> N x 3 x 28 x 28, each image in a random colour."""
    colour = rng.uniform(0.35, 1.0, size=(len(images), 3, 1, 1))
    return np.round(images[:, None, :, :] * colour).astype(np.uint8)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "own_data"
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1)
    for split, prefix, n in (("train", "train", TRAIN), ("test", "t10k", TEST)):
        images = read_idx(prefix + "-images-idx3-ubyte")[:n]
        labels = read_idx(prefix + "-labels-idx1-ubyte")[:n].astype(np.int64)
        np.save(os.path.join(out, split + "_images.npy"), tinted(images, rng))
        np.save(os.path.join(out, split + "_labels.npy"), labels)
        print(f"{out}/{split}_images.npy: {n} x 3 x 28 x 28 uint8, {split}_labels.npy: {n} int64 "
              f"({labels.max() + 1} classes)")


if __name__ == "__main__":
    main()

"""Deterministic inputs of the backend's tests, shared by the worker
processes (rank_worker.py) and the pytest side that checks their results
against NumPy."""

import zlib

import numpy as np
import torch

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
FLOATS = ("float32", "float64", "float16", "bfloat16")
# float32 sums large enough for the cross-memory path, not divisible among 2-4 ranks.
BIG_SIZES = (65537, (1 << 20) + 3)


def ops_for(dtype):
    if dtype in FLOATS:
        return ["sum", "avg", "product", "min", "max"]
    if dtype == "bool":
        return ["sum", "product", "min", "max", "band", "bor", "bxor"]
    return ["sum", "product", "min", "max", "band", "bor", "bxor"]


def case_input(name, dtype, op, rank, shape=(5, 7)):
    """Rank `rank`'s input to case `name`: small values, so that sums and
    products stay exact in every integer dtype and representable in
    float16."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{name}/{dtype}/{op}/{rank}".encode()))
    if dtype == "bool":
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype in FLOATS:
        low, high = (0.5, 1.5) if op == "product" else (-2.0, 2.0)
        x = torch.rand(shape, generator=g) * (high - low) + low
        return x.to(DTYPES[dtype])
    return torch.randint(1, 4, shape, generator=g).to(DTYPES[dtype])


def as_numpy(t):
    """A tensor's values in NumPy; float16 and bfloat16 through float32."""
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.float().numpy()
    return t.numpy()


def reference(inputs, op, dtype):
    """The reduction of `inputs` (by rank, NumPy arrays) in rank order."""
    if dtype == "bool":
        fn = {"sum": np.logical_or, "max": np.logical_or, "bor": np.logical_or,
              "product": np.logical_and, "min": np.logical_and, "band": np.logical_and,
              "bxor": np.logical_xor}[op]
    else:
        fn = {"sum": np.add, "avg": np.add, "product": np.multiply, "min": np.minimum,
              "max": np.maximum, "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op]
    wide = [x.astype(np.float64) if dtype in FLOATS else x for x in inputs]
    acc = wide[0].copy()
    for x in wide[1:]:
        acc = fn(acc, x)
    if op == "avg":
        acc = acc / len(inputs)
    return acc


def tolerance(dtype):
    """(rtol, atol) for comparing a float result with the float64 reference."""
    return {"float32": (1e-5, 1e-5), "float64": (1e-12, 1e-12),
            "float16": (2e-2, 2e-2), "bfloat16": (5e-2, 5e-2)}.get(dtype, (0, 0))

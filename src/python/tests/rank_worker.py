"""One rank of a test job on the tenax backend: runs SCENARIO (argv[1]) and
saves what it got to argv[2] (torch.save). Rank and world come from the
environment, as torchrun sets them."""

import os
import signal
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import tenax.torch  # noqa: F401  registers the backend
from cases import BIG_SIZES, DTYPES, case_input, ops_for

OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "product": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX, "band": dist.ReduceOp.BAND,
       "bor": dist.ReduceOp.BOR, "bxor": dist.ReduceOp.BXOR}


def collectives(rank, world):
    out = {}
    for dtype in DTYPES:
        for op in ops_for(dtype):
            t = case_input("allreduce", dtype, op, rank)
            dist.all_reduce(t, op=OPS[op])
            out[f"allreduce/{dtype}/{op}"] = t
        root = world - 1
        t = case_input("broadcast", dtype, "-", rank)
        dist.broadcast(t, src=root)
        out[f"broadcast/{dtype}"] = t
        t = case_input("allgather", dtype, "-", rank)
        got = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(got, t)
        out[f"allgather/{dtype}"] = torch.stack(got)
    # float32 through the one-sided path, large enough for the ring, and
    # a non-contiguous view (written back into its base).
    big = case_input("big", "float32", "sum", rank, shape=(1 << 20,))
    dist.all_reduce(big)
    out["big/float32/sum"] = big
    base = case_input("strided", "float32", "sum", rank, shape=(6, 8))
    view = base[:, ::2]
    dist.all_reduce(view)
    out["strided/float32/sum"] = base
    t = case_input("reduce", "int64", "sum", rank)
    dist.reduce(t, dst=0)
    if rank == 0:
        out["reduce/int64/sum"] = t
    t = case_input("gather", "float64", "-", rank)
    got = [torch.empty_like(t) for _ in range(world)] if rank == 0 else None
    dist.gather(t, gather_list=got, dst=0)
    if rank == 0:
        out["gather/float64"] = torch.stack(got)
    parts = [case_input("scatter", "int32", "-", j) for j in range(world)] if rank == 0 else None
    t = torch.empty((5, 7), dtype=torch.int32)
    dist.scatter(t, scatter_list=parts, src=0)
    out["scatter/int32"] = t
    pieces = [case_input(f"reduce_scatter/{j}", "float64", "sum", rank) for j in range(world)]
    t = torch.empty((5, 7), dtype=torch.float64)
    dist.reduce_scatter(t, pieces)
    out["reduce_scatter/float64/sum"] = t
    src = case_input("alltoall", "int64", "-", rank, shape=(world * 3,))
    dst = torch.empty_like(src)
    dist.all_to_all_single(dst, src)
    out["alltoall/int64"] = dst
    if world > 1:
        to, frm = (rank + 1) % world, (rank - 1) % world
        mine = case_input("sendrecv", "float32", "-", rank)
        got = torch.empty_like(mine)
        if rank % 2 == 0:
            dist.send(mine, to, tag=7)
            dist.recv(got, frm, tag=7)
        else:
            dist.recv(got, frm, tag=7)
            dist.send(mine, to, tag=7)
        out["sendrecv/float32"] = got
        sub = dist.new_group([0, 1])
        if rank in (0, 1):
            t = case_input("subgroup", "int32", "sum", rank)
            dist.all_reduce(t, group=sub)
            out["subgroup/int32/sum"] = t
    dist.barrier()
    out["counters"] = tenax.torch.counters()
    return out


def mismatch(rank, world):
    """Rank 1 passes another shape; every rank must get the error."""
    shape = (4, 3) if rank == 1 else (3, 4)
    try:
        dist.all_reduce(torch.ones(shape))
        return {"error": None}
    except RuntimeError as e:
        return {"error": str(e)}


def refused(rank, world):
    """Inputs tenax refuses, on every rank: a quantized dtype, bxor of
    floats, avg of integers. Then a collective that works, to show the ranks are
    still in step."""
    errors = []
    quantized = torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8)
    for bad in (lambda: dist.all_reduce(quantized),
                lambda: dist.all_reduce(torch.ones(3), op=dist.ReduceOp.BXOR),
                lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.AVG)):
        try:
            bad()
            errors.append(None)
        except RuntimeError as e:
            errors.append(str(e))
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    return {"errors": errors, "after": t}


def lost_peer(rank, world):
    """The last rank SIGKILLs itself; the others' next collective and the
    one after must fail naming it, without hanging."""
    t = torch.ones(8)
    dist.all_reduce(t)
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    errors = []
    for _ in range(2):
        try:
            dist.all_reduce(torch.ones(8))
            errors.append(None)
        except RuntimeError as e:
            errors.append(str(e))
    return {"errors": errors}


def big_sums(rank, world):
    """float32 sums and averages large enough for the cross-memory path, of
    sizes that do not divide among the ranks. With TEST_KILL_BIG set, the
    last rank SIGKILLs itself after the first sum; the others' next two
    large sums must fail naming it."""
    out = {}
    for n in BIG_SIZES:
        for op in ("sum", "avg"):
            t = case_input(f"big{n}", "float32", op, rank, shape=(n,))
            dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.AVG)
            out[f"{n}/{op}"] = t
            if os.environ.get("TEST_KILL_BIG"):
                if rank == world - 1:
                    os.kill(os.getpid(), signal.SIGKILL)
                errors = []
                for _ in range(2):
                    try:
                        dist.all_reduce(torch.ones(n))
                        errors.append(None)
                    except RuntimeError as e:
                        errors.append(str(e))
                return {"errors": errors}
    out["counters"] = tenax.torch.counters()
    return out


def main():
    scenario, out_path = sys.argv[1], sys.argv[2]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("tenax", timeout=timedelta(seconds=float(os.environ.get("TEST_TIMEOUT", "60"))))
    result = {"collectives": collectives, "mismatch": mismatch, "refused": refused, "lost_peer": lost_peer,
              "big_sums": big_sums}[scenario](
        rank, world)
    torch.save(result, out_path)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

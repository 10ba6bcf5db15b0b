"""Every collective of the tenax torch.distributed backend, on 1 to 4 real
processes, against a NumPy reference, for each dtype: exact for integers
and bool, within a stated tolerance for floats, and bitwise equal on every
rank."""

import numpy as np
import pytest
import torch

from cases import BIG_SIZES, DTYPES, FLOATS, as_numpy, case_input, ops_for, reference, tolerance
from harness import logs, run_ranks


def check(got, want, dtype, what):
    got = as_numpy(got)
    if dtype in FLOATS:
        rtol, atol = tolerance(dtype)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=what)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_every_collective_matches_numpy_and_every_rank_gets_the_same_bits(tmp_path, world):
    codes, results = run_ranks(tmp_path, "collectives", world)
    assert codes == [0] * world, logs(tmp_path, world)
    ranks = range(world)
    for dtype in DTYPES:
        for op in ops_for(dtype):
            key = f"allreduce/{dtype}/{op}"
            want = reference([as_numpy(case_input("allreduce", dtype, op, r)) for r in ranks], op, dtype)
            for r in ranks:
                check(results[r][key], want, dtype, f"{key} on rank {r}")
                assert torch.equal(results[r][key], results[0][key]), f"{key}: rank {r} differs from rank 0"
        root_input = case_input("broadcast", dtype, "-", world - 1)
        for r in ranks:
            assert torch.equal(results[r][f"broadcast/{dtype}"], root_input), f"broadcast/{dtype} on rank {r}"
            want = torch.stack([case_input("allgather", dtype, "-", j) for j in ranks])
            assert torch.equal(results[r][f"allgather/{dtype}"], want), f"allgather/{dtype} on rank {r}"
    want = reference([case_input("big", "float32", "sum", r, shape=(1 << 20,)).numpy() for r in ranks], "sum", "float32")
    for r in ranks:
        check(results[r]["big/float32/sum"], want, "float32", f"big sum on rank {r}")
        assert torch.equal(results[r]["big/float32/sum"], results[0]["big/float32/sum"])
    # The strided view's columns are summed; the others keep this rank's values.
    for r in ranks:
        base = case_input("strided", "float32", "sum", r, shape=(6, 8)).numpy()
        sums = reference([case_input("strided", "float32", "sum", j, shape=(6, 8)).numpy() for j in ranks], "sum", "float32")
        want = base.astype(np.float64)
        want[:, ::2] = sums[:, ::2]
        check(results[r]["strided/float32/sum"], want, "float32", f"strided view on rank {r}")
    want = reference([case_input("reduce", "int64", "sum", r).numpy() for r in ranks], "sum", "int64")
    check(results[0]["reduce/int64/sum"], want, "int64", "reduce to rank 0")
    assert torch.equal(results[0]["gather/float64"], torch.stack([case_input("gather", "float64", "-", r) for r in ranks]))
    for r in ranks:
        assert torch.equal(results[r]["scatter/int32"], case_input("scatter", "int32", "-", r)), f"scatter on rank {r}"
        want = reference([case_input(f"reduce_scatter/{r}", "float64", "sum", j).numpy() for j in ranks], "sum", "float64")
        check(results[r]["reduce_scatter/float64/sum"], want, "float64", f"reduce_scatter on rank {r}")
        # all_to_all_single: piece r of every rank j's input, in rank order.
        want = torch.cat([case_input("alltoall", "int64", "-", j, shape=(world * 3,))[r * 3:(r + 1) * 3] for j in ranks])
        assert torch.equal(results[r]["alltoall/int64"], want), f"alltoall on rank {r}"
    if world > 1:
        for r in ranks:
            assert torch.equal(results[r]["sendrecv/float32"], case_input("sendrecv", "float32", "-", (r - 1) % world))
        want = reference([case_input("subgroup", "int32", "sum", r).numpy() for r in (0, 1)], "sum", "int32")
        for r in (0, 1):
            check(results[r]["subgroup/int32/sum"], want, "int32", f"new_group([0, 1]) on rank {r}")
        # float32 sums went one-sided (the 4 MiB one straight out of the
        # peers' memory); the rest as bulk messages.
        assert results[0]["counters"]["fast_allreduces"] >= 3, results[0]["counters"]
        assert results[0]["counters"]["cross_memory"] == "on", results[0]["counters"]
        assert results[0]["counters"]["cross_memory_sums"] >= 1, results[0]["counters"]
        assert results[0]["counters"]["bulk_collectives"] > 0, results[0]["counters"]


def check_big_sums(results, world):
    for n in BIG_SIZES:
        for op in ("sum", "avg"):
            key = f"{n}/{op}"
            inputs = [case_input(f"big{n}", "float32", op, r, shape=(n,)).numpy() for r in range(world)]
            want = reference(inputs, op, "float32")
            for r in range(world):
                check(results[r][key], want, "float32", f"{key} on rank {r}")
                assert torch.equal(results[r][key], results[0][key]), f"{key}: rank {r} differs from rank 0"


@pytest.mark.parametrize("world", [2, 3])
def test_large_sums_read_the_peers_memory_and_match_numpy(tmp_path, world):
    codes, results = run_ranks(tmp_path, "big_sums", world)
    assert codes == [0] * world, logs(tmp_path, world)
    check_big_sums(results, world)
    for r in range(world):
        c = results[r]["counters"]
        assert c["cross_memory"] == "on" and c["cross_memory_sums"] == 2 * len(BIG_SIZES), c


def test_one_rank_refusing_cross_memory_attach_puts_every_rank_on_the_ring(tmp_path):
    codes, results = run_ranks(tmp_path, "big_sums", 3, per_rank_env={1: {"TENAX_CROSS_MEMORY": "0"}})
    assert codes == [0] * 3, logs(tmp_path, 3)
    check_big_sums(results, 3)
    for r in range(3):
        c = results[r]["counters"]
        assert c["cross_memory"] == "off: TENAX_CROSS_MEMORY=0 on rank 1", c
        assert c["cross_memory_sums"] == 0 and c["fast_allreduces"] >= 2 * len(BIG_SIZES), c

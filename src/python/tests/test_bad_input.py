"""What a user gets from the tenax backend for bad input and lost peers:
one RuntimeError naming the rank and the tensor, on every rank, and never a
hang."""

import torch

from harness import logs, run_ranks


def test_a_shape_mismatch_fails_every_rank_naming_rank_and_shapes(tmp_path):
    codes, results = run_ranks(tmp_path, "mismatch", 2)
    assert codes == [0, 0], logs(tmp_path, 2)
    for r in (0, 1):
        err = results[r]["error"]
        assert err is not None, f"rank {r} got no error"
        assert "rank 1 passed allreduce sum float32[4, 3]" in err, err
        assert "rank 0 passed allreduce sum float32[3, 4]" in err, err


def test_refused_inputs_name_what_is_supported_and_the_ranks_stay_in_step(tmp_path):
    codes, results = run_ranks(tmp_path, "refused", 2)
    assert codes == [0, 0], logs(tmp_path, 2)
    for r in (0, 1):
        dtype_err, bxor_err, avg_err = results[r]["errors"]
        assert dtype_err and "rank 0's input is refused" in dtype_err and "QUInt8" in dtype_err, dtype_err
        assert "float32, float64, float16, bfloat16" in dtype_err, dtype_err
        assert bxor_err and "bxor needs integer or bool tensors" in bxor_err, bxor_err
        assert avg_err and "avg needs floating-point tensors" in avg_err, avg_err
        # 1 + 2 on both ranks: the failed calls left nothing half-done.
        assert torch.equal(results[r]["after"], torch.full((4,), 3.0)), results[r]["after"]


def check_rank_2_sigkilled_and_named(tmp_path, codes, results):
    """Rank 2 died of SIGKILL; ranks 0 and 1 exited 0, their next collective
    failed naming rank 2 and the one after said the group broke."""
    assert codes[:2] == [0, 0], logs(tmp_path, 3)
    assert codes[2] == -9, logs(tmp_path, 3)
    for r in (0, 1):
        first, second = results[r]["errors"]
        assert first is not None and "rank 2" in first, first
        assert second is not None and "the group broke" in second and "rank 2" in second, second


def test_a_sigkilled_peer_fails_the_next_collectives_naming_it_without_a_hang(tmp_path):
    codes, results = run_ranks(tmp_path, "lost_peer", 3, timeout=90)
    check_rank_2_sigkilled_and_named(tmp_path, codes, results)


def test_a_peer_sigkilled_between_large_sums_fails_the_next_ones_naming_it(tmp_path):
    # Sums this large read the peers' memory; the dead rank's must not hang them.
    codes, results = run_ranks(tmp_path, "big_sums", 3, timeout=90, env={"TEST_KILL_BIG": "1"})
    check_rank_2_sigkilled_and_named(tmp_path, codes, results)


def test_a_wrong_secret_is_refused_at_init(tmp_path):
    codes, results = run_ranks(tmp_path, "refused", 2, timeout=90, env={"TEST_TIMEOUT": "8"},
                               per_rank_env={0: {"TENAX_SECRET": "a" * 32}, 1: {"TENAX_SECRET": "b" * 32}})
    assert codes[0] != 0 and codes[1] != 0, logs(tmp_path, 2)
    text = logs(tmp_path, 2)
    assert "could not join its group" in text, text
    assert results == [None, None]

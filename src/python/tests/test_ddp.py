"""Stock DistributedDataParallel on the tenax backend: examples/python/ddp.py
(the user's own model, DataLoader and optimizer; only the import and the
backend name are tenax's) on 2 real processes ends with bit-identical
parameters on both ranks, equal to the same script on Gloo (with 2 ranks a
sum is the same in any order), and its loss falls."""

import os
import re
import subprocess
import sys
from pathlib import Path

from harness import free_port

SCRIPT = Path(os.environ["TENAX_SOURCE_DIR"]) / "examples" / "python" / "ddp.py"


def train(backend, tmp_path):
    port = free_port()
    procs = []
    try:
        for rank in range(2):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                       OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
            procs.append(subprocess.Popen([sys.executable, str(SCRIPT), "--backend", backend, "--max-steps", "40",
                                           "--train-limit", "8192", "--test-limit", "1000"], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        outs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"{backend} rank {rank}:\n{out}"
    runs = []
    for out in outs:
        m = re.search(r"40 steps in .* loss ([0-9.]+) -> ([0-9.]+), param-hash ([0-9a-f]{64})", out)
        assert m, out
        runs.append((float(m.group(1)), float(m.group(2)), m.group(3)))
    return runs


def test_stock_ddp_on_tenax_ends_bit_identical_across_ranks_and_equal_to_gloo(tmp_path):
    tenax = train("tenax", tmp_path)
    assert tenax[0][2] == tenax[1][2], "the ranks' parameters differ"
    for first, last, _ in tenax:
        assert last < first * 0.8, f"the loss did not fall: {first} -> {last}"
    gloo = train("gloo", tmp_path)
    assert gloo[0][2] == tenax[0][2], "tenax's parameters differ from Gloo's after the same 40 steps"

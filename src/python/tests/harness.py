"""Starts the ranks of a test job as real processes (rank_worker.py) on
loopback, with a deadline, and always cleans them up."""

import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def free_port():
    """A port for the job's rendezvous store, drawn below the kernel's
    ephemeral range. A port the kernel handed out (bind to port 0) and we
    released can be handed to another test's socket before rank 0's store
    binds it (CI: 'Address already in use'); ports below the range are only
    ever taken by someone asking for them by number."""
    low = 32768
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    first = 10000 if low > 12000 else 1024
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(first, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in [{first}, {low}) after 200 tries")


def run_ranks(tmp_path, scenario, world, timeout=120, env=None, per_rank_env=None):
    """Runs `scenario` on `world` ranks; returns (exit codes, results by
    rank: the saved dict, or None when the rank saved nothing)."""
    port = free_port()
    procs = []
    try:
        for rank in range(world):
            e = dict(os.environ)
            e.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                      "WORLD_SIZE": str(world), "OMP_NUM_THREADS": "1",
                      "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])})
            e.update(env or {})
            e.update((per_rank_env or {}).get(rank, {}))
            log = open(tmp_path / f"rank{rank}.log", "w")
            procs.append(subprocess.Popen([sys.executable, str(HERE / "rank_worker.py"), scenario,
                                           str(tmp_path / f"rank{rank}.pt")], env=e, stdout=log, stderr=log))
        codes = [p.wait(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    results = []
    for rank in range(world):
        f = tmp_path / f"rank{rank}.pt"
        results.append(torch.load(f) if f.exists() else None)
    return codes, results


def logs(tmp_path, world):
    return "\n".join(f"--- rank {r}\n" + (tmp_path / f"rank{r}.log").read_text() for r in range(world))

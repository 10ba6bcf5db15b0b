#!/usr/bin/python3
"""One rank of the all_reduce micro-benchmark of `tenax bench python`:
float32 all_reduce (sum) through torch.distributed on --backend, from 4 KiB
to --max-bytes in powers of 4, each size repeated for about --seconds after
a warm-up; rank 0 prints one JSON line {"seconds": {bytes: median per op}}.

The result is checked each time (every element is the sum of the ranks'
values), so a backend cannot win by skipping work.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--master-port", type=int, required=True)
    p.add_argument("--backend", default="gloo")
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--seconds", type=float, default=1.0, help="per size, after the warm-up")
    a = p.parse_args()
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(a.master_port)})
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if a.backend == "tenax":
        import tenax.torch  # noqa: F401
    dist.init_process_group(a.backend, rank=a.rank, world_size=a.world, timeout=datetime.timedelta(seconds=120))
    torch.set_num_threads(1)
    want = float(sum(range(1, a.world + 1)))
    out = {}
    size = 4096
    while size <= a.max_bytes:
        n = size // 4
        t = torch.empty(n)
        times = []
        for i in range(3 + 1000):
            t.fill_(float(a.rank + 1))
            # Every rank runs the same number of ops: rank 0 decides when to stop.
            go = torch.tensor([1 if i < 3 or sum(times) < a.seconds else 0], dtype=torch.int32)
            dist.broadcast(go, src=0)
            if not go.item():
                break
            start = time.perf_counter()
            dist.all_reduce(t)
            elapsed = time.perf_counter() - start
            if t[0].item() != want or t[-1].item() != want:
                sys.exit(f"rank {a.rank}: all_reduce of {size} bytes gave {t[0].item()}, want {want}")
            if i >= 3:
                times.append(elapsed)
        out[str(size)] = statistics.median(times)
        size *= 4
    if a.rank == 0:
        print(json.dumps({"backend": a.backend, "world": a.world, "seconds": out}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

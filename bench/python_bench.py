#!/usr/bin/python3
"""The driver of `tenax bench python`: tenax's torch.distributed backend
against Gloo, in the same run, on the same scripts.

1. Stock DDP, 2 processes (bench/pytorch_ddp_train.py, batch 64 per rank,
   SGD momentum 0.9, the same data order on both sides), backend="tenax" vs
   backend="gloo", for the cnn (0.42M parameters), an MLP of 11.9M
   (--model big, the >= 10M target's model: 47.6 MB of gradients a step,
   a third or more of a Gloo step exposed) and an embedding model of 12.8M
   (--model wide: little compute, 51 MB of gradients). Rounds alternate the backends. A run with DDP's
   no_sync() (no gradient allreduce) measures the compute alone, so the
   share of a Gloo step that communication leaves exposed, and the ceiling
   1 / (1 - share) of any backend's speed-up, are printed too.
2. all_reduce of float32 from 4 KiB to 64 MiB through torch.distributed
   (bench/torch_collectives.py), 2 and 4 processes, tenax vs gloo.

Prints a table and, with --json FILE, writes every number. The tenax
package must be importable (PYTHONPATH=build/python; `tenax bench python`
sets it).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(argv_of_rank, world, timeout):
    """Starts `world` processes, waits (bounded), returns rank 0's last JSON line."""
    procs = [subprocess.Popen(argv_of_rank(r), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(world)]
    deadline = time.time() + timeout
    outs = [None] * world
    try:
        for r, p in enumerate(procs):
            outs[r] = p.communicate(timeout=max(1, deadline - time.time()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for r, p in enumerate(procs):
        if p.returncode != 0:
            tail = (outs[r][1] if outs[r] else "").strip().splitlines()[-5:]
            raise RuntimeError(f"rank {r} ({' '.join(argv_of_rank(r)[:3])} ...) exited with {p.returncode}: "
                               + " | ".join(tail))
    lines = [l for l in outs[0][0].splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError("rank 0 printed no JSON result")
    return json.loads(lines[-1])


def ddp(a, backend, model, steps, no_sync=False):
    port = free_port()
    script = os.path.join(HERE, "pytorch_ddp_train.py")

    def argv(r):
        cmd = [sys.executable, script, "--rank", str(r), "--world", "2", "--master-port", str(port),
               "--backend", backend, "--model", model, "--batch-size", "64", "--threads", "1",
               "--max-steps", str(steps), "--warmup-steps", str(a.warmup), "--data", a.data,
               "--test-limit", str(a.test_limit)]
        return cmd + (["--no-sync"] if no_sync else [])

    return run_ranks(argv, 2, a.timeout)


def collectives(a, backend, world):
    port = free_port()
    script = os.path.join(HERE, "torch_collectives.py")
    return run_ranks(lambda r: [sys.executable, script, "--rank", str(r), "--world", str(world), "--master-port",
                                str(port), "--backend", backend, "--max-bytes", str(a.max_bytes),
                                "--seconds", str(a.op_seconds)], world, a.timeout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one round, fewer steps (about 3 minutes)")
    p.add_argument("--json", help="write every number here")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--timeout", type=float, default=600, help="seconds per run before it is killed")
    a = p.parse_args()
    a.rounds = 1 if a.quick else 3
    a.warmup = 10
    a.test_limit = 2000 if a.quick else 0
    a.max_bytes = 64 << 20
    a.op_seconds = 0.5 if a.quick else 1.5
    steps = {"cnn": 160 if a.quick else 400, "big": 60 if a.quick else 150, "wide": 60 if a.quick else 150}

    report = {"benchmark": "python", "quick": a.quick, "ddp": {}, "allreduce": {}}
    for model in ("cnn", "big", "wide"):
        rows = {"tenax": [], "gloo": []}
        for rnd in range(a.rounds):
            order = ("gloo", "tenax") if rnd % 2 == 0 else ("tenax", "gloo")
            for backend in order:
                r = ddp(a, backend, model, steps[model])
                rows[backend].append(r)
                print(f"[bench] ddp {model} {backend} round {rnd + 1}/{a.rounds}: "
                      f"{r['samples_per_second']:.0f} samples/s, test accuracy {r['test_accuracy']:.4f}", flush=True)
        compute = ddp(a, "gloo", model, steps[model], no_sync=True)
        med = {b: statistics.median(x["samples_per_second"] for x in rows[b]) for b in rows}
        exposed = max(0.0, 1.0 - med["gloo"] / compute["samples_per_second"])
        report["ddp"][model] = {
            "rounds": rows, "median_samples_per_second": med, "ratio": med["tenax"] / med["gloo"],
            "compute_only_samples_per_second": compute["samples_per_second"], "gloo_exposed_share": exposed,
            "ceiling": 1.0 / (1.0 - exposed) if exposed < 1 else None,
            "accuracy": {b: [x["test_accuracy"] for x in rows[b]] for b in rows}}
    for world in (2, 4):
        per = {b: collectives(a, b, world) for b in ("gloo", "tenax")}
        report["allreduce"][str(world)] = per
        print(f"[bench] allreduce, {world} processes: done", flush=True)

    print()
    print(f"{'DDP, 2 processes':24} {'tenax/s':>10} {'gloo/s':>10} {'ratio':>7} {'gloo exposed':>13} {'ceiling':>8}"
          f" {'acc tenax':>10} {'acc gloo':>9}")
    for model, d in report["ddp"].items():
        m = d["median_samples_per_second"]
        print(f"{model:24} {m['tenax']:10.0f} {m['gloo']:10.0f} {d['ratio']:7.2f} {d['gloo_exposed_share']:13.2f}"
              f" {d['ceiling'] or float('inf'):8.2f} {statistics.median(d['accuracy']['tenax']):10.4f}"
              f" {statistics.median(d['accuracy']['gloo']):9.4f}")
    print()
    print(f"{'all_reduce float32':24} " + " ".join(f"{'tenax ' + str(w) + 'p':>10} {'gloo ' + str(w) + 'p':>10} "
                                                   f"{'ratio':>6}" for w in (2, 4)))
    sizes = report["allreduce"]["2"]["tenax"]["seconds"].keys()
    for size in sizes:
        cells = []
        for w in ("2", "4"):
            t, g = report["allreduce"][w]["tenax"]["seconds"][size], report["allreduce"][w]["gloo"]["seconds"][size]
            cells.append(f"{t * 1e3:9.3f}ms {g * 1e3:9.3f}ms {t / g:6.2f}")
        print(f"{int(size) // 1024:>20} KiB " + " ".join(cells))
    big = str(a.max_bytes)
    targets = {
        "ddp_big_ratio": (report["ddp"]["big"]["ratio"], ">=", 1.2),
        "ddp_cnn_ratio": (report["ddp"]["cnn"]["ratio"], ">=", 1.0),
        "allreduce_64MiB_2p": (report["allreduce"]["2"]["tenax"]["seconds"][big]
                               / report["allreduce"]["2"]["gloo"]["seconds"][big], "<=", 0.5),
        "allreduce_64MiB_4p": (report["allreduce"]["4"]["tenax"]["seconds"][big]
                               / report["allreduce"]["4"]["gloo"]["seconds"][big], "<=", 0.5),
    }
    report["targets"] = {}
    print()
    for name, (value, cmp, limit) in targets.items():
        met = value >= limit if cmp == ">=" else value <= limit
        report["targets"][name] = {"value": value, "target": f"{cmp} {limit}", "met": met}
        print(f"target {name}: {value:.2f} {cmp} {limit}: {'met' if met else 'NOT met'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()

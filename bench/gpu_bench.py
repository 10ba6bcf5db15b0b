#!/usr/bin/python3
"""tenax bench gpu: tenax against PyTorch on the same GPU, in the same run.

Sections (each prints its table and goes into --json):
  single   one process: tenax train vs a PyTorch loop (pytorch_gpu_train.py)
           for the cnn at batch 64 and 512 and ResNet-18 (torchvision,
           scripted for tenax) at batch 128 on Fashion-MNIST padded to
           3x32x32; samples/s, ratio tenax / PyTorch.
  sync2    two processes sharing the GPU, sync data parallel, ResNet-18,
           batch 128 each: tenax run (gradients staged through pinned host
           memory) vs DDP over Gloo on CUDA tensors; both against one
           PyTorch process at batch 128; the workers' parameter hashes, the
           staging time per step and the bytes staged.
  elastic  three GPU workers under tenax run, one SIGKILLed at a third and a
           joiner admitted: reform time after detection, the finishers'
           parameter hashes.
  staging  the CPU side (any machine): tenax run sync with the gradients
           staged (train.staging = "always") vs not, cnn, 2 workers.
On a machine without a GPU only `staging` runs.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "pytorch_gpu_train.py")
FMNIST = "/usr/share/datasets/fashion-mnist"


def tenax_binary():
    b = os.environ.get("TENAX_BINARY") or os.path.join(os.path.dirname(HERE), "tenax")
    if not os.path.exists(b):
        sys.exit(f"gpu_bench: no tenax binary at {b} (set TENAX_BINARY)")
    return b


def have_gpu(python):
    out = subprocess.run([python, "-c", "import torch;print(torch.cuda.is_available())"], capture_output=True,
                         text=True)
    return out.stdout.strip() == "True"


def run(cmd, timeout, env=None, cwd=None):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode} after {time.time() - t0:.0f} s:\n"
                           f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def write_resnet_inputs(work, python):
    """Fashion-MNIST padded to 32x32 and repeated to 3 channels (npy, uint8),
    and ResNet-18 scripted for tenax (model.path)."""
    npy = os.path.join(work, "npy")
    os.makedirs(npy, exist_ok=True)
    sys.path.insert(0, HERE)
    from pytorch_gpu_train import read_idx  # noqa: E402
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x = read_idx(os.path.join(FMNIST, prefix + "-images-idx3-ubyte.gz"))
        y = read_idx(os.path.join(FMNIST, prefix + "-labels-idx1-ubyte.gz"))
        x = np.pad(x, ((0, 0), (2, 2), (2, 2)))
        x = np.ascontiguousarray(np.repeat(x[:, None, :, :], 3, axis=1))
        np.save(os.path.join(npy, f"{split}_images.npy"), x)
        np.save(os.path.join(npy, f"{split}_labels.npy"), y.astype(np.int64))
    model = os.path.join(work, "resnet18.pt")
    run([python, "-c", "import sys; sys.path.insert(0, sys.argv[2]); import torch; from pytorch_gpu_train import "
         "make_model; torch.manual_seed(1); torch.jit.script(make_model('resnet18')).save(sys.argv[1])", model, HERE],
        300)
    return npy, model


def job_text(mode, model, batch, steps, device, npy=None, model_path=None, workers=1, staging=None,
             extra="", train_extra=()):
    lines = [f'mode = "{mode}"']
    if mode == "sync":
        lines += ["[cluster]", f"workers = {workers}", 'job_id = "bench-gpu"', 'coordinator = "127.0.0.1:0"',
                  'host = "127.0.0.1"', "step_timeout_seconds = 120",
                  f"peer_timeout_seconds = {60 if device == 'cpu' and model == 'resnet18' else 10}"]
    lines += ["[data]"]
    if npy:
        lines += ['format = "npy"'] + [f'{k} = "{os.path.join(npy, k + ".npy")}"' for k in
                                        ("train_images", "train_labels", "test_images", "test_labels")]
        lines += ["test_limit = 2000"]
    else:
        lines += [f'dir = "{FMNIST}"', "test_limit = 2000"]
    lines += ["[model]", f'path = "{model_path}"' if model_path else f'name = "{model}"']
    lines += ["[train]", f"epochs = 100", f"max_steps = {steps}", f"batch_size = {batch}", 'optimizer = "sgd"',
              "lr = 0.02", "momentum = 0.9", "seed = 1", "threads = 2", f'device = "{device}"']
    if staging:
        lines += [f'staging = "{staging}"']
    lines += list(train_extra)
    lines += ["[log]", "every_steps = 100", extra]
    return "\n".join(lines) + "\n"


def write_job(work, name, text):
    """work/name/job.toml holding `text`; returns (job file, output folder)."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    job = os.path.join(d, "job.toml")
    with open(job, "w") as f:
        f.write(text)
    return job, os.path.join(d, "out")


def tenax_train(work, name, text):
    job, out = write_job(work, name, text)
    run([tenax_binary(), "train", "--config", job, "--out", out], 900)
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def tenax_run(work, name, text, timeout=900):
    job, out = write_job(work, name, text)
    run([tenax_binary(), "run", job, "--out", out], timeout)
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    hashes = {}
    for log in sorted(glob.glob(os.path.join(out, "logs", "worker-*.log")) +
                      glob.glob(os.path.join(out, "logs", "joiner-*.log"))):
        with open(log, errors="replace") as f:
            m = re.findall(r"final parameters fnv1a ([0-9a-f]{16})", f.read())
        if m:
            hashes[os.path.basename(log)] = m[-1]
    return summary, hashes, out


def peer(python, args, timeout=900, env=None):
    return json.loads(run([python, PEER] + args, timeout, env=env).strip().splitlines()[-1])


def ddp_peer(python, args, world, timeout=900):
    port = str(20000 + os.getpid() % 10000)
    procs = []
    for r in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(r), WORLD_SIZE=str(world))
        procs.append(subprocess.Popen([python, PEER, "--ddp"] + args, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env))
    outs = []
    try:
        for p in procs:
            o, e = p.communicate(timeout=timeout)
            if p.returncode != 0:
                raise RuntimeError(f"DDP rank exited {p.returncode}:\n{e[-3000:]}")
            outs.append(o)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return json.loads(outs[0].strip().splitlines()[-1])


def section_single(a, work, results):
    steps = {"cnn64": 400 if a.quick else 1500, "cnn512": 300 if a.quick else 1000, "resnet128": 150 if a.quick else 500}
    rows = []
    for key, model, batch in (("cnn64", "cnn", 64), ("cnn512", "cnn", 512), ("resnet128", "resnet18", 128)):
        npy = model_path = None
        if model == "resnet18":
            npy, model_path = results["_resnet_inputs"]
        n = 12 if a.dry_run else steps[key]
        t = tenax_train(work, f"single-{key}", job_text("single", model, batch, n, a.device, npy=npy,
                                                        model_path=model_path))
        pargs = ["--model", model, "--batch-size", str(batch), "--steps", str(n), "--device", a.device,
                 "--warmup-steps", str(min(30, n // 3))]
        if npy:
            pargs += ["--npy-dir", npy]
        p = peer(a.python, pargs)
        rows.append({"case": f"{model} batch {batch}", "tenax": t["steady_samples_per_second"],
                     "pytorch": p["samples_per_second"], "ratio": t["steady_samples_per_second"] / p["samples_per_second"],
                     "tenax_device": t.get("device"), "train_data_on": t.get("train_data_on", "host")})
        if a.data_on_host_too:  # the same run with the batches gathered on the host (pinned, copied ahead)
            h = tenax_train(work, f"single-{key}-host", job_text("single", model, batch, n, a.device, npy=npy,
                                                                 model_path=model_path,
                                                                 train_extra=['resident_data = "off"']))
            rows[-1]["tenax_data_on_host"] = h["steady_samples_per_second"]
        print(f"single  {rows[-1]['case']:<20} tenax {rows[-1]['tenax']:>10.0f}/s  pytorch {rows[-1]['pytorch']:>10.0f}/s"
              f"  ratio {rows[-1]['ratio']:.2f}  (target >= 1.0; data on {rows[-1]['train_data_on']}"
              + (f"; data on the host: {rows[-1]['tenax_data_on_host']:.0f}/s" if a.data_on_host_too else "") + ")",
              flush=True)
    results["single"] = rows


def section_sync2(a, work, results):
    npy, model_path = results["_resnet_inputs"]
    steps = 12 if a.dry_run else 150 if a.quick else 500
    summary, hashes, out = tenax_run(work, "sync2", job_text("sync", "resnet18", 128, steps, a.device, npy=npy,
                                                             model_path=model_path, workers=2))
    pargs = ["--model", "resnet18", "--batch-size", "128", "--steps", str(steps), "--npy-dir", npy,
             "--device", a.device, "--warmup-steps", str(min(30, steps // 3))]
    ddp = ddp_peer(a.python, pargs + ["--eval", "--test-limit", "2000"], 2)  # tenax's job evaluates 2000 too
    one = next((r["pytorch"] for r in results.get("single", []) if r["case"] == "resnet18 batch 128"), None)
    if one is None:
        one = peer(a.python, pargs)["samples_per_second"]
    t = summary["steady_samples_per_second"] if "steady_samples_per_second" in summary else summary["samples_per_second"]
    row = {"tenax": t, "ddp_gloo": ddp["samples_per_second"], "one_process": one,
           "vs_ddp": t / ddp["samples_per_second"], "vs_one_process": t / one, "worker_hashes": hashes,
           "hashes_equal": len(set(hashes.values())) == 1 and len(hashes) == 2,
           "staging": summary.get("staging"), "test_accuracy": summary.get("final_test_accuracy"),
           "ddp_test_accuracy": ddp.get("test_accuracy")}
    for kib in a.sync2_bucket_kib:  # tenax alone with other bucket sizes
        s2, h2, _ = tenax_run(work, f"sync2-{kib}", job_text("sync", "resnet18", 128, steps, a.device, npy=npy,
                                                             model_path=model_path, workers=2,
                                                             train_extra=[f"bucket_kib = {kib}"]))
        row.setdefault("tenax_by_bucket_kib", {})[str(kib)] = {
            "samples_per_second": s2.get("steady_samples_per_second", s2["samples_per_second"]),
            "staging": s2.get("staging"), "hashes_equal": len(set(h2.values())) == 1 and len(h2) == 2}
        print(f"sync2   bucket {kib} KiB: tenax {row['tenax_by_bucket_kib'][str(kib)]['samples_per_second']:.0f}/s",
              flush=True)
    results["sync2"] = row
    print(f"sync2   resnet18 2x128 on one GPU: tenax {t:.0f}/s, DDP-Gloo {ddp['samples_per_second']:.0f}/s "
          f"({row['vs_ddp']:.2f}x, target >= 1.5), one process {one:.0f}/s ({row['vs_one_process']:.2f}x, target >= 0.65); "
          f"hashes equal: {row['hashes_equal']}; staging {row['staging']}; test accuracy tenax {row['test_accuracy']} "
          f"vs DDP {row['ddp_test_accuracy']} (target: within 1 point)", flush=True)


def section_staging(a, work, results):
    rounds = 1 if a.quick else 3
    steps = 60 if a.dry_run else 300 if a.quick else 800
    got = {"auto": [], "always": []}
    for _ in range(rounds):
        for staging in ("auto", "always"):
            s, _, _ = tenax_run(work, f"staging-{staging}", job_text("sync", "cnn", 32, steps, "cpu",
                                                                     workers=2, staging=staging).replace(
                "threads = 2", "threads = 1"))
            got[staging].append(s["samples_per_second"])
    plain, staged = float(np.median(got["auto"])), float(np.median(got["always"]))
    results["staging"] = {"unstaged": plain, "staged": staged, "cost": 1 - staged / plain, "rounds": rounds}
    print(f"staging cnn 2x32 on the CPU: unstaged {plain:.0f}/s, staged {staged:.0f}/s, cost {100 * (1 - staged / plain):.1f}%"
          f" (target <= 5%)", flush=True)


def section_elastic(a, work, results):
    steps = 60 if a.dry_run else 4500 if a.quick else 9000  # long enough for a joiner's CUDA start-up
    extra = "\n".join(["[[faults]]", 'action = "kill"', "worker = 1", f"at_step = {steps // 3}", "[[faults]]",
                       'action = "restart"', f"at_step = {steps // 3}", "delay_seconds = 1"])
    text = job_text("sync", "cnn", 32, steps, device=a.device, workers=3, extra=extra)
    text = text.replace('host = "127.0.0.1"', 'host = "127.0.0.1"\nelastic = true\nmin_workers = 1\nmax_workers = 4'
                        '\njoin_timeout_seconds = 60').replace("peer_timeout_seconds = 10", "peer_timeout_seconds = 4")
    summary, hashes, _ = tenax_run(work, "elastic", text)
    gens = summary.get("generations", [])
    lost = next((g for g in gens if "lost" in g.get("why", "")), {})
    joined = next((g for g in gens if "joined" in g.get("why", "")), {})
    first = gens[0]["members"] if gens else []
    survivors = [m for m in first if m in lost.get("members", [])]
    kept = bool(survivors) and all(m in joined.get("members", []) for m in survivors)
    row = {"detect_ms": lost.get("detect_ms"), "reform_ms": lost.get("reform_ms"),
           "join_reform_ms": joined.get("reform_ms"), "join_transfer_ms": joined.get("join_transfer_ms"),
           "survivor_members_kept": kept, "finisher_hashes": hashes,
           "hashes_equal": len(set(hashes.values())) == 1 and len(hashes) == 3, "device": summary.get("device"),
           "test_accuracy": summary.get("final_test_accuracy")}
    results["elastic"] = row
    print(f"elastic 3 workers on {row['device']}: a SIGKILL detected in {row['detect_ms']} ms, re-formed in "
          f"{row['reform_ms']} ms after detection (target <= 500); joiner admitted (re-form {row['join_reform_ms']} ms, "
          f"state copy {row['join_transfer_ms']} ms); survivors kept their processes: {kept}; "
          f"3 finishers' hashes equal: {row['hashes_equal']}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--sections", default="single,sync2,elastic,staging")
    p.add_argument("--data-on-host-too", action="store_true",
                   help="single: also run tenax with train.resident_data = \"off\" (batches gathered on the host)")
    p.add_argument("--sync2-bucket-kib", default="",
                   help="sync2: also run tenax with these train.bucket_kib values (comma-separated)")
    p.add_argument("--dry-run", action="store_true",
                   help="every section on the CPU with a few steps: checks the bench itself, measures nothing")
    a = p.parse_args()
    a.sync2_bucket_kib = [int(k) for k in a.sync2_bucket_kib.split(",") if k]
    a.device = "cpu" if a.dry_run else "cuda"
    gpu = a.dry_run or have_gpu(a.python)
    wanted = [s for s in a.sections.split(",") if s]
    if not gpu:
        print("gpu_bench: no GPU visible: only the CPU-side section (staging) runs", flush=True)
        wanted = [s for s in wanted if s == "staging"]
    results = {"quick": a.quick, "gpu": gpu}
    work = tempfile.mkdtemp(prefix="tenax-bench-gpu-")
    try:
        if any(s in wanted for s in ("single", "sync2", "elastic")):
            results["_resnet_inputs"] = write_resnet_inputs(work, a.python)
        for s in wanted:
            fn = {"single": section_single, "sync2": section_sync2, "staging": section_staging,
                  "elastic": section_elastic}[s]
            try:
                fn(a, work, results)
            except Exception as e:  # a section that fails is reported; the others still run
                results[s] = {"error": str(e)[-4000:]}
                print(f"{s}: FAILED: {str(e)[-4000:]}", flush=True)
            if a.json:  # after each section: a run cut short keeps what it measured
                with open(a.json, "w") as f:
                    json.dump({k: v for k, v in results.items() if not k.startswith("_")}, f, indent=2)
    finally:
        results.pop("_resnet_inputs", None)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(results, f, indent=2)
        shutil.rmtree(work, ignore_errors=True)
    failed = [s for s in wanted if isinstance(results.get(s), dict) and "error" in results[s]]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

"""`tenax run` with Python workers ([worker] command): examples/python/elastic.py
as each worker of a real job, with the job file's own fault plan (a real
SIGKILL, a replacement that joins, a real SIGTERM). The launcher's outputs
must describe what the script did: summary.json holds the steps, the final
accuracy the script measured and the state hash every finisher printed;
metrics.jsonl holds the losses rank 0 logged; the faults are recorded as
recovered. A script that fails and a command that cannot run get their
errors."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

SOURCE = Path(os.environ["TENAX_SOURCE_DIR"])
SCRIPT = SOURCE / "examples" / "python" / "elastic.py"
TENAX = os.environ["TENAX_BINARY"]
STEPS = 240
LOG_EVERY = 10


def run(job_text, tmp_path, timeout=300):
    job = tmp_path / "job.toml"
    job.write_text(job_text)
    out = tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("TENAX_SECRET", None)
    p = subprocess.Popen([TENAX, "run", str(job), "--out", str(out)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        text, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()  # the launcher stops and reaps its children on SIGTERM
        try:
            text, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
        raise AssertionError(f"tenax run did not end within {timeout} s:\n{text}")
    return p.returncode, text, out


def elastic_job(command, faults="", workers=3, steps=STEPS, job_id="python-run-test", max_workers=4):
    """An elastic job of `workers` members of `command` (1 to `max_workers`),
    trained for `steps`; `faults` is appended (a fault plan, or any tables
    that follow [report])."""
    return f"""mode = "sync"
[cluster]
workers = {workers}
job_id = "{job_id}"
elastic = true
min_workers = 1
max_workers = {max_workers}
peer_timeout_seconds = 4
join_timeout_seconds = 60
[worker]
command = {json.dumps(command)}
[train]
max_steps = {steps}
[report]
html = false
{faults}"""


FAULTS = """
[[faults]]
action = "kill"
worker = 1
at_step = 60

[[faults]]
action = "restart"
at_step = 60
delay_seconds = 1

[[faults]]
action = "preempt"
worker = 2
at_step = 160
grace_seconds = 30
"""


def final_line(log):
    m = re.search(r"rank \d+: (\d+) steps in .* param-hash ([0-9a-f]{64})", log)
    return (int(m.group(1)), m.group(2)) if m else None


def test_the_job_files_faults_run_on_python_workers_and_the_outputs_are_the_scripts(tmp_path):
    command = [sys.executable, str(SCRIPT), "--train-limit", "8192", "--test-limit", "1000",
               "--log-every", str(LOG_EVERY)]
    code, text, out = run(elastic_job(command, FAULTS), tmp_path)
    assert code == 0, text
    logs = {p.name: p.read_text() for p in (out / "logs").iterdir()}
    assert {"worker-0.log", "worker-1.log", "worker-2.log", "joiner-1.log"} <= set(logs), sorted(logs)

    # The finishers (worker 0 and the joiner) ran every step and agree bit for bit.
    finishers = {name: final_line(logs[name]) for name in ("worker-0.log", "joiner-1.log")}
    assert all(f is not None for f in finishers.values()), logs
    assert {f[0] for f in finishers.values()} == {STEPS}
    hashes = {f[1] for f in finishers.values()}
    assert len(hashes) == 1, finishers
    assert "left the job at step" in logs["worker-2.log"], logs["worker-2.log"]
    assert final_line(logs["worker-1.log"]) is None  # SIGKILLed: it never finished

    s = json.loads((out / "summary.json").read_text())
    assert s["steps"] == STEPS and s["worker_command"] is True
    assert s["state_hash"] == hashes.pop()
    accuracy = float(re.search(r"test accuracy ([0-9.]+)", logs["worker-0.log"]).group(1))
    assert abs(s["final_test_accuracy"] - accuracy) < 5e-5  # the script printed it with 4 digits
    assert accuracy > 0.6, f"the model did not learn: {accuracy}"

    # One generation per membership change, from the script's Manager: the
    # kill first; the join and the preemption in either order (a joiner
    # slow to start on a loaded machine may arrive after step 160).
    gens = s["generations"]
    assert len(gens) == 4, gens
    assert len(gens[0]["members"]) == 3 and gens[0]["first_step"] == 0, gens
    assert len(gens[1]["members"]) == 2 and "rank 1 lost" in gens[1]["why"] and gens[1]["first_step"] >= 59, gens
    assert sorted("joined" in g["why"] for g in gens[2:]) == [False, True], gens
    left = next(g for g in gens[2:] if "left" in g["why"])
    assert "rank 2 left" in left["why"] and left["first_step"] >= 159, gens
    assert len(gens[3]["members"]) == 2, gens
    firsts = [g["first_step"] for g in gens]
    assert firsts == sorted(firsts), firsts

    # The fault plan ran and each fault was recovered from.
    faults = s["faults"]
    assert [f["action"] for f in faults] == ["kill", "restart", "preempt"], faults
    assert all(f.get("recovered") is True for f in faults), faults

    # metrics.jsonl: the losses rank 0 logged, at its log steps (worker 0 is
    # rank 0 throughout: it is never the target), and the final accuracy.
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = {r["step"]: r["loss"] for r in records if r.get("event") == "train"}
    printed = {int(m.group(1)): float(m.group(2))
               for m in re.finditer(r"step (\d+)/\d+ rank 0/\d+ generation \d+ loss ([0-9.]+)", logs["worker-0.log"])}
    # Every record is one rank 0 printed (the script reports right before it
    # prints). A step rank 0 dropped while the others committed it (a member
    # lost mid-allreduce) is applied from their state and logged by nobody,
    # so a log step near a fault may be missing from both.
    assert sorted(printed) == sorted(train)
    assert all(step % LOG_EVERY == 0 for step in train), sorted(train)
    assert len(train) >= STEPS // LOG_EVERY - 3 and STEPS in train, sorted(train)
    for step, loss in train.items():
        assert abs(loss - printed[step]) < 5e-5, (step, loss, printed[step])
    final = [r for r in records if r.get("event") == "final"]
    assert len(final) == 1 and abs(final[0]["test_accuracy"] - accuracy) < 5e-5, final

    # The live view showed the script's progress against the job file's steps.
    assert re.search(rf"step \d+/{STEPS} loss", text), text

    # The launcher passes OpenBLAS's advice on: its workers load the same
    # library in the same environment. (The launcher links torch too.)
    from tenax import _tenax
    advice = _tenax.openblas_advice()
    if advice:
        assert "note: " + advice in text, text
    else:
        assert "OPENBLAS_CORETYPE" not in text, text


def test_a_warm_spare_of_the_users_program_takes_a_killed_workers_place(tmp_path):
    """cluster.spares = 1 with a worker command: tenax run starts the script
    as a spare too (TENAX_SPARE=1). Worker 1 is SIGKILLed: the spare is
    admitted in its place at once (the loss generation has 3 members, no
    generation of 2) and finishes bit-identical to worker 0; the launcher
    starts the next spare, which the job never needs and which is released
    when the job is done."""
    command = [sys.executable, str(SCRIPT), "--train-limit", "8192", "--test-limit", "1000",
               "--log-every", str(LOG_EVERY)]
    job = elastic_job(command, "\n[[faults]]\naction = \"kill\"\nworker = 1\nat_step = 60\n")
    job = job.replace("max_workers = 4", "max_workers = 3\nspares = 1")
    code, text, out = run(job, tmp_path)
    assert code == 0, text
    logs = {p.name: p.read_text() for p in (out / "logs").iterdir()}
    assert {"worker-0.log", "worker-1.log", "worker-2.log", "spare-1.log", "spare-2.log"} <= set(logs), sorted(logs)
    assert re.search(r"spare \d+: admitted after [0-9.]+ s as rank \d of 3", logs["spare-1.log"]), logs["spare-1.log"]
    finishers = {name: final_line(logs[name]) for name in ("worker-0.log", "worker-2.log", "spare-1.log")}
    assert set(finishers.values()) == {(STEPS, finishers["worker-0.log"][1])}, finishers
    # The next spare was not needed: released when the job was done, it
    # either says so or, still starting (its Manager not made yet, so no
    # handler), ends on the SIGTERM itself; it never trained.
    spare_2 = logs["spare-2.log"]
    assert "admitted" not in spare_2 and "step " not in spare_2 and "Traceback" not in spare_2, spare_2
    assert re.search(r"spare 2: spare -> left \(not needed: the job is done\)", text), text

    s = json.loads((out / "summary.json").read_text())
    assert s["state_hash"] == finishers["worker-0.log"][1]
    assert s["spares"] == {"configured": 1, "started": 2, "admitted": 1, "exited_on_their_own": 0}, s["spares"]
    # The kill's generation took the spare in: 3 members before and after.
    gens = s["generations"]
    assert len(gens) == 2 and [g["members"] for g in gens] == [[0, 1, 2], [0, 2, 3]], gens  # coordinator ids
    assert "rank 1 lost" in gens[1]["why"] and gens[1]["first_step"] >= 59, gens
    assert [f["action"] for f in s["faults"]] == ["kill"] and s["faults"][0].get("recovered") is True, s["faults"]


def test_a_warm_spare_takes_the_place_of_a_worker_that_failed_before_the_job_formed(tmp_path):
    """A worker that fails on its own before the job formed (worker 1's
    script exits 1 at once: a machine without what the script needs) used
    to fail the whole run ("cannot start, a worker failed before every
    worker had joined"), spare or not. With cluster.spares = 1 the launcher
    tells the coordinator, the spare waiting beside the forming job takes
    the place in the first generation, entering with its initial model, and
    all three finish bit-identical."""
    python = [sys.executable, str(SCRIPT), "--train-limit", "8192", "--test-limit", "1000",
              "--log-every", str(LOG_EVERY)]
    wrapper = ('if [ "$TENAX_RANK" = 1 ]; then echo "worker 1: no usable accelerator on this machine" >&2; exit 1; '
               'fi; exec "$@"')
    job = elastic_job(["/bin/sh", "-c", wrapper, "sh"] + python)
    job = job.replace("max_workers = 4", "max_workers = 3\nspares = 1")
    code, text, out = run(job, tmp_path)
    assert code == 0, text
    assert "worker 1: starting -> failed (exited with code 1: worker 1: no usable accelerator on this machine)" in text, text
    assert ("all 3 workers joined (spare 3 in place of rank 1, lost before the job formed)" in text), text
    logs = {p.name: p.read_text() for p in (out / "logs").iterdir()}
    assert re.search(r"spare 3: admitted after [0-9.]+ s as rank 2 of 3 in generation 1", logs["spare-1.log"]), \
        logs["spare-1.log"]
    finishers = {name: final_line(logs[name]) for name in ("worker-0.log", "worker-2.log", "spare-1.log")}
    assert set(finishers.values()) == {(STEPS, finishers["worker-0.log"][1])}, finishers
    s = json.loads((out / "summary.json").read_text())
    assert s["state_hash"] == finishers["worker-0.log"][1]
    assert [g["members"] for g in s["generations"]] == [[0, 2, 3]], s["generations"]
    assert "spare 3 in place of rank 1" in s["generations"][0]["why"], s["generations"]
    assert s["spares"]["admitted"] == 1, s["spares"]


def test_a_script_that_fails_is_named_with_its_logs_last_line(tmp_path):
    command = [sys.executable, "-c",
               "import sys; print('loading', flush=True); "
               "sys.exit('cannot read /nonexistent/train-images: no such file')"]
    code, text, _ = run(elastic_job(command), tmp_path, timeout=120)
    assert code == 3, text  # tenax run's status for a job that failed (docs/config.md "Exit status")
    assert "worker 0 exited with code 1" in text or "exited with code 1" in text, text
    assert "cannot read /nonexistent/train-images: no such file" in text, text


def test_a_command_that_cannot_run_is_refused_before_anything_starts(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('never')\n")  # not executable
    code, text, out = run(elastic_job([str(script)]), tmp_path, timeout=60)
    assert code == 2, text
    assert f"'worker.command' '{script}' is not an executable file" in text, text
    assert not (out / "logs").exists()
    code, text, _ = run(elastic_job(["no-such-python-anywhere", "train.py"]), tmp_path, timeout=60)
    assert code == 2, text
    assert "'no-such-python-anywhere' is not found on PATH" in text, text


def test_python_workers_placed_on_emulated_hosts_advertise_their_hosts_address(tmp_path):
    """[topology] in namespaces: each worker runs on its emulated host and
    learns that host's address from TENAX_HOST (a member advertising
    127.0.0.1 there could not be reached by the others)."""
    if os.geteuid() != 0:
        import pytest
        pytest.skip("network namespaces need root")
    command = [sys.executable, str(SCRIPT), "--train-limit", "4096", "--test-limit", "500", "--model", "linear",
               "--log-every", "10"]
    job = elastic_job(command, """
[[faults]]
action = "kill"
worker = 1
at_step = 30
""").replace(f"max_steps = {STEPS}", "max_steps = 90") + """
[topology]
mode = "namespaces"
hosts = [
  { name = "a1", zone = "zone-a", slots = 2 },
  { name = "b1", zone = "zone-b", slots = 2 },
]
same_zone = { delay_ms = 0.05, bandwidth_gbps = 4 }
cross_zone = { delay_ms = 1.0, bandwidth_gbps = 1 }
"""
    code, text, out = run(job, tmp_path)
    assert code == 0, text
    s = json.loads((out / "summary.json").read_text())
    assert s["steps"] == 90, s
    assert s["placement"]["mode"] == "namespaces", s["placement"]
    assert sorted(slot["host"] for slot in s["placement"]["slots"])[0] in ("a1", "b1")
    # The lost member is named by the address it advertised: its host's.
    why = s["generations"][1]["why"]
    assert re.search(r"rank 1 lost \(10\.\d+\.\d+\.\d+/", why) and "127.0.0.1" not in why, why


def test_a_python_member_moves_live_off_a_host_whose_links_degrade(tmp_path):
    """placement.migrate with a worker command: 2 members of the user's
    program on three one-slot hosts of one zone (loopback emulation); at
    step 40 worker 1's host gets a bad NIC (every link 10x slower, 20 ms
    more each way, at the transport seam). The probes see it, the launcher
    starts the program as a migrant spare on the free host, and once it is
    warm worker 1 leaves at a step boundary (SIGTERM) and the migrant takes
    its place with the live state. Every step is trained, and the survivor
    and the migrant end bit-identical."""
    command = [sys.executable, str(SCRIPT), "--train-limit", "4096", "--test-limit", "500", "--model", "linear",
               "--log-every", "50"]
    job = elastic_job(command, workers=2, max_workers=2, steps=1500, job_id="python-migrate", faults="""[topology]
mode = "loopback"
hosts = [ { name = "a1", zone = "za" }, { name = "a2", zone = "za" }, { name = "a3", zone = "za" } ]
same_zone = { delay_ms = 0.0, bandwidth_gbps = 10 }
[placement]
probe_seconds = 2
migrate = true
link_half_life_seconds = 2
migrate_max_rtt_ms = 10
migrate_min_gbps = 0
[[faults]]
action = "slow_host"
factor = 10
delay_ms = 20
seconds = 3600
worker = 1
at_step = 40
""")
    code, text, out = run(job, tmp_path)
    assert code == 0, text
    s = json.loads((out / "summary.json").read_text())
    assert s["steps"] == 1500, s
    w1_host = next(slot["host"] for slot in s["placement"]["slots"] if slot["index"] == 1)
    free_host = ({"a1", "a2", "a3"} - {slot["host"] for slot in s["placement"]["slots"]}).pop()
    moves = [m for m in s["migrations"] if m["outcome"] != "skipped"]  # a noisy probe round may skip one
    assert len(moves) == 1 and moves[0]["outcome"] == "moved", s["migrations"]
    assert moves[0]["member"] == "worker 1" and moves[0]["from"] == f"{w1_host} (za)", moves
    assert moves[0]["to"] == f"{free_host} (za)" and "rtt" in moves[0]["reason"], moves
    assert f"migration done: worker 1 moved from {w1_host}" in text, text
    logs = {p.name: p.read_text() for p in (out / "logs").iterdir()}
    assert "is 10x slower" in logs["worker-1.log"], logs["worker-1.log"]
    assert re.search(r"spare \d+: admitted after [0-9.]+ s as rank \d of 2 in generation 2", logs["migrant-1.log"]), \
        logs["migrant-1.log"]
    assert "leaving" in logs["worker-1.log"] or "left the job" in logs["worker-1.log"], logs["worker-1.log"]
    finishers = {name: final_line(logs[name]) for name in ("worker-0.log", "migrant-1.log")}
    assert set(finishers.values()) == {(1500, finishers["worker-0.log"][1])}, finishers
    assert s["state_hash"] == finishers["worker-0.log"][1]
    gens = s["generations"]
    assert len(gens) == 2 and "rank 1 left" in gens[1]["why"], gens

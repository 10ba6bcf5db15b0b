"""Elastic training from your own PyTorch program: ``tenax.torch.Manager``.

A Manager makes this process a member of an elastic tenax job (a
``tenax coordinator --job JOB.toml`` whose ``[cluster]`` has
``elastic = true``). Members come and go between steps: survivors keep
their process and their model, a joiner receives the live state from a
member over tenax's one-sided reads (checksummed), and a SIGTERM makes this
member leave at the next step boundary at no cost to the others::

    manager = tenax.torch.Manager(state_dict=lambda: {"model": net.state_dict(), "opt": opt.state_dict()},
                                  load_state_dict=load)
    ddp = tenax.torch.DistributedDataParallel(net, manager)
    while manager.step < total_steps:
        if not manager.start_step():          # left the job (SIGTERM)
            break
        offset, count = manager.batch_slice(global_batch)   # this member's share of the step
        ... forward on samples [manager.step * global_batch + offset, ... + count) ...
        loss.backward()
        if manager.should_commit():            # averages the gradients; False when a member was lost mid-step
            opt.step()
    manager.finish()

Why a wrapper around DistributedDataParallel: PyTorch 1.13's DDP fixes its
process group's size at construction and runs collectives there (the
parameter check, the module-state broadcast), so a joiner building stock
DDP over the members would hang them. ``tenax.torch.DistributedDataParallel``
builds DDP over a one-process group (those collectives are then local);
the Manager averages the gradients over the members at should_commit, in
one canonical layout (DDP re-buckets after its first iteration, so a
joiner's buckets would not line up with the survivors'). The model's
state comes from the Manager instead: the first generation starts from
rank 0's, a joiner from a member's.

docs/python.md "Elastic training" has the whole protocol.
"""

import hashlib
import io
import os
import signal
import sys
import time
from datetime import timedelta
from typing import Any, Callable, Dict, Optional, Tuple

import torch
import torch.distributed as _dist

from .. import _tenax
from .run import RunOutputs

MembershipChanged = _tenax.MembershipChanged


class SpareNotNeeded(SystemExit):
    """Raised by a spare's Manager() when a SIGTERM ended its wait (the job
    finished, or ``tenax run`` no longer needs it). A SystemExit with code
    0: uncaught, the script ends quietly and successfully; catch it to
    clean up first."""

    def __init__(self, message: str):
        super().__init__(0)
        self.message = message

_CONTINUE, _REFORMED, _LEFT = 0, 1, 2
_NONE, _DONOR, _RECEIVER = 0, 1, 2


def _fingerprint(state: Dict[str, Any]) -> str:
    """The schema of a state dict (names, shapes and dtypes of its tensors,
    nested): members of one job must agree on it."""
    parts = []

    def walk(prefix, v):
        if isinstance(v, torch.Tensor):
            parts.append(f"{prefix}:{tuple(v.shape)}:{v.dtype}")
        elif isinstance(v, dict):
            for k in sorted(v, key=str):
                walk(f"{prefix}/{k}", v[k])
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(f"{prefix}/{i}", x)

    walk("", state)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


class Manager:
    """This process's membership in an elastic tenax job.

    Args:
        state_dict: returns everything a joiner needs (model, optimizer, any
            entries of yours), as ``torch.save`` can store it.
        load_state_dict: applies such a dict (on a joiner, and on a member
            that fell behind).
        coordinator: ``host:port`` of the job's coordinator (default:
            ``TENAX_COORDINATOR``).
        job_id: the job file's ``cluster.job_id`` (default: ``TENAX_JOB_ID``).
        rank: the rank to ask for in the first generation, or None/-1 for a
            joiner (default: ``TENAX_RANK``, else a joiner).
        secret: the cluster secret (default: ``TENAX_SECRET``).
        timeout: bound on every collective, state transfer and re-form.
        join_timeout: bound on joining and on the first generation.
        handle_sigterm: install a SIGTERM handler that makes this member
            leave at the next step boundary (a preemption notice).
        total_steps: the steps the job will run, for the progress the
            coordinator shows (default: ``TENAX_TOTAL_STEPS``, which ``tenax
            run`` sets from the job file's ``train.max_steps``; else unknown).
        spare: wait as a warm spare (default: ``TENAX_SPARE=1``, which
            ``tenax run`` sets for ``cluster.spares``): the constructor joins
            the coordinator and returns only once a member was lost or left
            and the coordinator admitted this process in its place (it then
            receives the state as any joiner). The model, data and
            connections are ready before, so the place is taken at the next
            generation instead of after a process start. A SIGTERM while
            waiting raises SpareNotNeeded (exit code 0).

    Raises RuntimeError when the coordinator refuses the join (another job,
    another state schema, a rank taken) or does not answer in time.
    """

    def __init__(self, state_dict: Callable[[], Dict[str, Any]], load_state_dict: Callable[[Dict[str, Any]], None],
                 *, coordinator: Optional[str] = None, job_id: Optional[str] = None, rank: Optional[int] = None,
                 secret: Optional[str] = None, timeout: timedelta = timedelta(seconds=60),
                 join_timeout: timedelta = timedelta(seconds=120), handle_sigterm: bool = True,
                 total_steps: Optional[int] = None, spare: Optional[bool] = None):
        coordinator = coordinator or os.environ.get("TENAX_COORDINATOR", "")
        job_id = job_id or os.environ.get("TENAX_JOB_ID", "")
        if not coordinator:
            raise ValueError("tenax.torch.Manager: no coordinator (pass coordinator='host:port' or set TENAX_COORDINATOR)")
        if not job_id:
            raise ValueError("tenax.torch.Manager: no job id (pass job_id=... or set TENAX_JOB_ID)")
        if spare is None:
            spare = os.environ.get("TENAX_SPARE", "") == "1"
        if rank is None:
            rank = -1 if spare else int(os.environ.get("TENAX_RANK", "-1"))
        if spare and rank >= 0:
            raise ValueError(f"tenax.torch.Manager: a spare has no rank to ask for (rank={rank}); "
                             "the coordinator gives it one when it is admitted")
        self._coordinator, self._job_id = coordinator, job_id
        self._state_dict = state_dict
        self._load_state_dict = load_state_dict
        self._stop_requested = False
        self._failed = False
        self._left = False
        self._closed = False
        self.step = 0
        self._timeout = timeout.total_seconds()
        self._params = []
        self._scale = None  # (share of the global batch, generation), from batch_slice
        self.total_steps = total_steps if total_steps is not None else int(os.environ.get("TENAX_TOTAL_STEPS", "0"))
        # What the coordinator and the run's files hear (tenax.torch.report).
        self._started = time.monotonic()
        self._boundary_started = self._started  # when the current start_step began
        self._global_batch = 0
        self._last_report = (self._started, 0)  # (time, step) of the previous progress
        self._loss = None
        self._accuracy = None
        self._generations = []  # {"number", "first_step", "members", "why"}: travels with the state
        self._outputs = RunOutputs()
        if handle_sigterm:
            signal.signal(signal.SIGTERM, self._on_sigterm)
        self._member = _tenax.ElasticMember(coordinator, job_id, rank, secret or "", os.environ.get("TENAX_HOST", ""),
                                            _fingerprint(state_dict()), timeout, join_timeout, spare)
        global _current
        _current = self
        if spare:
            self._wait_as_spare()
        view = self._member.view()
        # The first generation starts from rank 0's state; a joiner from a
        # member's. Both run the state transfer at the first start_step.
        self._has_state = not view["joined_late"] and view["rank"] == 0
        self._sync_pending = True

    def _wait_as_spare(self):
        """Joins and waits, in slices that let Python's signal handlers run,
        until the coordinator admits this spare; tells ``tenax run`` once it
        is warm. A SIGTERM, or a job that had finished before this spare
        could join, raises SpareNotNeeded."""
        started = time.monotonic()
        joining, waiting, admitted, job_over = 0, 1, 2, 3
        state, said_warm = joining, False
        print(f"tenax: spare: joining job '{self._job_id}' at {self._coordinator} as a spare", file=sys.stderr,
              flush=True)
        while state != admitted:
            state = self._member.await_admission(timedelta(milliseconds=250))
            member_id = self._member.view()["member_id"]
            if state == waiting and not said_warm:
                said_warm = True
                print(f"tenax: spare {member_id}: warm, waiting until a member is lost or leaves", file=sys.stderr,
                      flush=True)
                # What the launcher's live view and migrations wait for (the C++ workers' record).
                self._outputs.append({"event": "spare_waiting", "rank": member_id, "pid": os.getpid()})
            why = None
            if state == job_over:
                why = "the job had finished before it could join"
            elif state != admitted and self._stop_requested:
                why = f"stopped by SIGTERM after waiting {time.monotonic() - started:.1f} s"
            if why:
                who = f"spare {member_id}" if member_id >= 0 else "spare"  # no id before the coordinator took the join
                message = f"tenax: {who}: {why}; the job did not need it"
                print(message, file=sys.stderr, flush=True)
                self.close()
                raise SpareNotNeeded(message)
        view = self._member.view()
        print(f"tenax: spare {view['member_id']}: admitted after {time.monotonic() - started:.1f} s as rank "
              f"{view['rank']} of {view['world']} in generation {view['generation']}", file=sys.stderr, flush=True)
        # Progress is counted from its first step as a member.
        self._started = self._boundary_started = time.monotonic()
        self._last_report = (self._started, 0)

    # --- what the script reads ---------------------------------------------
    @property
    def rank(self) -> int:
        """This member's rank in the current generation."""
        return self._member.view()["rank"]

    @property
    def world_size(self) -> int:
        """How many members the current generation has."""
        return self._member.view()["world"]

    @property
    def generation(self) -> int:
        return self._member.view()["generation"]

    @property
    def left(self) -> bool:
        """True once this member left the job (start_step returned False)."""
        return self._left

    def batch_slice(self, global_batch: int) -> Tuple[int, int]:
        """(offset, count) of this member's samples within a step's global
        batch: the global batch stays as configured whatever the number of
        members; the first ``global_batch % world_size`` ranks take one more."""
        w, r = self.world_size, self.rank
        self._global_batch = global_batch
        base, extra = divmod(global_batch, w)
        count = base + (1 if r < extra else 0)
        # Each member's loss is a mean over its own slice: weighted by its
        # share, the summed gradients are the global batch's mean.
        self._scale = (count / global_batch, self.generation)
        return r * base + min(r, extra), count

    # --- the step ------------------------------------------------------------
    def start_step(self) -> bool:
        """A step boundary: leaves when a SIGTERM arrived (returns False),
        re-forms the group when members left, joined or were lost, and brings
        members that are behind (a joiner, a member whose last step was
        dropped) to the state of the members ahead. Returns True to train
        step ``self.step``."""
        if self._left:
            return False
        self._boundary_started = time.monotonic()
        give_up = self._boundary_started + 2 * self._timeout
        while True:
            try:
                if not self._sync_pending:
                    outcome = self._member.start_step(self._failed, self._stop_requested)
                    self._failed = False
                    if outcome == _LEFT:
                        self._left = True
                        return False
                    if outcome == _CONTINUE:
                        return True
                self._sync_pending = True
                self._transfer_state()
                self._sync_pending = False
                return True
            except MembershipChanged as e:
                if time.monotonic() > give_up:
                    raise RuntimeError(f"tenax: rank {self.rank}: no generation formed within "
                                       f"{2 * self._timeout:.0f} s; the last failure: {e}") from e
                print(f"tenax: rank {self.rank}: {e}; re-forming", file=sys.stderr, flush=True)
                self._failed = True
                self._sync_pending = False

    def _transfer_state(self):
        reformed = time.monotonic()
        top, role = self._member.agree_state(self.step if self._has_state else -1)
        if role == _DONOR:
            buf = io.BytesIO()
            torch.save({"step": self.step, "user": self._state_dict(), "generations": self._generations}, buf)
            self._member.offer_state(buf.getvalue())
        elif role == _RECEIVER:
            state = torch.load(io.BytesIO(self._member.fetch_state()))
            self._load_state_dict(state["user"])
            self._generations = list(state.get("generations", []))
        if role != _NONE:
            self._member.close_state()
        self.step = top
        self._has_state = True
        self._member.formed()
        view = self._member.view()
        if not self._generations or self._generations[-1]["number"] != view["generation"]:
            # What this boundary cost the member that records it (the
            # summary's writer, rank 0): re-forming, then moving the state.
            done = time.monotonic()
            g = {"number": view["generation"], "first_step": top, "members": list(view["member_ids"]),
                 "why": view["why"], "reform_ms": (reformed - self._boundary_started) * 1e3}
            if role != _NONE:
                g["join_transfer_ms"] = (done - reformed) * 1e3
            self._generations.append(g)

    def allreduce(self, tensor: torch.Tensor, scale: Optional[float] = None) -> torch.futures.Future:
        """Sums a contiguous float32 CPU tensor over the members, in place,
        times ``scale`` (default: this member's share of the global batch
        from the step's batch_slice, else ``1 / world_size``: the mean).
        Returns a future; it never fails: a failure drops the step (see
        should_commit)."""
        if scale is None:
            share = self._scale
            scale = share[0] if share is not None and share[1] == self.generation else 1.0 / self.world_size
        return self._member.allreduce(tensor, scale).get_future()

    def register_parameters(self, parameters) -> None:
        """The parameters whose gradients should_commit averages over the
        members (tenax.torch.DistributedDataParallel registers its module's).
        Every member must register the same list in the same order."""
        self._params = [p for p in parameters if p.requires_grad]

    def should_commit(self) -> bool:
        """Averages the registered parameters' gradients over the members
        (weighted by each member's share of the global batch), then returns
        True when every collective of this step succeeded: apply the
        optimizer step (``self.step`` advances). False when a member was lost
        meanwhile: skip it; the next start_step re-forms the group."""
        if self._params:
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self._params]
            flat = torch.cat([g.reshape(-1) for g in grads])
            self.allreduce(flat).wait()
            offset = 0
            for p, g in zip(self._params, grads):
                n = g.numel()
                if p.grad is None:
                    p.grad = g
                p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
                offset += n
        err = self._member.take_step_error()
        if err:
            print(f"tenax: rank {self.rank}: step {self.step} dropped: {err}", file=sys.stderr, flush=True)
            self._failed = True
            return False
        self.step += 1
        self._report_progress()
        return True

    # --- what the job hears ---------------------------------------------------
    def report(self, *, loss: Optional[float] = None, accuracy: Optional[float] = None) -> None:
        """See tenax.torch.report."""
        if loss is not None:
            self._loss = float(loss)
            if self.rank == 0:
                self._outputs.append({"event": "train", "epoch": 1, "step": self.step, "loss": self._loss,
                                      "samples_per_second": self._samples_per_second(),
                                      "elapsed_seconds": time.monotonic() - self._started})
        if accuracy is not None:
            self._accuracy = float(accuracy)
            if self.rank == 0:
                self._outputs.append({"event": "epoch", "epoch": 1, "step": self.step,
                                      "train_loss": self._loss if self._loss is not None else 0.0,
                                      "test_accuracy": self._accuracy,
                                      "elapsed_seconds": time.monotonic() - self._started})
            self._report_progress(test_accuracy=self._accuracy)

    def _samples_per_second(self) -> float:
        elapsed = time.monotonic() - self._started
        return self.step * self._global_batch / elapsed if elapsed > 0 else 0.0

    def _report_progress(self, test_accuracy: float = -1.0) -> None:
        # As often as the C++ workers report: every 250 ms, and at once for
        # an accuracy and the last step (a message per step would cost the
        # step loop a round trip to the engine thread).
        now = time.monotonic()
        then, step = self._last_report
        if test_accuracy < 0 and self.step != self.total_steps and now - then < 0.25:
            return
        step_seconds = (now - then) / (self.step - step) if self.step > step else 0.0
        self._last_report = (now, self.step)
        try:
            self._member.report_progress(self.step, self.total_steps, self._loss if self._loss is not None else 0.0,
                                         test_accuracy, self._samples_per_second(), now - self._started, step_seconds)
        except MembershipChanged:
            pass  # progress is advisory: the next boundary deals with the membership

    def summary(self) -> Dict[str, Any]:
        """What this member knows of the job: summary.json's fields."""
        elapsed = time.monotonic() - self._started
        return {
            "mode": "sync",
            "elastic": True,
            "worker_command": True,
            "program": " ".join(sys.argv),
            "steps": self.step,
            "workers": self.world_size,
            "global_batch_size": self._global_batch,
            "final_test_accuracy": self._accuracy if self._accuracy is not None else 0.0,
            "final_train_loss": self._loss if self._loss is not None else 0.0,
            "wall_seconds": elapsed,
            "samples_per_second": self._samples_per_second(),
            "parameters": sum(p.numel() for p in self._params),
            "generations": self._generations,
            "tenax_version": _tenax.__version__,
        }

    def finish(self, summary: Optional[Dict[str, Any]] = None):
        """The end of training: waits for every member, then tells the
        coordinator. Rank 0 writes the job's summary (``self.summary()``
        updated with ``summary``) to summary.json under ``tenax run`` and
        hands it to the coordinator."""
        import json
        if not self._left:
            text = ""
            if self.rank == 0:
                s = self.summary()
                s.update(summary or {})
                if self._accuracy is not None:
                    self._outputs.append({"event": "final", "step": self.step, "test_accuracy": self._accuracy,
                                          "elapsed_seconds": time.monotonic() - self._started})
                # Before the coordinator hears every member is done: the
                # launcher reads it once the job is done.
                self._outputs.write_summary(s)
                text = json.dumps(s)
            self._member.finish(text)
        self.close()

    def close(self):
        """Closes this member's connections (the others see it leave)."""
        if not self._closed:
            self._closed = True
            del self._member

    def _on_sigterm(self, signum, frame):
        self._stop_requested = True


def allreduce_hook(manager: Manager, bucket) -> torch.futures.Future[torch.Tensor]:
    """The DDP comm hook of tenax.torch.DistributedDataParallel: it leaves
    each bucket local, and Manager.should_commit averages the gradients over
    the members in one canonical layout. Why not bucket by bucket: DDP lays
    out its buckets anew after its first iteration, so a joiner's first
    buckets differ from the survivors' (the sums would not line up)."""
    if not manager._params:
        raise RuntimeError("tenax.torch.allreduce_hook: the Manager has no parameters; "
                           "call manager.register_parameters(model.parameters()) first")
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


_local_groups = []
_current: Optional[Manager] = None  # the Manager this process made last


def report(*, loss: Optional[float] = None, accuracy: Optional[float] = None) -> None:
    """Tells the job how training goes: ``loss`` (the recent training loss)
    and ``accuracy`` (a test accuracy, 0..1). The Manager sends them with
    its progress to the coordinator (``tenax run``'s live view and step
    triggers), and rank 0 appends them to the run's metrics.jsonl and puts
    the last ones in summary.json (``final_train_loss``,
    ``final_test_accuracy``). Steps are counted by the Manager itself.
    Without a Manager (a script not run as a member) it does nothing."""
    if _current is not None and not _current._closed:
        _current.report(loss=loss, accuracy=accuracy)


def DistributedDataParallel(module: torch.nn.Module, manager: Manager, **kwargs) -> torch.nn.parallel.DistributedDataParallel:
    """Stock DDP made elastic: built over a one-process group (so its
    constructor's collectives cannot hang a generation) whose gradients
    ``manager.should_commit()`` averages over the members. Takes DDP's other arguments
    (``broadcast_buffers`` is off: the state comes from the Manager)."""
    if "process_group" in kwargs:
        raise ValueError("tenax.torch.DistributedDataParallel: the Manager is the group; do not pass process_group")
    kwargs.setdefault("broadcast_buffers", False)
    group = _tenax.create_process_group(_dist.HashStore(), 0, 1, timedelta(seconds=60))
    _local_groups.append(group)  # lives as long as the process, like a default group
    ddp = torch.nn.parallel.DistributedDataParallel(module, process_group=group, **kwargs)
    manager.register_parameters(module.parameters())
    ddp.register_comm_hook(manager, allreduce_hook)
    return ddp


__all__ = ["Manager", "MembershipChanged", "SpareNotNeeded", "allreduce_hook", "DistributedDataParallel", "report"]

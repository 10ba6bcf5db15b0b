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

MembershipChanged = _tenax.MembershipChanged

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

    Raises RuntimeError when the coordinator refuses the join (another job,
    another state schema, a rank taken) or does not answer in time.
    """

    def __init__(self, state_dict: Callable[[], Dict[str, Any]], load_state_dict: Callable[[Dict[str, Any]], None],
                 *, coordinator: Optional[str] = None, job_id: Optional[str] = None, rank: Optional[int] = None,
                 secret: Optional[str] = None, timeout: timedelta = timedelta(seconds=60),
                 join_timeout: timedelta = timedelta(seconds=120), handle_sigterm: bool = True):
        coordinator = coordinator or os.environ.get("TENAX_COORDINATOR", "")
        job_id = job_id or os.environ.get("TENAX_JOB_ID", "")
        if not coordinator:
            raise ValueError("tenax.torch.Manager: no coordinator (pass coordinator='host:port' or set TENAX_COORDINATOR)")
        if not job_id:
            raise ValueError("tenax.torch.Manager: no job id (pass job_id=... or set TENAX_JOB_ID)")
        if rank is None:
            rank = int(os.environ.get("TENAX_RANK", "-1"))
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
        if handle_sigterm:
            signal.signal(signal.SIGTERM, self._on_sigterm)
        self._member = _tenax.ElasticMember(coordinator, job_id, rank, secret or "", os.environ.get("TENAX_HOST", ""),
                                            _fingerprint(state_dict()), timeout, join_timeout)
        view = self._member.view()
        # The first generation starts from rank 0's state; a joiner from a
        # member's. Both run the state transfer at the first start_step.
        self._has_state = not view["joined_late"] and view["rank"] == 0
        self._sync_pending = True

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
        give_up = time.monotonic() + 2 * self._timeout
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
        top, role = self._member.agree_state(self.step if self._has_state else -1)
        if role == _DONOR:
            buf = io.BytesIO()
            torch.save({"step": self.step, "user": self._state_dict()}, buf)
            self._member.offer_state(buf.getvalue())
        elif role == _RECEIVER:
            state = torch.load(io.BytesIO(self._member.fetch_state()))
            self._load_state_dict(state["user"])
        if role != _NONE:
            self._member.close_state()
        self.step = top
        self._has_state = True
        self._member.formed()

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
        return True

    def finish(self, summary: Optional[Dict[str, Any]] = None):
        """The end of training: waits for every member, then tells the
        coordinator (rank 0 hands it ``summary``, stored as the job's)."""
        import json
        if not self._left:
            self._member.finish(json.dumps(summary) if summary is not None and self.rank == 0 else "")
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


__all__ = ["Manager", "MembershipChanged", "allreduce_hook", "DistributedDataParallel"]

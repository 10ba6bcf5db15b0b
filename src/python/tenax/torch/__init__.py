"""tenax as a ``torch.distributed`` backend.

Importing this module registers the backend ``"tenax"``::

    import torch.distributed as dist
    import tenax.torch  # noqa: F401  (registers the backend)

    dist.init_process_group("tenax")  # MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, as for gloo

Every collective of ``torch.distributed`` works on CPU tensors of float32,
float64, float16, bfloat16, int8, int16, int32, int64, uint8 and bool:
all_reduce (sum, avg, product, min, max, band, bor, bxor), broadcast,
reduce, all_gather, gather, scatter, reduce_scatter, all_to_all, barrier,
send/recv and new_group. float32 sum and avg (what DDP sends) take tenax's
one-sided allreduce; the rest moves bulk messages and reduces in rank
order, so every rank gets the same bits.

Connections are authenticated with ``TENAX_SECRET`` when it is set (16
bytes or more, the same on every rank); otherwise rank 0 draws a secret and
shares it through torch's rendezvous store. ``TENAX_HOST`` overrides the
address this rank advertises to the others.

A tensor of another shape or dtype than its peers', a CUDA tensor, an
unsupported dtype or op: every rank's call fails with a ``RuntimeError``
naming the rank and the tensor, before any memory is touched. A lost peer
fails the call, and every later one, with an error naming the lost rank:
never a hang.
"""

import atexit
from typing import Dict, Optional, Union

import torch.distributed as _dist

from .. import _tenax

BACKEND = "tenax"


def _create(store, rank, world_size, timeout):
    return _tenax.create_process_group(store, rank, world_size, timeout)


if not hasattr(_dist.Backend, BACKEND.upper()):
    _dist.Backend.register_backend(BACKEND, _create)

# torch has loaded OpenBLAS by now. On a CPU model OpenBLAS does not know
# (common on cloud VMs) it falls back to kernels several times slower than
# the CPU can run, and only OPENBLAS_CORETYPE set before start-up fixes it:
# say so once, at import.
_OPENBLAS_ADVICE = _tenax.openblas_advice()
if _OPENBLAS_ADVICE:
    import warnings as _warnings

    _warnings.warn("tenax: " + _OPENBLAS_ADVICE, RuntimeWarning, stacklevel=2)


@atexit.register
def _close_at_exit():
    # A tenax group left open at exit would still drive its connections
    # while the interpreter tears down: close it first.
    if _dist.is_initialized() and str(_dist.get_backend()).lower() == BACKEND:
        _dist.destroy_process_group()


def counters(group: Optional[_dist.ProcessGroup] = None) -> Dict[str, Union[int, str]]:
    """How many float32 sum/avg allreduces of ``group`` (the default group
    when None) took tenax's one-sided path (``fast_allreduces``), how many
    of those read the peers' memory directly (``cross_memory_sums``; large
    tensors when every rank is on one host), whether that path is on
    (``cross_memory``: "" before the first large sum, "on", or "off: why"),
    and how many collectives moved bulk messages (``bulk_collectives``)."""
    pg = group if group is not None else _dist.distributed_c10d._get_default_group()
    return _tenax.backend_counters(pg)


__all__ = ["BACKEND", "counters"]

from .elastic import DistributedDataParallel, Manager, MembershipChanged, SpareNotNeeded, allreduce_hook, report  # noqa: E402

__all__ += ["DistributedDataParallel", "Manager", "MembershipChanged", "SpareNotNeeded", "allreduce_hook", "report"]

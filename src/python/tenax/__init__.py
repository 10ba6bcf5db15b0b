"""tenax: deep-learning training that keeps going on cheap, unreliable machines.

This package brings tenax into your own Python program:

* ``tenax.__version__`` is the version of the C++ core (``tenax --version``).
* ``import tenax.torch`` registers the ``"tenax"`` backend of
  ``torch.distributed``: ``dist.init_process_group("tenax", ...)`` runs your
  collectives, and stock ``DistributedDataParallel``, over tenax's transport
  (shared memory on one host, TCP between hosts, authenticated).

See docs/python.md in the tenax repository.
"""

from ._tenax import __version__

__all__ = ["__version__"]

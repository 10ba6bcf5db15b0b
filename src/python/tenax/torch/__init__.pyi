from typing import Union, Dict, Optional

import torch.distributed

BACKEND: str

def counters(group: Optional[torch.distributed.ProcessGroup] = ...) -> Dict[str, Union[int, str]]: ...

from .elastic import DistributedDataParallel as DistributedDataParallel
from .elastic import Manager as Manager
from .elastic import MembershipChanged as MembershipChanged
from .elastic import SpareNotNeeded as SpareNotNeeded
from .elastic import allreduce_hook as allreduce_hook
from .elastic import report as report

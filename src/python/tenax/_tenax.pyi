from datetime import timedelta
from typing import Dict

import torch.distributed

__version__: str

def create_process_group(
    store: torch.distributed.Store, rank: int, world_size: int, timeout: timedelta
) -> torch.distributed.ProcessGroup: ...
def backend_counters(group: torch.distributed.ProcessGroup) -> Dict[str, int]: ...

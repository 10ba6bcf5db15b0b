from typing import Dict, Optional

import torch.distributed

BACKEND: str

def counters(group: Optional[torch.distributed.ProcessGroup] = ...) -> Dict[str, int]: ...

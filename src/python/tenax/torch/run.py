"""What a worker command leaves in its ``tenax run``'s directory.

Under ``tenax run`` with a ``[worker] command`` (docs/python.md, "Python
workers under tenax run"), the launcher puts the run in the program's
environment: ``TENAX_RUN_DIR`` (where summary.json goes) and
``TENAX_RUN_METRICS`` (metrics.jsonl, which the launcher started and to
which the writing member appends). The writing member is the rank 0 of the
current generation, as for the C++ workers. Records have the C++ workers'
shape (src/core/run_records.cc), so ``tenax report`` draws them the same way.
Outside ``tenax run`` both are unset and nothing is written.
"""

import json
import os
import time
from typing import Any, Dict


class RunOutputs:
    """The run directory's files, written only where the launcher named them."""

    def __init__(self) -> None:
        self.run_dir = os.environ.get("TENAX_RUN_DIR", "")
        self.metrics = os.environ.get("TENAX_RUN_METRICS", "")

    def append(self, record: Dict[str, Any]) -> None:
        """One metrics.jsonl line (with the wall-clock ``time`` every record has)."""
        if not self.metrics:
            return
        line = json.dumps(dict(record, time=time.time()), allow_nan=False) + "\n"
        # One write of one line with O_APPEND: the launcher appends its own
        # records (faults, notices) to the same file.
        fd = os.open(self.metrics, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def write_summary(self, summary: Dict[str, Any]) -> None:
        """summary.json, atomically (a reader never sees half of it)."""
        if not self.run_dir:
            return
        path = os.path.join(self.run_dir, "summary.json")
        tmp = path + f".tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(summary, f, indent=2, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

// Room in /dev/shm for a job's processes. UCX's shared-memory transport maps
// its receive queues there (about 5 MiB per process, measured: the
// quickstart's 18 processes peaked at 90 MiB); when the file system is full
// UCX logs "Not enough memory" and the process dies with SIGSEGV inside
// ucp_worker_progress. A container's /dev/shm is 64 MiB unless it is given
// more, so `tenax run` checks before it starts anything.
#pragma once

#include <cstdint>
#include <string>

#include "tenax/core/status.h"

namespace tenax {

// What `processes` tenax processes on one machine need in /dev/shm (16 MiB
// each: about three times the measured use, for bursts between samples and
// larger tensors).
uint64_t SharedMemoryNeed(int64_t processes);

// Ok when `dir`'s file system has at least `need_bytes` available (statvfs),
// or when `dir` does not exist (UCX then uses no POSIX shared memory).
// FailedPrecondition otherwise, in one line: how much is free, what the job
// needs, and the two ways out (--shm-size for a container, or
// cluster.transports = "tcp").
Status CheckSharedMemory(const std::string& dir, uint64_t need_bytes, int64_t processes);

}  // namespace tenax

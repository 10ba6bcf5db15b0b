#include "shared_memory.h"

#include <sys/statvfs.h>

#include <cerrno>

#include "tenax/core/files.h"

namespace tenax {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;
constexpr uint64_t kPerProcess = 16 * kMiB;

}  // namespace

uint64_t SharedMemoryNeed(int64_t processes) { return static_cast<uint64_t>(processes > 0 ? processes : 1) * kPerProcess; }

Status CheckSharedMemory(const std::string& dir, uint64_t need_bytes, int64_t processes) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return IoError(dir + ": " + ErrnoMessage(errno));
  }
  const uint64_t available = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (available >= need_bytes) return Status::Ok();
  return FailedPrecondition(dir + " has " + std::to_string(available / kMiB) + " MiB free, and this job's " +
                            std::to_string(processes) + " processes need about " + std::to_string(need_bytes / kMiB) +
                            " MiB there for UCX's shared-memory transport: give it more (a container's default is "
                            "64 MiB: docker or podman run --shm-size=1g) or set cluster.transports = \"tcp\"");
}

}  // namespace tenax

// The extender's cluster state from a JSON file (cluster_state.h has the
// format; docs/placement.md shows an example), re-read when the file
// changes: whoever knows the links and placements (a probe collector, a
// cron job, a test) rewrites it, best by writing a temporary file and
// renaming it over the old one.
//
// Change detection is by (mtime in nanoseconds, size, inode), checked on
// every Snapshot() call with one stat(). A file that cannot be read or
// parsed keeps the last good snapshot and logs the reason once per version
// of the file (spdlog warning), so a half-written file never empties the
// picture. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "tenax/core/status.h"
#include "tenax/sched/k8s/cluster_state.h"

namespace tenax::sched {

class FileStateSource final : public ClusterStateSource {
 public:
  // Largest state file read (a 5,000-node matrix of measured pairs is far
  // below this).
  static constexpr size_t kMaxFileBytes = size_t{256} << 20;

  // Reads the file once: NotFound / IoError / InvalidArgument (naming the
  // path) if the first read fails, so a typo in --state stops the start.
  static Result<std::unique_ptr<FileStateSource>> Open(const std::string& path);

  std::shared_ptr<const ClusterSnapshot> Snapshot() override;

  // Successful reads so far, the first included.
  uint64_t loads() const;

 private:
  struct Version {
    int64_t mtime_ns = -1;
    int64_t size = -1;
    uint64_t inode = 0;
    bool exists = false;
    bool operator==(const Version&) const = default;
  };
  explicit FileStateSource(std::string path) : path_(std::move(path)) {}
  Version Stat() const;
  Result<std::shared_ptr<const ClusterSnapshot>> Load() const;

  const std::string path_;
  mutable std::mutex mu_;
  Version seen_;  // the version last tried, good or bad
  std::shared_ptr<const ClusterSnapshot> current_;
  uint64_t loads_ = 0;
};

}  // namespace tenax::sched

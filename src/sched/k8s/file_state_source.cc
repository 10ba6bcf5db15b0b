#include "tenax/sched/k8s/file_state_source.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "tenax/core/files.h"

namespace tenax::sched {

Result<std::unique_ptr<FileStateSource>> FileStateSource::Open(const std::string& path) {
  std::unique_ptr<FileStateSource> s(new FileStateSource(path));
  s->seen_ = s->Stat();
  TENAX_ASSIGN_OR_RETURN(s->current_, s->Load());
  s->loads_ = 1;
  return s;
}

FileStateSource::Version FileStateSource::Stat() const {
  struct stat st {};
  Version v;
  if (::stat(path_.c_str(), &st) != 0) return v;
  v.exists = true;
  v.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  v.size = static_cast<int64_t>(st.st_size);
  v.inode = static_cast<uint64_t>(st.st_ino);
  return v;
}

Result<std::shared_ptr<const ClusterSnapshot>> FileStateSource::Load() const {
  TENAX_ASSIGN_OR_RETURN(std::string text, ReadFileText(path_, kMaxFileBytes));
  Result<ClusterSnapshot> parsed = ParseClusterState(text);
  if (!parsed.ok()) return parsed.status().WithContext(path_);
  return std::shared_ptr<const ClusterSnapshot>(std::make_shared<ClusterSnapshot>(std::move(parsed).value()));
}

std::shared_ptr<const ClusterSnapshot> FileStateSource::Snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  const Version now = Stat();
  if (now == seen_) return current_;
  seen_ = now;
  if (!now.exists) {
    spdlog::warn("cluster state {}: the file is gone; keeping the last good state", path_);
    return current_;
  }
  Result<std::shared_ptr<const ClusterSnapshot>> loaded = Load();
  if (!loaded.ok()) {
    spdlog::warn("{}; keeping the last good state", loaded.status().message());
    return current_;
  }
  current_ = std::move(loaded).value();
  ++loads_;
  spdlog::info("cluster state {} reloaded: {} jobs, {} zones named", path_, current_->jobs.size(),
               current_->zones.size());
  return current_;
}

uint64_t FileStateSource::loads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loads_;
}

}  // namespace tenax::sched

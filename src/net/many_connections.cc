#include "tenax/net/many_connections.h"

#include <sys/resource.h>
#include <ucs/config/global_opts.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <mutex>

namespace tenax::net {

namespace {

// fs.nr_open: the most files one process may ever have open (-1: unknown).
int64_t KernelOpenFileCeiling() {
  std::ifstream in("/proc/sys/fs/nr_open");
  int64_t v = -1;
  if (!(in >> v) || v <= 0) return -1;
  return v;
}

}  // namespace

int64_t ReachableOpenFileLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return -1;
  if (r.rlim_max != RLIM_INFINITY) return static_cast<int64_t>(r.rlim_max);
  return KernelOpenFileCeiling();
}

int64_t RaiseOpenFileLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return -1;
  // An unlimited hard limit cannot be the soft one (setrlimit refuses
  // anything above fs.nr_open): aim at the kernel's ceiling instead.
  const int64_t target = ReachableOpenFileLimit();
  if (target > 0 && r.rlim_cur != RLIM_INFINITY && static_cast<int64_t>(r.rlim_cur) < target) {
    r.rlim_cur = static_cast<rlim_t>(target);
    (void)setrlimit(RLIMIT_NOFILE, &r);  // best effort: the old limit stays
    (void)getrlimit(RLIMIT_NOFILE, &r);
  }
  return r.rlim_cur == RLIM_INFINITY ? -1 : static_cast<int64_t>(r.rlim_cur);
}

unsigned RaiseAsyncEventLimit(unsigned events) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  // ucs_global_opts is filled from the environment when libucs loads;
  // ucs_async_context_init reads async_max_events for every new worker.
  if (ucs_global_opts.async_max_events < events) ucs_global_opts.async_max_events = events;
  return ucs_global_opts.async_max_events;
}

unsigned AsyncEventLimit() { return RaiseAsyncEventLimit(0); }

unsigned AsyncEventsFor(size_t peers) {
  constexpr size_t kPerPeer = 4;  // control + data sockets, and a spare
  constexpr size_t kMargin = 1024;
  const size_t want = std::min<size_t>(peers, (std::numeric_limits<unsigned>::max() - kMargin) / kPerPeer);
  return static_cast<unsigned>(want * kPerPeer + kMargin);
}

}  // namespace tenax::net

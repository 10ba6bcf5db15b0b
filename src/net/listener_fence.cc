#include "listener_fence.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <ucs/debug/log_def.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace tenax::net::internal {
namespace {

std::atomic<int> g_quiet_teardowns{0};

// The local port of TCP socket `fd`, or -1 when it is not one.
int LocalTcpPort(int fd) {
  int type = 0;
  socklen_t len = sizeof(type);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return -1;
  sockaddr_storage ss{};
  socklen_t ss_len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &ss_len) != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}

bool IsListening(int fd) {
  int accepting = 0;
  socklen_t len = sizeof(accepting);
  return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0 && accepting != 0;
}

// Replaces the socket behind `fd` with a fresh unconnected one (see the
// header); the old one is closed by the kernel when dup3 drops it.
bool ReplaceWithUnconnectedSocket(int fd) {
  const int fresh = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fresh < 0) return false;
  const bool ok = dup3(fresh, fd, O_CLOEXEC) == fd;
  close(fresh);
  return ok;
}

// Closes the process's TCP sockets on `port` that are (listening) or are
// not (!listening) listening sockets.
int CloseSockets(uint16_t port, bool listening) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return 0;
  const int dir_fd = dirfd(dir);
  int closed = 0;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd < 0 || fd == dir_fd) continue;
    if (LocalTcpPort(static_cast<int>(fd)) != port) continue;
    if (IsListening(static_cast<int>(fd)) != listening) continue;
    if (ReplaceWithUnconnectedSocket(static_cast<int>(fd))) ++closed;
  }
  closedir(dir);
  return closed;
}

bool EndsWith(const char* s, const char* suffix) {
  const size_t n = std::strlen(s), m = std::strlen(suffix);
  return n >= m && std::strcmp(s + n - m, suffix) == 0;
}

// The UCX source files whose errors and warnings a fenced teardown causes.
bool IsTeardownNoise(const char* file) {
  if (!file) return false;
  for (const char* f : {"event_set.c", "async.c", "thread.c", "tcp_listener.c", "sock.c", "tcp_sockcm_ep.c",
                        "tcp_sockcm.c"}) {
    if (EndsWith(file, f)) return true;
  }
  return false;
}

ucs_log_func_rc_t DropTeardownNoise(const char* file, unsigned, const char*, ucs_log_level_t level,
                                    const ucs_log_component_config_t*, const char*, va_list) {
  if (g_quiet_teardowns.load(std::memory_order_acquire) > 0 && level <= UCS_LOG_LEVEL_WARN &&
      IsTeardownNoise(file)) {
    return UCS_LOG_FUNC_RC_STOP;
  }
  return UCS_LOG_FUNC_RC_CONTINUE;
}

}  // namespace

int CloseListeningSocket(uint16_t port) { return CloseSockets(port, true); }
int CloseAcceptedSockets(uint16_t port) { return CloseSockets(port, false); }

QuietListenerTeardown::QuietListenerTeardown() {
  static std::once_flag installed;
  std::call_once(installed, [] { ucs_log_push_handler(&DropTeardownNoise); });
  g_quiet_teardowns.fetch_add(1, std::memory_order_acq_rel);
}

QuietListenerTeardown::~QuietListenerTeardown() { g_quiet_teardowns.fetch_sub(1, std::memory_order_acq_rel); }

}  // namespace tenax::net::internal

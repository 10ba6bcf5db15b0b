#include "tenax/core/signals.h"

#include <atomic>
#include <csignal>

namespace tenax {
namespace {
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void OnStopSignal(int sig) { g_stop_signal.store(sig, std::memory_order_relaxed); }
}  // namespace

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool StopRequested() { return g_stop_signal.load(std::memory_order_relaxed) != 0; }
int StopSignal() { return g_stop_signal.load(std::memory_order_relaxed); }
void ClearStopRequest() { g_stop_signal.store(0, std::memory_order_relaxed); }

}  // namespace tenax

#include "tenax/train/torch_runtime.h"

#include <ATen/Parallel.h>
#include <torch/utils.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace tenax {

int64_t ResolveThreads(int64_t configured, const char* omp_num_threads) {
  if (configured > 0) return configured;
  if (omp_num_threads != nullptr) {
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(omp_num_threads, &end, 10);
    if (errno == 0 && end != omp_num_threads && *end == '\0' && n > 0 && n <= 1024) return n;
  }
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

int64_t ResolveThreads(int64_t configured) { return ResolveThreads(configured, std::getenv("OMP_NUM_THREADS")); }

int64_t ConfigureTorchThreads(int64_t configured) {
  const int64_t threads = ResolveThreads(configured);
  at::set_num_threads(static_cast<int>(threads));
  return threads;
}

void SeededModelInit(int64_t seed, const std::function<void()>& init) {
  static std::mutex generator_mutex;
  std::lock_guard<std::mutex> lock(generator_mutex);
  torch::manual_seed(static_cast<uint64_t>(seed));
  init();
}

}  // namespace tenax

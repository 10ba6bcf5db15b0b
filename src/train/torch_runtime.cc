#include "tenax/train/torch_runtime.h"

#include <ATen/Parallel.h>
#include <torch/utils.h>

#include <algorithm>
#include <mutex>
#include <thread>

namespace tenax {

int64_t ResolveThreads(int64_t configured) {
  if (configured > 0) return configured;
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

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

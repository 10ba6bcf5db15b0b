// Fuzzes BalancedShares with the vectors a peer can put into the step's
// allreduce (any float bits, any member count) and any global batch: it
// must never crash or hang, the shares must sum to the global batch, and
// with at least as many samples as members every share is at least 1.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "tenax/job/batch_shares.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // The first two bytes: the global batch (1..65536).
  const int64_t global_batch = 1 + (static_cast<int64_t>(data[0]) | static_cast<int64_t>(data[1]) << 8);
  data += 2;
  size -= 2;
  std::vector<float> seconds(std::min<size_t>(size / sizeof(float), 1024));
  if (!seconds.empty()) std::memcpy(seconds.data(), data, seconds.size() * sizeof(float));
  const auto shares = tenax::BalancedShares(seconds, global_batch);
  if (shares.size() != seconds.size()) std::abort();
  if (seconds.empty()) return 0;
  if (std::accumulate(shares.begin(), shares.end(), int64_t{0}) != global_batch) std::abort();
  for (int64_t s : shares) {
    if (s < 0 || (global_batch >= static_cast<int64_t>(seconds.size()) && s < 1)) std::abort();
  }
  return 0;
}

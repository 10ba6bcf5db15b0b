#include "tenax/job/batch_shares.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tenax {

std::vector<int64_t> EvenShares(int64_t global_batch, int members) {
  if (members <= 0) return {};
  std::vector<int64_t> shares(static_cast<size_t>(members), global_batch / members);
  for (int64_t r = 0; r < global_batch % members; ++r) shares[static_cast<size_t>(r)] += 1;
  return shares;
}

std::vector<int64_t> BalancedShares(std::span<const float> seconds_per_sample, int64_t global_batch) {
  const int w = static_cast<int>(seconds_per_sample.size());
  if (w == 0 || global_batch < w) return EvenShares(global_batch, w);
  std::vector<double> rate(static_cast<size_t>(w));
  double total = 0;
  for (int r = 0; r < w; ++r) {
    const double s = seconds_per_sample[static_cast<size_t>(r)];
    if (!std::isfinite(s) || s <= 0) return EvenShares(global_batch, w);
    rate[static_cast<size_t>(r)] = 1.0 / s;
    total += rate[static_cast<size_t>(r)];
  }
  if (!std::isfinite(total) || total <= 0) return EvenShares(global_batch, w);
  const int64_t min_share = std::max<int64_t>(1, global_batch / (kMinShareDivisor * w));

  std::vector<int64_t> shares(static_cast<size_t>(w));
  std::vector<double> fraction(static_cast<size_t>(w));
  int64_t sum = 0;
  for (size_t r = 0; r < shares.size(); ++r) {
    const double ideal = static_cast<double>(global_batch) * (rate[r] / total);
    const double floor_ideal = std::floor(ideal);
    shares[r] = std::max<int64_t>(min_share, static_cast<int64_t>(floor_ideal));
    fraction[r] = ideal - floor_ideal;
    sum += shares[r];
  }
  // Hand out what rounding down left, largest fraction first.
  std::vector<size_t> order(shares.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return fraction[a] > fraction[b]; });
  for (size_t i = 0; sum < global_batch; i = (i + 1) % order.size()) {
    shares[order[i]] += 1;
    sum += 1;
  }
  // Take back what the minimum added, from the largest shares (the lower
  // rank on a tie); min_share x w <= global_batch, so this ends.
  while (sum > global_batch) {
    size_t top = 0;
    for (size_t r = 1; r < shares.size(); ++r) {
      if (shares[r] > shares[top]) top = r;
    }
    shares[top] -= 1;
    sum -= 1;
  }
  return shares;
}

}  // namespace tenax

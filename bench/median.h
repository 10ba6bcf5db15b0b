// The statistic every benchmark reports: a median rejects scheduler hiccups on
// a shared machine. Header-only and free of tenax's libraries, so the MPI and
// Gloo peer programs use the same one as tenax-bench.
#pragma once

#include <algorithm>
#include <vector>

namespace tenax::bench {

// The median of `v` (the mean of the middle two for an even count); 0 if empty.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace tenax::bench

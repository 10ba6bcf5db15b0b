#include "tenax/sched/probe/link_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tenax::sched {

double RingAllreduceSeconds(int n, double bytes, const LinkMetrics& worst) {
  if (n <= 1) return 0.0;
  if (!worst.reachable) return std::numeric_limits<double>::infinity();
  const double rtt_s = std::max(worst.rtt_ms, 1e-3) / 1000.0;
  double bytes_per_second = std::max(worst.throughput_gbps, 1e-6) * 1e9 / 8.0;
  if (worst.loss > 0) {
    // Mathis, Semke, Mahdavi, Ott (1997): one TCP flow's rate under loss p.
    constexpr double kMss = 1460.0;
    const double p = std::min(worst.loss, 1.0);
    bytes_per_second = std::min(bytes_per_second, kMss / (rtt_s * std::sqrt(2.0 * p / 3.0)));
  }
  const double steps = 2.0 * (n - 1);
  return steps / n * bytes / bytes_per_second + steps * rtt_s;
}

double HierarchicalAllreduceSeconds(int zones, int zone_size, double bytes, const LinkMetrics& inside,
                                    const LinkMetrics& across) {
  if (zones < 1 || zone_size < 1) return 0.0;
  return RingAllreduceSeconds(zone_size, bytes, inside) + RingAllreduceSeconds(zones, bytes / zone_size, across);
}

int AutoTcpStreams(const LinkMetrics& worst) {
  // 10 ms: a loaded 2-core machine measured 5.4 ms between namespaced hosts
  // with no delay added (a CI run picked 4 streams at a 2 ms threshold),
  // while links that gain from streams (across regions, or an emulated
  // 10 ms cross-zone link) round-trip in 20 ms or more.
  const bool short_and_clean = worst.reachable && worst.rtt_ms < kAutoTcpStreamsRttMs &&
                               worst.loss <= kAutoTcpStreamsCleanLoss + 1e-9;
  return short_and_clean ? 1 : 4;
}

}  // namespace tenax::sched

// The real part of `tenax bench sched`: one 4-worker synchronous job of the
// cnn on an emulated 2-zone topology (network namespaces, veths, tc htb;
// delay and loss at the transport seam; loopback where namespaces cannot be
// made), run twice by `tenax run`: placed network-aware (probes, then the
// placer: all workers in one zone) and spread across the zones. Reports
// each run's steady step time and the ratio (docs/placement.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tenax/core/status.h"

namespace tenax::bench {

struct RealPlacementArgs {
  bool quick = false;
  std::string data_dir;
  int64_t steps = 0;            // 0 = 150 quick, 400 full
  double same_zone_gbps = 4.0;
  double cross_zone_gbps = 0.2;
  double cross_zone_delay_ms = 1.0;
  double cross_zone_loss = 0.001;
  int64_t timeout_seconds = 900;
};

// {"mode", "topology": {...}, "runs": [{"policy", "real_step_seconds", "worker_zones", ...}],
//  "real_step_seconds_network_aware", "real_step_seconds_spread", "ratio"}.
Result<nlohmann::json> RunRealPlacement(const RealPlacementArgs& a);

}  // namespace tenax::bench

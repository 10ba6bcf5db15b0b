// What `tenax bench allreduce`'s two modes share: processes on this machine
// (allreduce_bench.cc, tenax vs Open MPI vs Gloo) and one process per
// namespaced host (allreduce_hosts_bench.cc, `--hosts`: the flat ring vs the
// zone-hierarchical allreduce vs Gloo vs the iperf3 ceiling). Both start the
// same hidden `tenax-bench allreduce-rank` and read rank 0's JSON lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::bench::allreduce {

// "4096", "4KiB", "4k", "1MiB", "64M" -> bytes; a positive multiple of 4, at most 2 GiB.
Result<uint64_t> ParseSize(const std::string& s);
Result<std::vector<uint64_t>> ParseSizes(const std::vector<std::string>& items);
std::string JoinSizes(const std::vector<uint64_t>& sizes);
std::string HumanBytes(uint64_t b);
std::string HumanSeconds(double s);
// Bus bandwidth of an allreduce, GB/s: 2(p-1)/p x bytes / time.
double BusBandwidthGBps(int procs, uint64_t bytes, double seconds);

struct RunResult {
  std::string impl;
  int procs = 0;
  uint64_t bytes = 0;
  double seconds = 0;  // max over ranks of each rank's median call
  uint64_t iterations = 0;
  double cross_zone_bytes = -1;  // per call, all ranks together (-1: not counted)
};

// Rank 0's result lines (JSON objects among other output) for `impl` run on
// `procs` processes: one per size, in the order of `sizes`. Internal error
// for a line of another run, a time that is not positive, a missing size.
Result<std::vector<RunResult>> ParseResults(const std::vector<std::string>& lines, const std::string& impl, int procs,
                                            const std::vector<uint64_t>& sizes);

// Ok without failures, else Internal listing them ("2 run(s) failed; ...").
Status FailuresStatus(const std::vector<std::string>& failures);

// The `--hosts` mode (allreduce_hosts_bench.cc).
struct HostsArgs {
  std::vector<std::string> zones;  // one per host, in rank order
  std::vector<std::string> impls;  // empty: tenax, hierarchical (several zones), gloo (no delay), iperf3
  std::vector<uint64_t> sizes;
  uint64_t budget_bytes = 0, min_iters = 0, warmup = 0;
  double same_zone_gbps = 10, cross_zone_gbps = 1;
  double same_zone_delay_ms = 0, cross_zone_delay_ms = 10;
  double iperf_seconds = 3;
  std::string iperf3 = "iperf3";
  uint64_t piece_bytes = 0, window = 0;  // tenax ranks' ring pieces and window (0: the library's default)
  int tcp_streams = 1;                    // tenax ranks' data connections per peer (net.tcp_streams)
  std::string gloo_bin;  // "" = next to tenax-bench
  int64_t timeout_seconds = 300;
  std::string json_path;
  bool quick = false;
};
Status RunHostsBench(const HostsArgs& a);

}  // namespace tenax::bench::allreduce

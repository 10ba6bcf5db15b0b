// What tenax knows about the network between two nodes (layer `sched`,
// docs/placement.md): round-trip delay, loss and throughput, as probes
// measured them (LinkMatrix) or as a simulator or a file states them.
//
// LinkView is the seam the scorer reads through: the coordinator's
// time-decayed LinkMatrix in production, a generated matrix in `tenax bench
// sched`, a static file for the Kubernetes extender.
#pragma once

#include <optional>
#include <string>

namespace tenax::sched {

struct LinkMetrics {
  double rtt_ms = 0;           // round-trip delay
  double loss = 0;             // share of probes lost, 0..1
  double throughput_gbps = 0;  // one flow's throughput
  bool reachable = true;       // false: the last probes got no answer at all
};

// One node as placement sees it.
struct NodeState {
  std::string name;
  std::string zone;   // "" = unknown (all unknown zones count as one zone)
  int capacity = 1;   // slots (one worker, server or storage role each)
  int used = 0;       // slots already taken by other jobs
  int id = -1;        // dense index for LinkViews that want one (the simulator)

  int free() const { return capacity > used ? capacity - used : 0; }
};

// Read-only view of the links between nodes. Implementations are
// thread-compatible: concurrent const calls are safe when nothing writes.
class LinkView {
 public:
  virtual ~LinkView() = default;
  // The metrics between a and b (symmetric), or nullopt when never measured;
  // the scorer then assumes the documented defaults for the zones involved.
  virtual std::optional<LinkMetrics> Link(const NodeState& a, const NodeState& b) const = 0;
};

// What the scorer assumes for a pair nobody measured (docs/placement.md):
// the cloud figures of ../shared/PAPERS.md, so an unmeasured link is not
// preferred over a measured good one, nor avoided like a bad one.
struct UnmeasuredLinks {
  LinkMetrics same_zone{0.2, 0.0, 10.0, true};
  LinkMetrics cross_zone{1.0, 0.0, 5.0, true};
};

// The estimated seconds of one ring allreduce of `bytes` over links whose
// worst members are `worst`: 2(n-1)/n * bytes / throughput + 2(n-1) * rtt,
// with throughput capped by the Mathis et al. TCP bound under loss
// (MSS / (rtt * sqrt(2p/3))). n = 1 costs nothing. An unreachable link costs
// +infinity.
double RingAllreduceSeconds(int n, double bytes, const LinkMetrics& worst);

// Its zone-hierarchical twin (comm/hierarchical_allreduce.h) over `zones`
// zones of `zone_size` members: a ring allreduce inside each zone over
// its worst link `inside` (the reduce-scatter and the allgather), plus a
// ring allreduce of a 1/zone_size share across the zones over the worst
// cross-zone link `across`, every member's link carrying one share at
// once. Steps are summed, not overlapped: an upper bound of the pipeline.
double HierarchicalAllreduceSeconds(int zones, int zone_size, double bytes, const LinkMetrics& inside,
                                    const LinkMetrics& across);

// net.tcp_streams = "auto" (docs/network.md): TCP streams per peer for
// members whose worst link is `worst`. One stream on a short, clean link
// (round trip under 10 ms, loss at most kAutoTcpStreamsCleanLoss); 4
// otherwise, where parallel streams fill what one flow's window cannot.
inline constexpr double kAutoTcpStreamsRttMs = 10.0;
// One late ping in the launcher's five. A ping counts as lost when it is
// later than twice the median plus 1 ms (probe_agent.cc), and a prober
// descheduled for a millisecond on a loaded machine shows exactly one
// such ping on an idle loopback link (CI measured 0.2 there). Five pings
// cannot see a real network's 0.1-1% loss anyway; what they can see, two
// or more lost in five, is a link that streams help.
inline constexpr double kAutoTcpStreamsCleanLoss = 0.2;
int AutoTcpStreams(const LinkMetrics& worst);

}  // namespace tenax::sched

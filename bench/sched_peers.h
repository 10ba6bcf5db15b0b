// The schedulers `tenax bench sched` compares tenax's network-aware placer
// with (docs/placement.md, "tenax bench sched"), as per-pod rules computed the
// way their Go sources compute them (integer node scores 0..100):
//
//  - networkoverhead: the scheduler-plugins NetworkOverhead plugin
//    (pkg/networkaware/networkoverhead, KEP-260). A pod's cost on a node is
//    the sum over the job's pods already placed of 0 (same host), 1 (same
//    zone) or the NetworkTopology's zone-to-zone cost (MaxCost 100 when the
//    pair is missing); NormalizeScore turns it into
//    100 - int(100 * (cost - min) / (max - min)) (every node 100 - (cost -
//    min) when min == max; all left at 0 when all costs are 0; 0 everywhere
//    for a job's first pod, "scoreEqually"). The zone costs are static:
//    StaticZoneCosts computes them once from the links at the start.
//    Among nodes of equal NetworkOverhead score the emptiest wins
//    (LeastAllocated), then a seeded random choice.
//  - default: kube-scheduler's default profile as it scores these pods:
//    NodeResourcesFit LeastAllocated (weight 1) + PodTopologySpread with the
//    default system constraints (hostname maxSkew 3, zone maxSkew 5, both
//    ScheduleAnyway; weight 2), the job's own pods matching; the other
//    default score plugins give every node the same score here. Ties go to
//    a seeded random node, as selectHost picks among the best.
//  - default_least_allocated: LeastAllocated alone. PodTopologySpread's
//    default constraints only apply to pods a Service, ReplicaSet,
//    StatefulSet or ReplicationController selects, which a batch Job's pods
//    often are not; this is what such pods get.
//  - random: a uniformly random node with a free slot.
//
// Every rule places a gang pod by pod on a copy of the slot counts, and the
// gang is all or nothing (as with a coscheduling plugin). A `hard` job (all
// in one zone) is offered, as a generous gang-aware filter would, only zones
// with room for the whole gang; its later pods follow the first pod's zone
// (required pod affinity on topology.kubernetes.io/zone). NetworkOverhead's
// maxNetworkCost filter is not modelled (a soft job's AppGroup would allow
// every zone; a hard job is held to its zone as above).
//
// Pure functions over a snapshot, thread-safe, except that PlacePodByPod
// draws from the Rng it is given (one per thread).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sched_rng.h"
#include "tenax/sched/probe/link_metrics.h"

namespace tenax::bench::schedsim {

// A NetworkTopology's zone-to-zone costs. Symmetric; same zone is not
// looked up (it costs SameZone = 1).
class ZoneCosts {
 public:
  void Set(const std::string& a, const std::string& b, int64_t cost);
  // The cost between two different zones; 100 (the plugin's MaxCost) when
  // the topology lacks the pair.
  int64_t Cost(const std::string& a, const std::string& b) const;
  const std::map<std::pair<std::string, std::string>, int64_t>& All() const { return costs_; }

 private:
  std::map<std::pair<std::string, std::string>, int64_t> costs_;
};

// The costs an operator's NetworkTopology would hold, measured once: per
// zone pair, the mean round trip over its node pairs in units of 0.1 ms,
// at least 2 so that another zone always costs more than the same zone (1).
// The unit is ours; after normalisation only the order of the costs and
// their distance from 1 matter.
ZoneCosts StaticZoneCosts(const std::vector<sched::NodeState>& nodes, const sched::LinkView& links,
                          const sched::UnmeasuredLinks& unmeasured = {});

// NetworkOverhead's accumulated cost of `candidate` against the job's pods
// already placed (node indices, one per pod, repeats allowed).
int64_t NetworkOverheadCost(const std::vector<sched::NodeState>& nodes, int candidate,
                            const std::vector<int>& placed, const ZoneCosts& costs);

// NetworkOverhead's normalised scores of `candidates` (Score, then
// NormalizeScore), in the order given.
std::vector<int64_t> NetworkOverheadScores(const std::vector<sched::NodeState>& nodes,
                                           const std::vector<int>& candidates, const std::vector<int>& placed,
                                           const ZoneCosts& costs);

// NodeResourcesFit LeastAllocated with the pod's one slot counted:
// (capacity - used - 1) * 100 / capacity, integer division.
std::vector<int64_t> LeastAllocatedScores(const std::vector<sched::NodeState>& nodes,
                                          const std::vector<int>& candidates);

// PodTopologySpread's normalised scores for the default system constraints,
// counting the job's pods already placed (`placed`, node indices). The
// candidates are the filtered nodes (they size the hostname domain).
std::vector<int64_t> TopologySpreadScores(const std::vector<sched::NodeState>& nodes,
                                          const std::vector<int>& candidates, const std::vector<int>& placed);

enum class PeerRule { kNetworkOverhead, kDefault, kDefaultLeastAllocated, kRandom };
const char* PeerRuleName(PeerRule rule);

struct PodGang {
  int pods = 1;       // workers + parameter servers
  bool hard = false;  // all in one zone, or wait
};

// Places the gang pod by pod (see the header); nullopt when it does not fit
// now (too few free slots, or for `hard` no zone with room for all of it).
// Returns the node index of each pod, in order.
std::optional<std::vector<int>> PlacePodByPod(PeerRule rule, const std::vector<sched::NodeState>& nodes,
                                              const PodGang& gang, const ZoneCosts& costs, Rng& rng);

}  // namespace tenax::bench::schedsim

// Gang placement of a whole job (layer `sched`, docs/placement.md).
//
// 1. Zones: when one zone has free slots for the whole gang, only such
//    zones are candidates (the one holding most of the job's storage nodes
//    first, then the one whose greedy placement has the cheapest estimated
//    allreduce). Otherwise a `hard` job waits (Unavailable, naming the
//    largest zone's free slots) and a `soft` job takes the fewest zones that
//    fit it (the largest zones first; among equal counts, the cheapest).
// 2. Nodes: greedily, the best-scored node (scorer.h) against the slots
//    already placed takes as many of the remaining slots as it has free, so
//    a gang packs onto few hosts with good links between them.
// 3. Re-placement (after a node loss or a degraded link) moves only the
//    slots named, scored against the slots that stay, under the same zone
//    rule.
//
// Pure functions over a snapshot; deterministic (ties by name); thread-safe.
#pragma once

#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/sched/probe/link_metrics.h"
#include "tenax/sched/place/scorer.h"

namespace tenax::sched {

enum class ZoneConstraint { kHard, kSoft };
Result<ZoneConstraint> ParseZoneConstraint(const std::string& text);  // "hard" | "soft"
const char* ZoneConstraintName(ZoneConstraint c);

struct GangRequest {
  std::string job;
  int workers = 1;
  int servers = 0;                         // parameter servers (async mode)
  std::vector<std::string> storage_nodes;  // where the job's data lives (affinity)
  ZoneConstraint zone = ZoneConstraint::kSoft;
  double gradient_bytes = 4e6;             // for the allreduce cost estimate
};

struct SlotAssignment {
  std::string role;  // "worker" | "server"
  int index = 0;     // rank within the role
  int node = -1;     // index into the nodes given
};

struct Placement {
  std::vector<SlotAssignment> slots;  // workers first, then servers
  std::vector<std::string> zones;     // the zones used, sorted
  LinkMetrics worst_link;             // among the placed workers
  double allreduce_seconds = 0;       // RingAllreduceSeconds over the workers
};

struct PlacerOptions {
  ScoreWeights weights;
  UnmeasuredLinks unmeasured;
};

// Places the gang on free slots of `nodes` (NodeState::used is respected;
// the caller books the result). InvalidArgument for an empty or negative
// gang; Unavailable when the cluster (or, for hard, any one zone) lacks the
// slots, with the numbers in the message.
Result<Placement> PlaceGang(const std::vector<NodeState>& nodes, const LinkView& links, const GangRequest& request,
                            const PlacerOptions& options = {});

// Moves the slots of `placement` listed in `move` (indices into
// placement.slots) to other nodes: `nodes` must already exclude the lost
// node's capacity (used = capacity) and must not count the moved slots as
// used. The slots that stay are the peers. Under `hard`, moved slots stay in
// the placement's zone while it has room.
Result<Placement> Replace(const std::vector<NodeState>& nodes, const LinkView& links, const GangRequest& request,
                          const Placement& placement, const std::vector<int>& move,
                          const PlacerOptions& options = {});

// Thresholds for "a link degraded": a placed worker whose worst link to the
// other workers is beyond any of them should move.
struct DegradationThresholds {
  double max_loss = 0.01;
  double max_rtt_ms = 10.0;
  double min_throughput_gbps = 1.0;
};
// Indices into placement.slots of workers whose links now break the
// thresholds. When a link between two workers is bad, the one with more bad
// links to the job's other workers is listed, then the one with more bad
// links to the rest of the cluster (a bad NIC), then the higher rank, so one
// bad node does not move the whole gang.
std::vector<int> DegradedSlots(const std::vector<NodeState>& nodes, const LinkView& links,
                               const Placement& placement, const DegradationThresholds& thresholds,
                               const UnmeasuredLinks& unmeasured = {});

}  // namespace tenax::sched

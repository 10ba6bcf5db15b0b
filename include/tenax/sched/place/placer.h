// Gang placement of a whole job (layer `sched`, docs/placement.md).
//
// 1. Zones: when one zone has free slots for the whole gang, only such
//    zones are candidates. Otherwise a `hard` job waits (Unavailable, naming
//    the largest zone's free slots) and a `soft` job takes the fewest zones
//    that fit it (the largest zones first). Among the candidates, the one
//    whose placement has the lowest estimated step (EstimateStep below:
//    the workers' allreduce or the servers' exchange, plus the input read
//    from storage) wins; storage affinity is a term of that estimate, not a
//    priority, and breaks only exact ties.
// 2. Nodes: greedily, the best-scored node (scorer.h) against the slots
//    already placed takes as many of the remaining slots as it has free, so
//    a gang packs onto few hosts with good links between them. A job with
//    storage nodes tries two starts in each candidate zone set, scored
//    against its storage nodes (its first slots beside its data) and by
//    centrality (as a job without data), and keeps the cheaper estimate, so
//    a storage node behind a bad NIC does not pull the gang onto itself.
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
  // Bytes each worker reads from the storage nodes per step (its batch).
  // 0 = unknown: the read is not estimated and storage affinity only breaks
  // ties between equal estimates.
  double input_bytes = 0;
  // Seconds of compute per step, when known. A data loader reads the next
  // batch while the step computes, so a read costs only what it exceeds the
  // compute by. 0 = unknown: the read counts in full.
  double compute_seconds = 0;
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
  double exchange_seconds = 0;        // a step's communication (StepEstimate::exchange_seconds)
  double input_seconds = 0;           // a step's slowest input read (StepEstimate::input_seconds)
  double step_seconds = 0;            // the estimate the zone choice minimises (StepEstimate::step_seconds)
};

// What a placement costs one step, priced from the link view (the rule of
// the zone choice, docs/placement.md "Gang placement"):
//   exchange = a job without servers: RingAllreduceSeconds(workers,
//                gradient_bytes, worst link among the workers);
//              with S servers (each holds 1/S of the model and moves
//                W gradient shards in and W model shards out a step):
//                RingAllreduceSeconds(2, 2 W gradient_bytes / S, worst link
//                between a worker and a server);
//   input    = the slowest worker's read of input_bytes from its nearest
//              storage node (request and reply: RingAllreduceSeconds(2,
//              input_bytes, that link)); 0 without storage nodes or bytes;
//   step     = max(compute_seconds, input) + exchange.
// A pair on one host is a perfect link; unmeasured pairs get `unmeasured`.
struct StepEstimate {
  double exchange_seconds = 0;
  double input_seconds = 0;
  double step_seconds = 0;
};
// `slot_nodes`: indices into nodes, workers first, then servers (as
// Placement::slots). `storage`: indices into nodes of the storage nodes.
StepEstimate EstimateStep(const std::vector<NodeState>& nodes, const LinkView& links, const GangRequest& request,
                          const std::vector<int>& slot_nodes, const std::vector<int>& storage,
                          const UnmeasuredLinks& unmeasured = {});

struct PlacerOptions {
  ScoreWeights weights;
  UnmeasuredLinks unmeasured;
  // > 0: a gang waits (Unavailable) rather than take a placement whose
  // estimated step is more than this many times the same placement's step
  // on nominal links (`unmeasured`: the healthy cloud figures), as long as
  // other jobs hold slots of `nodes` (they will free them; on an idle
  // cluster the gang takes the best there is). 0: a gang takes the best
  // placement whenever it fits (a soft job never waits while slots exist).
  double max_slowdown = 0;
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

// True when `link` breaks any threshold (unreachable counts); a threshold
// of 0 throughput is not judged.
bool BreaksThresholds(const LinkMetrics& link, const DegradationThresholds& thresholds);
// "rtt 41.3 ms > 10 ms, 0.38 Gbit/s < 1 Gbit/s": what `link` breaks.
std::string ThresholdsBroken(const LinkMetrics& link, const DegradationThresholds& thresholds);

// A live migration's plan (docs/placement.md, "Moving a live worker"): the
// member to move off a degraded link and the host to move it to.
struct MigrationPlan {
  int member = -1;   // index into member_nodes (DegradedSlots' first)
  int from = -1;     // its node
  int to = -1;       // the node to move it to; -1 when none qualifies
  LinkMetrics worst; // its worst link to the other members now
  std::string why;   // what its worst link breaks ("a2-a1: rtt 41.3 ms > 10 ms")
  std::string why_not;  // to = -1: why no node qualifies
  double estimated_seconds_now = 0;    // the members' allreduce as they are (RingAllreduceSeconds)
  double estimated_seconds_after = 0;  // ... with the member on `to`
};
// `member_nodes`: the node (index into nodes) of each live member, in any
// order. nullopt while no member's links break the thresholds. Otherwise
// the first member DegradedSlots names, and as `to` the best-scored node
// (ScoreNodes against the other members) among those with a free slot,
// other than `from`, whose links to every other member (on another node)
// meet the thresholds and with which the members' allreduce of
// `gradient_bytes` is estimated (RingAllreduceSeconds over their worst
// link) at most 0.8x today's: a move that would land on another bad link,
// or across a zone link slower than the bad one, is not planned (why_not
// says so), so moves never loop. Pure, deterministic.
std::optional<MigrationPlan> PlanMigration(const std::vector<NodeState>& nodes, const LinkView& links,
                                           const std::vector<int>& member_nodes,
                                           const DegradationThresholds& thresholds, const ScoreWeights& weights = {},
                                           double gradient_bytes = 4e6, const UnmeasuredLinks& unmeasured = {});

}  // namespace tenax::sched

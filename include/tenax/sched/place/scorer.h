// Scores candidate nodes by the links to the peers a job already has there
// (layer `sched`, docs/placement.md). The one scorer serves the local
// launcher, `tenax bench sched` and the Kubernetes extender.
//
// For each candidate c and the set P of peers already placed (or, before
// the first, the job's storage nodes; or, with neither, the other
// candidates), the scorer takes c's WORST link to P, because a ring
// allreduce goes at the pace of its slowest link:
//   throughput = min over P, delay = max over P, loss = max over P.
// Each is normalised over the candidates to 0..1 (1 = best: highest
// throughput, lowest delay, lowest loss; when all candidates are equal in a
// metric, all get 1), and the score is
//   100 * (w_t * throughput + w_d * delay + w_l * loss) / (w_t + w_d + w_l).
// A peer on the candidate itself is a perfect link; an unmeasured pair gets
// UnmeasuredLinks; a candidate with an unreachable link to a peer scores 0.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/sched/probe/link_metrics.h"

namespace tenax::sched {

// Defaults (reasoning in docs/placement.md): a data-parallel step moves
// megabytes of gradients, so throughput decides most of its communication
// time; delay adds 2(n-1) round trips per ring allreduce; loss shrinks TCP
// throughput (already partly seen by the throughput probe), hence least.
struct ScoreWeights {
  double throughput = 0.5;
  double delay = 0.3;
  double loss = 0.2;
};

// InvalidArgument unless every weight is finite, >= 0, and their sum > 0.
Status ValidateWeights(const ScoreWeights& w);

struct ScoredNode {
  int index = -1;      // the candidate's node index (as given, into `nodes`)
  double score = 0;    // 0..100
  LinkMetrics worst;   // the worst link to the peers (what was normalised)
};

// Scores every candidate against `peers` (indices into `nodes`; a peer may
// repeat). `candidates` are indices into `nodes`. The result is in the
// order of `candidates`.
std::vector<ScoredNode> ScoreNodes(const std::vector<NodeState>& nodes, const std::vector<int>& candidates,
                                   const std::vector<int>& peers, const LinkView& links, const ScoreWeights& weights,
                                   const UnmeasuredLinks& unmeasured = {});

// The peers each candidate is scored against when a job has neither placed
// peers nor storage nodes: at most `max_peers` of the candidates, evenly
// spaced, so a node central to the others scores best and one pod on 5,000
// nodes costs a few hundred thousand link reads, not 25 million. Shared by
// PlaceGang and the Kubernetes extender (extender.h).
inline constexpr size_t kMaxCentralityPeers = 32;
std::vector<int> CentralityPeers(const std::vector<int>& candidates, size_t max_peers = kMaxCentralityPeers);

// Centrality for a gang's first slot (PlaceGang, when it has no peers yet):
// as ScoreNodes, but each candidate's link to the peers is the MEAN of its
// links to them (throughput, delay and loss each; an unreachable link
// counts as no throughput and full loss, and a candidate unreachable from
// most peers scores 0), not the worst, and a peer on the candidate itself
// is skipped. One bad NIC among the peers makes every candidate's worst
// link bad alike, so the worst cannot tell the bad node from the healthy
// ones; the mean can. `worst` holds the mean link.
std::vector<ScoredNode> ScoreCentrality(const std::vector<NodeState>& nodes, const std::vector<int>& candidates,
                                        const std::vector<int>& peers, const LinkView& links,
                                        const ScoreWeights& weights, const UnmeasuredLinks& unmeasured = {});

// The worst link between a and b as the scorer sees it (same node: perfect;
// unmeasured: by zone).
LinkMetrics EffectiveLink(const NodeState& a, const NodeState& b, const LinkView& links,
                          const UnmeasuredLinks& unmeasured = {});

// The worst link among all pairs of distinct nodes in `members` (indices
// into nodes; duplicates are the same host and cost nothing).
LinkMetrics WorstLinkAmong(const std::vector<NodeState>& nodes, const std::vector<int>& members,
                           const LinkView& links, const UnmeasuredLinks& unmeasured = {});

}  // namespace tenax::sched

#include "tenax/sched/place/scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tenax::sched {
namespace {

// Folds `l` into `worst` (min throughput, max delay, max loss).
void Worsen(LinkMetrics& worst, const LinkMetrics& l) {
  worst.throughput_gbps = std::min(worst.throughput_gbps, l.throughput_gbps);
  worst.rtt_ms = std::max(worst.rtt_ms, l.rtt_ms);
  worst.loss = std::max(worst.loss, l.loss);
  worst.reachable = worst.reachable && l.reachable;
}

LinkMetrics Perfect() {
  return LinkMetrics{0.0, 0.0, std::numeric_limits<double>::infinity(), true};
}

// (v - lo) / (hi - lo), with every candidate at 1 when all are equal.
double Norm(double v, double lo, double hi) {
  if (!(hi > lo)) return 1.0;
  return (v - lo) / (hi - lo);
}

}  // namespace

Status ValidateWeights(const ScoreWeights& w) {
  for (double v : {w.throughput, w.delay, w.loss}) {
    if (!std::isfinite(v) || v < 0) {
      return InvalidArgument("score weights must be finite and >= 0 (throughput " + std::to_string(w.throughput) +
                             ", delay " + std::to_string(w.delay) + ", loss " + std::to_string(w.loss) + ")");
    }
  }
  if (!(w.throughput + w.delay + w.loss > 0)) {
    return InvalidArgument("score weights must not all be 0 (the defaults are throughput 0.5, delay 0.3, loss 0.2)");
  }
  return Status::Ok();
}

std::vector<int> CentralityPeers(const std::vector<int>& candidates, size_t max_peers) {
  std::vector<int> out;
  const size_t step = std::max<size_t>(1, candidates.size() / std::max<size_t>(1, max_peers));
  for (size_t i = 0; i < candidates.size(); i += step) out.push_back(candidates[i]);
  return out;
}

LinkMetrics EffectiveLink(const NodeState& a, const NodeState& b, const LinkView& links,
                          const UnmeasuredLinks& unmeasured) {
  if (a.name == b.name) return Perfect();
  if (auto m = links.Link(a, b)) return *m;
  return a.zone == b.zone ? unmeasured.same_zone : unmeasured.cross_zone;
}

LinkMetrics WorstLinkAmong(const std::vector<NodeState>& nodes, const std::vector<int>& members,
                           const LinkView& links, const UnmeasuredLinks& unmeasured) {
  std::vector<int> distinct = members;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  LinkMetrics worst = Perfect();
  for (size_t i = 0; i < distinct.size(); ++i) {
    for (size_t j = i + 1; j < distinct.size(); ++j) {
      Worsen(worst, EffectiveLink(nodes[distinct[i]], nodes[distinct[j]], links, unmeasured));
    }
  }
  return worst;
}

namespace {

std::vector<int> Distinct(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// Fills every ScoredNode's score from its `worst` link (see scorer.h).
void Normalise(std::vector<ScoredNode>& out, const ScoreWeights& weights);

}  // namespace

std::vector<ScoredNode> ScoreNodes(const std::vector<NodeState>& nodes, const std::vector<int>& candidates,
                                   const std::vector<int>& peers, const LinkView& links, const ScoreWeights& weights,
                                   const UnmeasuredLinks& unmeasured) {
  const std::vector<int> distinct_peers = Distinct(peers);
  std::vector<ScoredNode> out(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    out[i].index = candidates[i];
    LinkMetrics worst = Perfect();
    for (int p : distinct_peers) Worsen(worst, EffectiveLink(nodes[candidates[i]], nodes[p], links, unmeasured));
    out[i].worst = worst;
  }
  Normalise(out, weights);
  return out;
}

std::vector<ScoredNode> ScoreCentrality(const std::vector<NodeState>& nodes, const std::vector<int>& candidates,
                                        const std::vector<int>& peers, const LinkView& links,
                                        const ScoreWeights& weights, const UnmeasuredLinks& unmeasured) {
  const std::vector<int> distinct_peers = Distinct(peers);
  std::vector<ScoredNode> out(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    out[i].index = candidates[i];
    double tp = 0, rtt = 0, loss = 0;
    int count = 0, answered = 0;
    for (int p : distinct_peers) {
      if (nodes[p].name == nodes[candidates[i]].name) continue;  // itself: says nothing about its links
      const LinkMetrics l = EffectiveLink(nodes[candidates[i]], nodes[p], links, unmeasured);
      ++count;
      if (!l.reachable) {  // carries nothing: no throughput, every probe lost
        loss += 1.0;
        continue;
      }
      ++answered;
      tp += l.throughput_gbps;
      rtt += l.rtt_ms;
      loss += l.loss;
    }
    if (count == 0) {
      out[i].worst = Perfect();
      continue;
    }
    // Unreachable from most of the others: not a centre at all.
    out[i].worst = LinkMetrics{answered > 0 ? rtt / answered : 0.0, loss / count, tp / count, 2 * answered > count};
  }
  Normalise(out, weights);
  return out;
}

namespace {

void Normalise(std::vector<ScoredNode>& out, const ScoreWeights& weights) {

  // Normalise over the reachable candidates; an infinite throughput (all
  // peers on the candidate itself) is capped at the best finite one.
  double tp_lo = std::numeric_limits<double>::infinity(), tp_hi = 0;
  double d_lo = std::numeric_limits<double>::infinity(), d_hi = 0;
  double l_lo = std::numeric_limits<double>::infinity(), l_hi = 0;
  double finite_tp_hi = 0;
  bool any_finite_tp = false;
  for (const ScoredNode& s : out) {
    if (!s.worst.reachable) continue;
    if (std::isfinite(s.worst.throughput_gbps)) {
      finite_tp_hi = std::max(finite_tp_hi, s.worst.throughput_gbps);
      any_finite_tp = true;
    }
  }
  auto tp_of = [&](const ScoredNode& s) {
    if (std::isfinite(s.worst.throughput_gbps)) return s.worst.throughput_gbps;
    return any_finite_tp ? finite_tp_hi * 2.0 : 1.0;  // same host beats any link
  };
  for (const ScoredNode& s : out) {
    if (!s.worst.reachable) continue;
    tp_lo = std::min(tp_lo, tp_of(s));
    tp_hi = std::max(tp_hi, tp_of(s));
    d_lo = std::min(d_lo, s.worst.rtt_ms);
    d_hi = std::max(d_hi, s.worst.rtt_ms);
    l_lo = std::min(l_lo, s.worst.loss);
    l_hi = std::max(l_hi, s.worst.loss);
  }
  const double wsum = weights.throughput + weights.delay + weights.loss;
  for (ScoredNode& s : out) {
    if (!s.worst.reachable || !(wsum > 0)) {
      s.score = 0;
      continue;
    }
    const double t = Norm(tp_of(s), tp_lo, tp_hi);
    // Lower is better for delay and loss; all equal gives every candidate 1.
    const double dd = d_hi > d_lo ? 1.0 - Norm(s.worst.rtt_ms, d_lo, d_hi) : 1.0;
    const double ll = l_hi > l_lo ? 1.0 - Norm(s.worst.loss, l_lo, l_hi) : 1.0;
    s.score = 100.0 * (weights.throughput * t + weights.delay * dd + weights.loss * ll) / wsum;
  }
}

}  // namespace

}  // namespace tenax::sched

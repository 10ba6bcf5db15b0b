#include "sched_peers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "tenax/sched/place/scorer.h"

namespace tenax::bench::schedsim {
namespace {

constexpr int64_t kMaxNodeScore = 100;
constexpr int64_t kSameHostCost = 0;
constexpr int64_t kSameZoneCost = 1;
constexpr int64_t kMaxCost = 100;  // NetworkOverhead's cost of a pair the topology lacks

// kube-scheduler's default system constraints (PodTopologySpread args).
constexpr int kHostMaxSkew = 3;
constexpr int kZoneMaxSkew = 5;
// Score weights of the default profile.
constexpr int64_t kFitWeight = 1;
constexpr int64_t kSpreadWeight = 2;

std::pair<std::string, std::string> Key(const std::string& a, const std::string& b) {
  return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
}

// The candidate with the best key (compared with >), ties by a seeded draw.
template <typename Score>
int PickBest(const std::vector<int>& candidates, const std::vector<Score>& scores, Rng& rng) {
  Score best = scores[0];
  for (const Score& s : scores) best = std::max(best, s);
  std::vector<int> tied;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (scores[i] == best) tied.push_back(candidates[i]);
  }
  return tied[static_cast<size_t>(rng.Index(static_cast<int>(tied.size())))];
}

}  // namespace

void ZoneCosts::Set(const std::string& a, const std::string& b, int64_t cost) { costs_[Key(a, b)] = cost; }

int64_t ZoneCosts::Cost(const std::string& a, const std::string& b) const {
  auto it = costs_.find(Key(a, b));
  return it == costs_.end() ? kMaxCost : it->second;
}

ZoneCosts StaticZoneCosts(const std::vector<sched::NodeState>& nodes, const sched::LinkView& links,
                          const sched::UnmeasuredLinks& unmeasured) {
  std::map<std::pair<std::string, std::string>, std::pair<double, int>> sums;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t j = i + 1; j < nodes.size(); ++j) {
      if (nodes[i].zone == nodes[j].zone) continue;
      auto& s = sums[Key(nodes[i].zone, nodes[j].zone)];
      s.first += sched::EffectiveLink(nodes[i], nodes[j], links, unmeasured).rtt_ms;
      s.second += 1;
    }
  }
  ZoneCosts costs;
  for (const auto& [pair, s] : sums) {
    const int64_t tenths = std::llround(10.0 * s.first / s.second);
    costs.Set(pair.first, pair.second, std::max<int64_t>(kSameZoneCost + 1, tenths));
  }
  return costs;
}

int64_t NetworkOverheadCost(const std::vector<sched::NodeState>& nodes, int candidate, const std::vector<int>& placed,
                            const ZoneCosts& costs) {
  int64_t cost = 0;
  const sched::NodeState& c = nodes[static_cast<size_t>(candidate)];
  for (int p : placed) {
    const sched::NodeState& peer = nodes[static_cast<size_t>(p)];
    if (peer.name == c.name) {
      cost += kSameHostCost;
    } else if (peer.zone == c.zone) {
      cost += kSameZoneCost;
    } else {
      cost += costs.Cost(c.zone, peer.zone);
    }
  }
  return cost;
}

std::vector<int64_t> NetworkOverheadScores(const std::vector<sched::NodeState>& nodes,
                                           const std::vector<int>& candidates, const std::vector<int>& placed,
                                           const ZoneCosts& costs) {
  std::vector<int64_t> scores(candidates.size(), 0);
  if (placed.empty() || candidates.empty()) return scores;  // scoreEqually: MinNodeScore for all
  for (size_t i = 0; i < candidates.size(); ++i) scores[i] = NetworkOverheadCost(nodes, candidates[i], placed, costs);
  const auto [lo_it, hi_it] = std::minmax_element(scores.begin(), scores.end());
  const int64_t lo = *lo_it, hi = *hi_it;
  if (lo == 0 && hi == 0) return scores;
  for (int64_t& s : scores) {
    if (hi != lo) {
      const double norm = static_cast<double>(kMaxNodeScore) * static_cast<double>(s - lo) / static_cast<double>(hi - lo);
      s = kMaxNodeScore - static_cast<int64_t>(norm);  // Go's int64(): truncation
    } else {
      s = kMaxNodeScore - (s - lo);
    }
  }
  return scores;
}

std::vector<int64_t> LeastAllocatedScores(const std::vector<sched::NodeState>& nodes,
                                          const std::vector<int>& candidates) {
  std::vector<int64_t> scores;
  scores.reserve(candidates.size());
  for (int c : candidates) {
    const sched::NodeState& n = nodes[static_cast<size_t>(c)];
    const int64_t capacity = n.capacity, requested = n.used + 1;
    scores.push_back(capacity <= 0 || requested > capacity ? 0 : (capacity - requested) * kMaxNodeScore / capacity);
  }
  return scores;
}

std::vector<int64_t> TopologySpreadScores(const std::vector<sched::NodeState>& nodes,
                                          const std::vector<int>& candidates, const std::vector<int>& placed) {
  std::set<std::string> zones;
  for (int c : candidates) zones.insert(nodes[static_cast<size_t>(c)].zone);
  // topologyNormalizingWeight: log(domains + 2); the hostname domains are
  // the filtered nodes.
  const double host_weight = std::log(static_cast<double>(candidates.size()) + 2.0);
  const double zone_weight = std::log(static_cast<double>(zones.size()) + 2.0);
  std::map<std::string, int64_t> per_zone;
  std::map<int, int64_t> per_node;
  for (int p : placed) {
    ++per_node[p];
    ++per_zone[nodes[static_cast<size_t>(p)].zone];
  }
  std::vector<int64_t> raw;
  raw.reserve(candidates.size());
  for (int c : candidates) {
    const auto node_it = per_node.find(c);
    const auto zone_it = per_zone.find(nodes[static_cast<size_t>(c)].zone);
    const double host_count = node_it == per_node.end() ? 0.0 : static_cast<double>(node_it->second);
    const double zone_count = zone_it == per_zone.end() ? 0.0 : static_cast<double>(zone_it->second);
    // scoreForCount: count * weight + (maxSkew - 1), summed, then math.Round.
    const double score = host_count * host_weight + (kHostMaxSkew - 1) + zone_count * zone_weight + (kZoneMaxSkew - 1);
    raw.push_back(std::llround(score));
  }
  if (raw.empty()) return raw;
  const auto [lo_it, hi_it] = std::minmax_element(raw.begin(), raw.end());
  const int64_t lo = *lo_it, hi = *hi_it;
  for (int64_t& s : raw) s = hi == 0 ? kMaxNodeScore : kMaxNodeScore * (hi + lo - s) / hi;
  return raw;
}

const char* PeerRuleName(PeerRule rule) {
  switch (rule) {
    case PeerRule::kNetworkOverhead:
      return "networkoverhead";
    case PeerRule::kDefault:
      return "default";
    case PeerRule::kDefaultLeastAllocated:
      return "default_least_allocated";
    case PeerRule::kRandom:
      return "random";
  }
  return "?";
}

std::optional<std::vector<int>> PlacePodByPod(PeerRule rule, const std::vector<sched::NodeState>& nodes,
                                              const PodGang& gang, const ZoneCosts& costs, Rng& rng) {
  if (gang.pods <= 0) return std::vector<int>{};
  std::vector<sched::NodeState> n = nodes;
  std::map<std::string, int> zone_free;
  int total_free = 0;
  for (const sched::NodeState& s : n) {
    zone_free[s.zone] += s.free();
    total_free += s.free();
  }
  if (total_free < gang.pods) return std::nullopt;
  std::set<std::string> fitting;
  for (const auto& [zone, free] : zone_free) {
    if (free >= gang.pods) fitting.insert(zone);
  }
  if (gang.hard && fitting.empty()) return std::nullopt;

  std::vector<int> placed;
  placed.reserve(static_cast<size_t>(gang.pods));
  for (int pod = 0; pod < gang.pods; ++pod) {
    std::vector<int> candidates;
    for (size_t i = 0; i < n.size(); ++i) {
      if (n[i].free() <= 0) continue;
      if (gang.hard && (placed.empty() ? fitting.count(n[i].zone) == 0 : n[i].zone != n[placed[0]].zone)) continue;
      candidates.push_back(static_cast<int>(i));
    }
    if (candidates.empty()) return std::nullopt;  // cannot happen after the checks above
    int pick = -1;
    switch (rule) {
      case PeerRule::kRandom:
        pick = candidates[static_cast<size_t>(rng.Index(static_cast<int>(candidates.size())))];
        break;
      case PeerRule::kDefaultLeastAllocated:
        pick = PickBest(candidates, LeastAllocatedScores(n, candidates), rng);
        break;
      case PeerRule::kDefault: {
        std::vector<int64_t> total = LeastAllocatedScores(n, candidates);
        const std::vector<int64_t> spread = TopologySpreadScores(n, candidates, placed);
        for (size_t i = 0; i < total.size(); ++i) total[i] = kFitWeight * total[i] + kSpreadWeight * spread[i];
        pick = PickBest(candidates, total, rng);
        break;
      }
      case PeerRule::kNetworkOverhead: {
        const std::vector<int64_t> no = NetworkOverheadScores(n, candidates, placed, costs);
        const std::vector<int64_t> fit = LeastAllocatedScores(n, candidates);
        std::vector<std::pair<int64_t, int64_t>> keys;
        keys.reserve(candidates.size());
        for (size_t i = 0; i < candidates.size(); ++i) keys.emplace_back(no[i], fit[i]);
        pick = PickBest(candidates, keys, rng);
        break;
      }
    }
    placed.push_back(pick);
    ++n[static_cast<size_t>(pick)].used;
  }
  return placed;
}

}  // namespace tenax::bench::schedsim

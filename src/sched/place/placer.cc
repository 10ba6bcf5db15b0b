#include "tenax/sched/place/placer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace tenax::sched {
namespace {

// Candidate zone sets tried for a soft job that fits no single zone.
constexpr size_t kMaxZoneSets = 64;

struct ZoneFree {
  std::string zone;
  int free = 0;
  std::vector<int> nodes;  // with free slots
};

// Greedy fill of `slots` slots on `allowed` (indices into nodes, free > 0
// in `free`), scored against `peers` (updated with every pick).
Result<std::vector<int>> Fill(const std::vector<NodeState>& nodes, const LinkView& links, std::vector<int> allowed,
                              std::vector<int>& free, int slots, std::vector<int> peers,
                              const PlacerOptions& options) {
  std::vector<int> picked;
  picked.reserve(slots);
  while (slots > 0) {
    std::vector<int> candidates;
    for (int n : allowed) {
      if (free[n] > 0) candidates.push_back(n);
    }
    if (candidates.empty()) return Unavailable("not enough free slots in the chosen zones");
    // Before the first slot of a gang without storage nodes: centrality.
    const std::vector<int> score_against = peers.empty() ? CentralityPeers(candidates) : peers;
    std::vector<ScoredNode> scored = ScoreNodes(nodes, candidates, score_against, links, options.weights,
                                                options.unmeasured);
    const ScoredNode* best = nullptr;
    for (const ScoredNode& s : scored) {
      if (best == nullptr || s.score > best->score + 1e-9 ||
          (std::fabs(s.score - best->score) <= 1e-9 &&
           (free[s.index] > free[best->index] ||
            (free[s.index] == free[best->index] && nodes[s.index].name < nodes[best->index].name)))) {
        best = &s;
      }
    }
    const int n = best->index;
    const int take = std::min(free[n], slots);
    for (int i = 0; i < take; ++i) picked.push_back(n);
    free[n] -= take;
    slots -= take;
    peers.push_back(n);
  }
  return picked;
}

Placement Assemble(const std::vector<NodeState>& nodes, const LinkView& links, const GangRequest& request,
                   const std::vector<int>& slot_nodes, const PlacerOptions& options) {
  Placement p;
  std::set<std::string> zones;
  std::vector<int> workers;
  for (size_t i = 0; i < slot_nodes.size(); ++i) {
    const bool worker = static_cast<int>(i) < request.workers;
    p.slots.push_back(SlotAssignment{worker ? "worker" : "server",
                                     worker ? static_cast<int>(i) : static_cast<int>(i) - request.workers,
                                     slot_nodes[i]});
    zones.insert(nodes[slot_nodes[i]].zone);
    if (worker) workers.push_back(slot_nodes[i]);
  }
  p.zones.assign(zones.begin(), zones.end());
  p.worst_link = WorstLinkAmong(nodes, workers, links, options.unmeasured);
  p.allreduce_seconds = RingAllreduceSeconds(request.workers, request.gradient_bytes, p.worst_link);
  return p;
}

std::vector<int> StorageIndices(const std::vector<NodeState>& nodes, const GangRequest& request) {
  std::vector<int> out;
  for (const std::string& s : request.storage_nodes) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].name == s) out.push_back(static_cast<int>(i));
    }
  }
  return out;
}

// All k-subsets of zones (largest free first) whose free slots reach `need`,
// at most kMaxZoneSets of them.
void ZoneSets(const std::vector<ZoneFree>& zones, size_t k, int need, size_t start, std::vector<int>& current,
              int current_free, std::vector<std::vector<int>>& out) {
  if (out.size() >= kMaxZoneSets) return;
  if (current.size() == k) {
    if (current_free >= need) out.push_back(current);
    return;
  }
  for (size_t i = start; i < zones.size(); ++i) {
    current.push_back(static_cast<int>(i));
    ZoneSets(zones, k, need, i + 1, current, current_free + zones[i].free, out);
    current.pop_back();
  }
}

}  // namespace

Result<ZoneConstraint> ParseZoneConstraint(const std::string& text) {
  if (text == "hard") return ZoneConstraint::kHard;
  if (text == "soft") return ZoneConstraint::kSoft;
  return InvalidArgument("zone constraint '" + text +
                         "' is unknown: use \"hard\" (all in one zone, or wait) or \"soft\" (fewest zones)");
}

const char* ZoneConstraintName(ZoneConstraint c) { return c == ZoneConstraint::kHard ? "hard" : "soft"; }

Result<Placement> PlaceGang(const std::vector<NodeState>& nodes, const LinkView& links, const GangRequest& request,
                            const PlacerOptions& options) {
  if (request.workers < 0 || request.servers < 0 || request.workers + request.servers <= 0) {
    return InvalidArgument("job '" + request.job + "': a gang needs at least one slot (workers " +
                           std::to_string(request.workers) + ", servers " + std::to_string(request.servers) + ")");
  }
  if (Status st = ValidateWeights(options.weights); !st.ok()) return st;
  const int gang = request.workers + request.servers;

  std::map<std::string, ZoneFree> by_zone;
  std::vector<int> free(nodes.size());
  int total_free = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    free[i] = nodes[i].free();
    if (free[i] == 0) continue;
    ZoneFree& z = by_zone[nodes[i].zone];
    z.zone = nodes[i].zone;
    z.free += free[i];
    z.nodes.push_back(static_cast<int>(i));
    total_free += free[i];
  }
  if (total_free < gang) {
    return Unavailable("job '" + request.job + "' needs " + std::to_string(gang) + " slots; the cluster has " +
                       std::to_string(total_free) + " free");
  }
  std::vector<ZoneFree> zones;
  for (auto& [name, z] : by_zone) zones.push_back(std::move(z));
  std::stable_sort(zones.begin(), zones.end(), [](const ZoneFree& a, const ZoneFree& b) { return a.free > b.free; });

  std::vector<std::vector<int>> sets;
  for (size_t i = 0; i < zones.size(); ++i) {
    if (zones[i].free >= gang) sets.push_back({static_cast<int>(i)});
  }
  if (sets.empty()) {
    if (request.zone == ZoneConstraint::kHard) {
      return Unavailable("job '" + request.job + "' (zone = hard) needs " + std::to_string(gang) +
                         " slots in one zone; the largest, '" + zones.front().zone + "', has " +
                         std::to_string(zones.front().free) + " free: the job waits");
    }
    int running = 0;
    size_t k = 0;
    while (running < gang) running += zones[k++].free;
    std::vector<int> current;
    ZoneSets(zones, k, gang, 0, current, 0, sets);
  }

  const std::vector<int> storage = StorageIndices(nodes, request);
  struct Option {
    Placement placement;
    int affinity = 0;
    std::string key;
  };
  std::optional<Option> best;
  for (const std::vector<int>& set : sets) {
    std::vector<int> allowed;
    std::set<std::string> set_zones;
    std::string key;
    for (int z : set) {
      allowed.insert(allowed.end(), zones[z].nodes.begin(), zones[z].nodes.end());
      set_zones.insert(zones[z].zone);
    }
    for (const std::string& z : set_zones) key += z + "\n";
    int affinity = 0;
    for (int s : storage) affinity += set_zones.count(nodes[s].zone) ? 1 : 0;
    std::vector<int> free_copy = free;
    Result<std::vector<int>> picked = Fill(nodes, links, allowed, free_copy, gang, storage, options);
    if (!picked.ok()) continue;
    Option o{Assemble(nodes, links, request, picked.value(), options), affinity, key};
    const bool better =
        !best || o.affinity > best->affinity ||
        (o.affinity == best->affinity &&
         (o.placement.allreduce_seconds < best->placement.allreduce_seconds - 1e-12 ||
          (std::fabs(o.placement.allreduce_seconds - best->placement.allreduce_seconds) <= 1e-12 &&
           o.key < best->key)));
    if (better) best = std::move(o);
  }
  if (!best) return Unavailable("job '" + request.job + "': no zone set could hold the gang");
  return std::move(best->placement);
}

Result<Placement> Replace(const std::vector<NodeState>& nodes, const LinkView& links, const GangRequest& request,
                          const Placement& placement, const std::vector<int>& move, const PlacerOptions& options) {
  if (Status st = ValidateWeights(options.weights); !st.ok()) return st;
  std::set<int> moving;
  for (int m : move) {
    if (m < 0 || m >= static_cast<int>(placement.slots.size())) {
      return InvalidArgument("job '" + request.job + "': slot " + std::to_string(m) + " is not in the placement (" +
                             std::to_string(placement.slots.size()) + " slots)");
    }
    moving.insert(m);
  }
  std::vector<int> peers;
  std::set<std::string> zones;
  for (size_t i = 0; i < placement.slots.size(); ++i) {
    if (moving.count(static_cast<int>(i))) continue;
    peers.push_back(placement.slots[i].node);
    zones.insert(nodes[placement.slots[i].node].zone);
  }
  if (zones.empty()) zones.insert(placement.zones.begin(), placement.zones.end());

  std::vector<int> free(nodes.size());
  std::vector<int> in_zones, everywhere;
  int free_in_zones = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    free[i] = nodes[i].free();
    if (free[i] == 0) continue;
    everywhere.push_back(static_cast<int>(i));
    if (zones.count(nodes[i].zone)) {
      in_zones.push_back(static_cast<int>(i));
      free_in_zones += free[i];
    }
  }
  const int need = static_cast<int>(moving.size());
  std::vector<int> allowed = in_zones;
  if (free_in_zones < need) {
    if (request.zone == ZoneConstraint::kHard) {
      return Unavailable("job '" + request.job + "' (zone = hard) needs " + std::to_string(need) +
                         " slots to replace in its zone; it has " + std::to_string(free_in_zones) + " free");
    }
    allowed = everywhere;
  }
  Result<std::vector<int>> picked = Fill(nodes, links, allowed, free, need, peers, options);
  if (!picked.ok()) {
    return Unavailable("job '" + request.job + "' needs " + std::to_string(need) + " slots to replace: " +
                       picked.status().message());
  }
  std::vector<int> slot_nodes;
  size_t next = 0;
  for (size_t i = 0; i < placement.slots.size(); ++i) {
    slot_nodes.push_back(moving.count(static_cast<int>(i)) ? picked.value()[next++] : placement.slots[i].node);
  }
  return Assemble(nodes, links, request, slot_nodes, options);
}

std::vector<int> DegradedSlots(const std::vector<NodeState>& nodes, const LinkView& links,
                               const Placement& placement, const DegradationThresholds& t,
                               const UnmeasuredLinks& unmeasured) {
  std::vector<int> worker_nodes;
  std::map<int, int> highest_rank;  // node -> highest worker rank on it
  for (const SlotAssignment& s : placement.slots) {
    if (s.role != "worker") continue;
    worker_nodes.push_back(s.node);
    highest_rank[s.node] = std::max(highest_rank[s.node], s.index);
  }
  std::sort(worker_nodes.begin(), worker_nodes.end());
  worker_nodes.erase(std::unique(worker_nodes.begin(), worker_nodes.end()), worker_nodes.end());
  auto bad = [&](const LinkMetrics& l) {
    return !l.reachable || l.loss > t.max_loss || l.rtt_ms > t.max_rtt_ms || l.throughput_gbps < t.min_throughput_gbps;
  };
  std::map<int, int> bad_count;
  std::vector<std::pair<int, int>> bad_pairs;
  for (size_t i = 0; i < worker_nodes.size(); ++i) {
    for (size_t j = i + 1; j < worker_nodes.size(); ++j) {
      if (bad(EffectiveLink(nodes[worker_nodes[i]], nodes[worker_nodes[j]], links, unmeasured))) {
        bad_pairs.emplace_back(worker_nodes[i], worker_nodes[j]);
        ++bad_count[worker_nodes[i]];
        ++bad_count[worker_nodes[j]];
      }
    }
  }
  // A tie among the job's own links: the node with more bad links to the
  // rest of the cluster (a bad NIC shows on every link) is the one to move.
  std::map<int, int> cluster_bad;
  auto bad_in_cluster = [&](int n) {
    auto it = cluster_bad.find(n);
    if (it != cluster_bad.end()) return it->second;
    int count = 0;
    for (size_t o = 0; o < nodes.size(); ++o) {
      if (static_cast<int>(o) != n && bad(EffectiveLink(nodes[n], nodes[o], links, unmeasured))) ++count;
    }
    return cluster_bad[n] = count;
  };
  std::set<int> blamed;
  for (auto [a, b] : bad_pairs) {
    if (blamed.count(a) || blamed.count(b)) continue;  // already moving one end
    bool blame_a = bad_count[a] > bad_count[b];
    if (bad_count[a] == bad_count[b]) {
      const int ca = bad_in_cluster(a), cb = bad_in_cluster(b);
      blame_a = ca > cb || (ca == cb && highest_rank[a] > highest_rank[b]);
    }
    blamed.insert(blame_a ? a : b);
  }
  std::vector<int> out;
  for (size_t i = 0; i < placement.slots.size(); ++i) {
    if (placement.slots[i].role == "worker" && blamed.count(placement.slots[i].node)) out.push_back(static_cast<int>(i));
  }
  return out;
}

}  // namespace tenax::sched

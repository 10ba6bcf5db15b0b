#include "tenax/sched/place/placer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
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

// How FillSlots picks the next node.
enum class FillOrder {
  // The best-scored node against the slots already placed (ties: more free
  // slots, then name): the best links first.
  kLinks,
  // The node that takes the most of the remaining slots, then the one it
  // fills most tightly (fewest free slots left over, so whole hosts stay
  // free for larger gangs), then the best-scored: the fewest hosts first. A
  // gang on one host has no network link at all.
  kHosts,
};

// Whether `a` is a better next pick than `b` under `order` (`slots` still
// to place).
bool BetterPick(const std::vector<NodeState>& nodes, const std::vector<int>& free, int slots, FillOrder order,
                const ScoredNode& a, const ScoredNode& b) {
  if (order == FillOrder::kHosts) {
    const int take_a = std::min(free[a.index], slots), take_b = std::min(free[b.index], slots);
    if (take_a != take_b) return take_a > take_b;
    const int left_a = free[a.index] - take_a, left_b = free[b.index] - take_b;
    if (left_a != left_b) return left_a < left_b;
  }
  if (std::fabs(a.score - b.score) > 1e-9) return a.score > b.score;
  if (free[a.index] != free[b.index]) return free[a.index] > free[b.index];
  return nodes[a.index].name < nodes[b.index].name;
}

// Greedy fill of `slots` slots on `allowed` (indices into nodes, free > 0
// in `free`), scored against `peers` (updated with every pick).
// `centre`: the first pick's scores when `peers` is empty (ScoreCentrality
// over the same candidates), computed once per zone set by the caller.
Result<std::vector<int>> FillSlots(const std::vector<NodeState>& nodes, const LinkView& links, std::vector<int> allowed,
                                   std::vector<int>& free, int slots, std::vector<int> peers, FillOrder order,
                                   const std::vector<ScoredNode>& centre, const PlacerOptions& options) {
  std::vector<int> picked;
  picked.reserve(slots);
  while (slots > 0) {
    std::vector<int> candidates;
    for (int n : allowed) {
      if (free[n] > 0) candidates.push_back(n);
    }
    if (candidates.empty()) return Unavailable("not enough free slots in the chosen zones");
    // Before the first slot of a fill without peers: centrality (the mean
    // link to the other candidates, so a bad NIC is not chosen by a tie).
    std::vector<ScoredNode> scored =
        !peers.empty() ? ScoreNodes(nodes, candidates, peers, links, options.weights, options.unmeasured)
        : centre.size() == candidates.size()
            ? centre
            : ScoreCentrality(nodes, candidates, CentralityPeers(candidates), links, options.weights,
                              options.unmeasured);
    const ScoredNode* best = nullptr;
    for (const ScoredNode& s : scored) {
      if (best == nullptr || BetterPick(nodes, free, slots, order, s, *best)) best = &s;
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
                   const std::vector<int>& slot_nodes, const std::vector<int>& storage, const PlacerOptions& options) {
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
  const StepEstimate e = EstimateStep(nodes, links, request, slot_nodes, storage, options.unmeasured);
  p.exchange_seconds = e.exchange_seconds;
  p.input_seconds = e.input_seconds;
  p.step_seconds = e.step_seconds;
  return p;
}

// The worst link between any node of `a` and any of `b` (a pair on one
// host is perfect).
LinkMetrics WorstLinkBetween(const std::vector<NodeState>& nodes, const std::vector<int>& a, const std::vector<int>& b,
                             const LinkView& links, const UnmeasuredLinks& unmeasured) {
  LinkMetrics worst{0.0, 0.0, std::numeric_limits<double>::infinity(), true};
  for (int x : a) {
    for (int y : b) {
      const LinkMetrics l = EffectiveLink(nodes[x], nodes[y], links, unmeasured);
      worst.throughput_gbps = std::min(worst.throughput_gbps, l.throughput_gbps);
      worst.rtt_ms = std::max(worst.rtt_ms, l.rtt_ms);
      worst.loss = std::max(worst.loss, l.loss);
      worst.reachable = worst.reachable && l.reachable;
    }
  }
  return worst;
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

// One candidate placement of PlaceGang's zone choice.
struct Option {
  Placement placement;
  int affinity = 0;  // storage nodes inside the option's zones
  int slack = 0;     // free slots left on the hosts it uses
  std::string key;   // its zones, for a deterministic last tie-break
};

// The zone choice's order: the lower estimated step; on an exact tie (e.g.
// gangs that fit one host each), more storage nodes inside the zones, then
// the tighter fit (fewer free slots left on the hosts used, so whole hosts
// stay free for larger gangs), then the zones' names. Storage affinity is
// priced inside the estimate (the input read); here it only settles a tie,
// e.g. when the job's input bytes are unknown.
bool Cheaper(const Option& a, const Option& b) {
  const double x = a.placement.step_seconds, y = b.placement.step_seconds;
  if (x != y && !(std::fabs(x - y) <= 1e-12 * std::max(1.0, std::min(x, y)))) return x < y;
  if (a.affinity != b.affinity) return a.affinity > b.affinity;
  if (a.slack != b.slack) return a.slack < b.slack;
  return a.key < b.key;
}

// The greedy fills PlaceGang tries in each zone set: by links and by fewest
// hosts, each from the storage nodes (the first slots beside the data) and,
// for a job with data, also by centrality (as a job without data starts),
// so a storage node behind a bad NIC does not pull the gang onto itself.
struct Fill {
  std::vector<int> peers;
  FillOrder order;
};
std::vector<Fill> Fills(const std::vector<int>& storage) {
  std::vector<Fill> out;
  for (FillOrder order : {FillOrder::kLinks, FillOrder::kHosts}) {
    out.push_back(Fill{storage, order});
    if (!storage.empty()) out.push_back(Fill{{}, order});
  }
  return out;
}

// Free slots left on the distinct hosts of `picked` after the fill.
int Slack(std::vector<int> picked, const std::vector<int>& free_after) {
  std::sort(picked.begin(), picked.end());
  picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
  int slack = 0;
  for (int n : picked) slack += free_after[n];
  return slack;
}

// Answers nothing: every pair is unmeasured, so EstimateStep prices it with
// the nominal (healthy) figures of UnmeasuredLinks.
class NominalLinks final : public LinkView {
 public:
  std::optional<LinkMetrics> Link(const NodeState&, const NodeState&) const override { return std::nullopt; }
};

// PlacerOptions::max_slowdown: Unavailable when `p`'s estimated step is
// more than max_slowdown times its step on nominal links and other jobs
// hold slots (waiting can only help while slots will be freed).
Status CheckSlowdown(const std::vector<NodeState>& nodes, const GangRequest& request, const Placement& p,
                     const std::vector<int>& storage, const PlacerOptions& options) {
  if (!(options.max_slowdown > 0)) return Status::Ok();
  const bool others_hold_slots =
      std::any_of(nodes.begin(), nodes.end(), [](const NodeState& n) { return n.used > 0; });
  if (!others_hold_slots) return Status::Ok();
  std::vector<int> slot_nodes;
  for (const SlotAssignment& s : p.slots) slot_nodes.push_back(s.node);
  const double nominal =
      EstimateStep(nodes, NominalLinks{}, request, slot_nodes, storage, options.unmeasured).step_seconds;
  if (!(p.step_seconds > options.max_slowdown * nominal)) return Status::Ok();
  char text[160];
  std::snprintf(text, sizeof text, "an estimated step of %.3g s is over %.3g x its %.3g s on healthy links: the job waits",
                p.step_seconds, options.max_slowdown, nominal);
  return Unavailable("job '" + request.job + "': the best placement's " + text);
}

}  // namespace

Result<ZoneConstraint> ParseZoneConstraint(const std::string& text) {
  if (text == "hard") return ZoneConstraint::kHard;
  if (text == "soft") return ZoneConstraint::kSoft;
  return InvalidArgument("zone constraint '" + text +
                         "' is unknown: use \"hard\" (all in one zone, or wait) or \"soft\" (fewest zones)");
}

const char* ZoneConstraintName(ZoneConstraint c) { return c == ZoneConstraint::kHard ? "hard" : "soft"; }

StepEstimate EstimateStep(const std::vector<NodeState>& nodes, const LinkView& links, const GangRequest& request,
                          const std::vector<int>& slot_nodes, const std::vector<int>& storage,
                          const UnmeasuredLinks& unmeasured) {
  const size_t split = std::min(slot_nodes.size(), static_cast<size_t>(std::max(request.workers, 0)));
  const std::vector<int> workers(slot_nodes.begin(), slot_nodes.begin() + static_cast<std::ptrdiff_t>(split));
  const std::vector<int> servers(slot_nodes.begin() + static_cast<std::ptrdiff_t>(split), slot_nodes.end());
  StepEstimate e;
  if (servers.empty()) {
    e.exchange_seconds = RingAllreduceSeconds(static_cast<int>(workers.size()), request.gradient_bytes,
                                              WorstLinkAmong(nodes, workers, links, unmeasured));
  } else if (!workers.empty()) {
    // Parameter servers talk to every worker, never workers to each other.
    const double bytes = 2.0 * static_cast<double>(workers.size()) * request.gradient_bytes /
                         static_cast<double>(servers.size());
    e.exchange_seconds = RingAllreduceSeconds(2, bytes, WorstLinkBetween(nodes, workers, servers, links, unmeasured));
  }
  if (!storage.empty() && request.input_bytes > 0) {
    // Each worker reads from its nearest storage node; the step waits for
    // the slowest worker.
    for (int w : workers) {
      double best = std::numeric_limits<double>::infinity();
      for (int s : storage) {
        best = std::min(best, RingAllreduceSeconds(2, request.input_bytes,
                                                   EffectiveLink(nodes[w], nodes[s], links, unmeasured)));
      }
      e.input_seconds = std::max(e.input_seconds, best);
    }
  }
  e.step_seconds = std::max(request.compute_seconds, e.input_seconds) + e.exchange_seconds;
  return e;
}

Result<Placement> PlaceGang(const std::vector<NodeState>& nodes, const LinkView& links, const GangRequest& request,
                            const PlacerOptions& options) {
  if (request.workers < 0 || request.servers < 0 || request.workers + request.servers <= 0) {
    return InvalidArgument("job '" + request.job + "': a gang needs at least one slot (workers " +
                           std::to_string(request.workers) + ", servers " + std::to_string(request.servers) + ")");
  }
  if (Status st = ValidateWeights(options.weights); !st.ok()) return st;
  if (!(options.max_slowdown >= 0) || std::isinf(options.max_slowdown)) {
    return InvalidArgument("max_slowdown must be finite and >= 0 (0: never wait while the gang fits)");
  }
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
    // The centre is the same for every fill that starts there: score it once.
    const std::vector<ScoredNode> centre =
        ScoreCentrality(nodes, allowed, CentralityPeers(allowed), links, options.weights, options.unmeasured);
    for (const Fill& f : Fills(storage)) {
      std::vector<int> free_copy = free;
      Result<std::vector<int>> picked =
          FillSlots(nodes, links, allowed, free_copy, gang, f.peers, f.order, centre, options);
      if (!picked.ok()) continue;
      Option o{Assemble(nodes, links, request, picked.value(), storage, options), affinity, Slack(picked.value(), free_copy),
               key};
      if (!best || Cheaper(o, *best)) best = std::move(o);
    }
  }
  if (!best) return Unavailable("job '" + request.job + "': no zone set could hold the gang");
  if (Status st = CheckSlowdown(nodes, request, best->placement, storage, options); !st.ok()) return st;
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
  // Both orders from the slots that stay; the lower estimated step wins
  // (on a tie, the best links: the first).
  const std::vector<int> storage = StorageIndices(nodes, request);
  std::optional<Placement> best;
  Status last = Status::Ok();
  for (FillOrder order : {FillOrder::kLinks, FillOrder::kHosts}) {
    std::vector<int> free_copy = free;
    Result<std::vector<int>> picked = FillSlots(nodes, links, allowed, free_copy, need, peers, order, {}, options);
    if (!picked.ok()) {
      last = picked.status();
      continue;
    }
    std::vector<int> slot_nodes;
    size_t next = 0;
    for (size_t i = 0; i < placement.slots.size(); ++i) {
      slot_nodes.push_back(moving.count(static_cast<int>(i)) ? picked.value()[next++] : placement.slots[i].node);
    }
    Placement p = Assemble(nodes, links, request, slot_nodes, storage, options);
    if (!best || p.step_seconds < best->step_seconds) best = std::move(p);
  }
  if (!best) {
    return Unavailable("job '" + request.job + "' needs " + std::to_string(need) + " slots to replace: " +
                       last.message());
  }
  return std::move(*best);
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
  auto bad = [&](const LinkMetrics& l) { return BreaksThresholds(l, t); };
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

bool BreaksThresholds(const LinkMetrics& l, const DegradationThresholds& t) {
  return !l.reachable || l.loss > t.max_loss || l.rtt_ms > t.max_rtt_ms ||
         (t.min_throughput_gbps > 0 && l.throughput_gbps < t.min_throughput_gbps);
}

std::string ThresholdsBroken(const LinkMetrics& l, const DegradationThresholds& t) {
  if (!l.reachable) return "unreachable";
  std::string out;
  char part[96];
  auto add = [&out, &part] { out += (out.empty() ? "" : ", ") + std::string(part); };
  if (l.rtt_ms > t.max_rtt_ms) {
    std::snprintf(part, sizeof part, "rtt %.1f ms > %g ms", l.rtt_ms, t.max_rtt_ms);
    add();
  }
  if (t.min_throughput_gbps > 0 && l.throughput_gbps < t.min_throughput_gbps) {
    std::snprintf(part, sizeof part, "%.2f Gbit/s < %g Gbit/s", l.throughput_gbps, t.min_throughput_gbps);
    add();
  }
  if (l.loss > t.max_loss) {
    std::snprintf(part, sizeof part, "loss %.3f > %g", l.loss, t.max_loss);
    add();
  }
  return out;
}

std::optional<MigrationPlan> PlanMigration(const std::vector<NodeState>& nodes, const LinkView& links,
                                           const std::vector<int>& member_nodes, const DegradationThresholds& t,
                                           const ScoreWeights& weights, double gradient_bytes,
                                           const UnmeasuredLinks& unmeasured) {
  Placement placement;
  for (size_t i = 0; i < member_nodes.size(); ++i) {
    placement.slots.push_back({"worker", static_cast<int>(i), member_nodes[i]});
  }
  const std::vector<int> degraded = DegradedSlots(nodes, links, placement, t, unmeasured);
  if (degraded.empty()) return std::nullopt;
  MigrationPlan plan;
  plan.member = degraded.front();
  plan.from = member_nodes[static_cast<size_t>(plan.member)];
  // The others: every other member's node (once), the moving one's excluded.
  std::vector<int> others;
  for (size_t i = 0; i < member_nodes.size(); ++i) {
    if (static_cast<int>(i) != plan.member) others.push_back(member_nodes[i]);
  }
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  bool first = true;
  for (int o : others) {
    if (o == plan.from) continue;
    const LinkMetrics l = EffectiveLink(nodes[static_cast<size_t>(plan.from)], nodes[static_cast<size_t>(o)], links, unmeasured);
    const bool worse = (!l.reachable && plan.worst.reachable) ||
                       (l.reachable == plan.worst.reachable && l.rtt_ms > plan.worst.rtt_ms);
    if (first || worse) {
      plan.worst = l;
      plan.why = nodes[static_cast<size_t>(plan.from)].name + "-" + nodes[static_cast<size_t>(o)].name + ": " +
                 ThresholdsBroken(l, t);
      first = false;
    }
  }
  std::vector<int> candidates;
  int with_free_slot = 0;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int node = static_cast<int>(n);
    if (node == plan.from || nodes[n].free() <= 0) continue;
    ++with_free_slot;
    const bool good = std::all_of(others.begin(), others.end(), [&](int o) {
      return o == node || o == plan.from || !BreaksThresholds(EffectiveLink(nodes[n], nodes[static_cast<size_t>(o)], links, unmeasured), t);
    });
    if (good) candidates.push_back(node);
  }
  if (candidates.empty()) {
    plan.why_not = with_free_slot == 0
                       ? "no other host has a free slot"
                       : "none of the " + std::to_string(with_free_slot) +
                             " other hosts with a free slot has links to the other members within the thresholds";
    return plan;
  }
  // A move must pay: the allreduce estimated over the members' worst link
  // (RingAllreduceSeconds, whose loss term is the TCP bound) at most
  // kMigrationGain of today's with the member moved. A host across a slow
  // zone link meets the thresholds and may still be worse than a link that
  // only just breaks one (a loss of 0.21 against 0.2 Gbit/s across zones).
  constexpr double kMigrationGain = 0.8;
  const int n = static_cast<int>(member_nodes.size());
  // Loss not judged (max_loss >= 1): not priced either (the probes' loss
  // counts late answers, which a loaded machine makes).
  const bool price_loss = t.max_loss < 1;
  auto step_cost = [&](const std::vector<int>& at) {
    LinkMetrics worst = WorstLinkAmong(nodes, at, links, unmeasured);
    if (!price_loss) worst.loss = 0;
    return RingAllreduceSeconds(n, gradient_bytes, worst);
  };
  const double cost_now = step_cost(member_nodes);
  std::vector<int> paying;
  double best_cost = std::numeric_limits<double>::infinity();
  int best_node = -1;
  for (int c : candidates) {
    std::vector<int> after = member_nodes;
    after[static_cast<size_t>(plan.member)] = c;
    const double cost = step_cost(after);
    if (cost < best_cost) {
      best_cost = cost;
      best_node = c;
    }
    if (cost <= kMigrationGain * cost_now) paying.push_back(c);
  }
  plan.estimated_seconds_now = cost_now;
  if (paying.empty()) {
    char text[200];
    std::snprintf(text, sizeof text,
                  "no host would make the exchange faster: the best, %s, is estimated at %.1f ms a step against "
                  "%.1f ms now",
                  nodes[static_cast<size_t>(best_node)].name.c_str(), best_cost * 1e3, cost_now * 1e3);
    plan.why_not = text;
    return plan;
  }
  std::vector<int> peers = others;
  std::erase(peers, plan.from);
  const std::vector<ScoredNode> scored = ScoreNodes(nodes, paying, peers, links, weights, unmeasured);
  // The best score; ties go to the first candidate (the nodes' order).
  size_t best = 0;
  for (size_t i = 1; i < scored.size(); ++i) {
    if (scored[i].score > scored[best].score) best = i;
  }
  plan.to = scored[best].index;  // a node index (ScoreNodes returns the candidates' own)
  std::vector<int> after = member_nodes;
  after[static_cast<size_t>(plan.member)] = plan.to;
  plan.estimated_seconds_after = step_cost(after);
  return plan;
}

}  // namespace tenax::sched

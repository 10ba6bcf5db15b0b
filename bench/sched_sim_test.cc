// The pieces of `tenax bench sched` whose numbers can be checked exactly:
// the peers' per-pod scores as their Go sources compute them, the gangs they
// place, the step-time model and the simulator's determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "sched_peers.h"
#include "sched_sim.h"

namespace tenax::bench::schedsim {
namespace {

// Zones "a", "b", ... of `per_zone` nodes "a-0", ...
std::vector<sched::NodeState> Nodes(int zones, int per_zone, int capacity) {
  std::vector<sched::NodeState> nodes;
  for (int z = 0; z < zones; ++z) {
    for (int i = 0; i < per_zone; ++i) {
      sched::NodeState n;
      n.zone = std::string(1, static_cast<char>('a' + z));
      n.name = n.zone + "-" + std::to_string(i);
      n.capacity = capacity;
      n.id = static_cast<int>(nodes.size());
      nodes.push_back(n);
    }
  }
  return nodes;
}

TEST(SchedPeersTest, NetworkOverheadScoresFollowThePlugin) {
  const auto nodes = Nodes(3, 2, 4);  // a-0 a-1 b-0 b-1 c-0 c-1
  ZoneCosts costs;
  costs.Set("a", "b", 3);  // a-c and b-c missing: MaxCost 100
  const std::vector<int> all = {0, 1, 2, 3, 4, 5};

  // First pod: scoreEqually, every node MinNodeScore.
  EXPECT_EQ(NetworkOverheadScores(nodes, all, {}, costs), (std::vector<int64_t>{0, 0, 0, 0, 0, 0}));

  // One peer on a-0: costs 0, 1, 3, 3, 100, 100 ->
  // 100 - int(100 * (cost - 0) / 100): 100, 99, 97, 97, 0, 0.
  EXPECT_EQ(NetworkOverheadCost(nodes, 4, {0}, costs), 100);
  EXPECT_EQ(NetworkOverheadScores(nodes, all, {0}, costs), (std::vector<int64_t>{100, 99, 97, 97, 0, 0}));
  // Without zone c: costs 0, 1, 3, 3 -> 100, 100 - int(33.3) = 67, 0, 0.
  EXPECT_EQ(NetworkOverheadScores(nodes, {0, 1, 2, 3}, {0}, costs), (std::vector<int64_t>{100, 67, 0, 0}));

  // Peers on a-0 and b-0, accumulated: a-0 3, a-1 4, b-0 3, b-1 4.
  EXPECT_EQ(NetworkOverheadScores(nodes, {0, 1, 2, 3}, {0, 2}, costs), (std::vector<int64_t>{100, 0, 100, 0}));
  // All candidates at the same non-zero cost: 100 - (cost - min) = 100.
  EXPECT_EQ(NetworkOverheadScores(nodes, {1}, {0}, costs), (std::vector<int64_t>{100}));
  // All at cost 0 (the peer's own host only): left at 0.
  EXPECT_EQ(NetworkOverheadScores(nodes, {0}, {0, 0}, costs), (std::vector<int64_t>{0}));
}

TEST(SchedPeersTest, StaticZoneCostsAreTenthsOfAMillisecondAtLeastTwo) {
  const auto nodes = Nodes(3, 2, 4);
  DenseLinks links(6);
  for (int i = 0; i < 6; ++i) {
    for (int j = i + 1; j < 6; ++j) links.Set(i, j, sched::LinkMetrics{0.2, 0, 10, true});
  }
  // a-b: 1.2, 1.2, 1.3, 1.22 -> mean 1.23 ms -> 12.
  links.Set(0, 2, {1.2, 0, 5, true});
  links.Set(0, 3, {1.2, 0, 5, true});
  links.Set(1, 2, {1.3, 0, 5, true});
  links.Set(1, 3, {1.22, 0, 5, true});
  // a-c stays at 0.2 ms -> 2 would be 2; b-c at 0.05 ms -> 1 -> raised to 2.
  for (int b : {2, 3}) {
    for (int c : {4, 5}) links.Set(b, c, {0.05, 0, 5, true});
  }
  const ZoneCosts costs = StaticZoneCosts(nodes, links);
  EXPECT_EQ(costs.Cost("a", "b"), 12);
  EXPECT_EQ(costs.Cost("b", "a"), 12);
  EXPECT_EQ(costs.Cost("a", "c"), 2);
  EXPECT_EQ(costs.Cost("b", "c"), 2);
  EXPECT_EQ(costs.Cost("a", "z"), 100);
}

TEST(SchedPeersTest, LeastAllocatedCountsThePod) {
  auto nodes = Nodes(1, 4, 4);
  nodes[1].used = 1;
  nodes[2].used = 3;
  nodes[3].capacity = 3;
  EXPECT_EQ(LeastAllocatedScores(nodes, {0, 1, 2, 3}), (std::vector<int64_t>{75, 50, 0, 66}));
}

TEST(SchedPeersTest, TopologySpreadMatchesKubeSchedulersArithmetic) {
  const auto nodes = Nodes(2, 2, 4);  // a-0 a-1 b-0 b-1
  // No pod of the job yet: every node round(2 + 4) = 6 -> 100.
  EXPECT_EQ(TopologySpreadScores(nodes, {0, 1, 2, 3}, {}), (std::vector<int64_t>{100, 100, 100, 100}));
  // One pod on a-0. Weights log(4 + 2) (4 hosts) and log(2 + 2) (2 zones):
  // a-0 round(1.79 + 2 + 1.39 + 4) = 9, a-1 round(2 + 1.39 + 4) = 7, b-* 6;
  // normalised 100 * (9 + 6 - s) / 9: 66, 88, 100, 100.
  EXPECT_EQ(TopologySpreadScores(nodes, {0, 1, 2, 3}, {0}), (std::vector<int64_t>{66, 88, 100, 100}));
}

TEST(SchedPeersTest, DefaultSpreadsAJobAcrossZones) {
  const auto nodes = Nodes(2, 2, 4);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed, "test");
    auto placed = PlacePodByPod(PeerRule::kDefault, nodes, PodGang{2, false}, ZoneCosts{}, rng);
    ASSERT_TRUE(placed.has_value());
    ASSERT_EQ(placed->size(), 2u);
    // Second pod: its first pod's node 50 + 2 x 66, that zone's other node
    // 75 + 2 x 88, the other zone's nodes 75 + 2 x 100: the other zone.
    EXPECT_NE(nodes[static_cast<size_t>((*placed)[0])].zone, nodes[static_cast<size_t>((*placed)[1])].zone);
  }
}

TEST(SchedPeersTest, NetworkOverheadPacksOntoOneHostThenOneZone) {
  ZoneCosts costs;
  costs.Set("a", "b", 8);
  const auto nodes = Nodes(2, 3, 4);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed, "test");
    auto placed = PlacePodByPod(PeerRule::kNetworkOverhead, nodes, PodGang{6, false}, costs, rng);
    ASSERT_TRUE(placed.has_value());
    std::map<int, int> per_node;
    std::set<std::string> zones;
    for (int n : *placed) {
      ++per_node[n];
      zones.insert(nodes[static_cast<size_t>(n)].zone);
    }
    EXPECT_EQ(zones.size(), 1u);
    ASSERT_EQ(per_node.size(), 2u);
    std::multiset<int> counts;
    for (const auto& [node, count] : per_node) counts.insert(count);
    EXPECT_EQ(counts, (std::multiset<int>{2, 4}));
  }
}

TEST(SchedPeersTest, HardGangsGetOneZoneWithRoomOrWait) {
  auto nodes = Nodes(2, 2, 4);
  nodes[0].used = 4;
  nodes[1].used = 1;  // zone a: 3 free; zone b: 8 free
  for (PeerRule rule :
       {PeerRule::kNetworkOverhead, PeerRule::kDefault, PeerRule::kDefaultLeastAllocated, PeerRule::kRandom}) {
    Rng rng(7, PeerRuleName(rule));
    auto placed = PlacePodByPod(rule, nodes, PodGang{5, true}, ZoneCosts{}, rng);
    ASSERT_TRUE(placed.has_value()) << PeerRuleName(rule);
    for (int n : *placed) EXPECT_EQ(nodes[static_cast<size_t>(n)].zone, "b") << PeerRuleName(rule);
    EXPECT_FALSE(PlacePodByPod(rule, nodes, PodGang{9, true}, ZoneCosts{}, rng).has_value()) << PeerRuleName(rule);
    // Soft: 11 free in all, so 9 fit across zones and 12 do not; the full
    // node never gets a pod.
    auto soft = PlacePodByPod(rule, nodes, PodGang{9, false}, ZoneCosts{}, rng);
    ASSERT_TRUE(soft.has_value()) << PeerRuleName(rule);
    for (int n : *soft) EXPECT_NE(n, 0) << PeerRuleName(rule);
    EXPECT_FALSE(PlacePodByPod(rule, nodes, PodGang{12, false}, ZoneCosts{}, rng).has_value()) << PeerRuleName(rule);
  }
}

TEST(SchedSimTest, StepTimeIsComputePlusTheAllreduceOverTheWorstWorkerLink) {
  const auto nodes = Nodes(2, 2, 4);
  DenseLinks links(4);
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) links.Set(i, j, sched::LinkMetrics{0.2, 0, 10, true});
  }
  const sched::LinkMetrics cross{1.0, 1e-5, 4.0, true};
  links.Set(0, 2, cross);
  Job job;
  job.workers = 3;
  job.compute_seconds = 0.25;
  job.gradient_bytes = 4.0 * 25557032;
  // Workers on a-0, a-0, b-0: the worst link is a-0 <-> b-0.
  EXPECT_DOUBLE_EQ(StepSeconds(job, {0, 0, 2}, nodes, links),
                   0.25 + sched::RingAllreduceSeconds(3, job.gradient_bytes, cross));
  // All on one host: only the allreduce's minimum round trips are left.
  EXPECT_NEAR(StepSeconds(job, {1, 1, 1}, nodes, links), 0.25, 1e-4);
  // Two servers: 2 x 3 x bytes / 2 through the worst link among all pods.
  Job ps = job;
  ps.servers = 2;
  EXPECT_DOUBLE_EQ(StepSeconds(ps, {1, 1, 1, 1, 3}, nodes, links),
                   0.25 + sched::RingAllreduceSeconds(2, 3.0 * job.gradient_bytes, sched::LinkMetrics{0.2, 0, 10, true}));
  // Input from a storage node slower than the compute decides the step.
  Job reader = job;
  reader.workers = 1;
  reader.storage_node = 2;
  reader.input_bytes = 500e6;
  EXPECT_DOUBLE_EQ(StepSeconds(reader, {0}, nodes, links), sched::RingAllreduceSeconds(2, 500e6, cross));
}

TEST(SchedSimTest, ArrivalRateOffersTheLoad) {
  Scenario s;
  s.zones = 1;
  s.nodes_per_zone = 5;
  s.slots_per_node = 4;  // 20 slots
  s.load = 0.5;
  s.mix.models = {ModelClass{"m", 1000, 1.0, 1.0, 1.0, 100, 100, 0}};
  s.mix.workers = {{2, 1.0}};
  s.mix.server_share = 0;
  // 2 slots x 100 s per job; 0.5 x 20 slots / 200 slot-seconds.
  EXPECT_DOUBLE_EQ(ArrivalRate(s), 0.05);
}

TEST(SchedSimTest, RunsAreDeterministicAndFinishEveryJob) {
  Scenario s;
  s.jobs = 25;
  s.seed = 3;
  for (Policy p : AllPolicies()) {
    auto a = Simulate(s, p);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto b = Simulate(s, p);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    const Summary sa = Summarize(a.value()), sb = Summarize(b.value());
    EXPECT_EQ(sa.jobs, 25) << PolicyName(p);
    EXPECT_DOUBLE_EQ(sa.mean_jct, sb.mean_jct) << PolicyName(p);
    EXPECT_DOUBLE_EQ(sa.p95_jct, sb.p95_jct) << PolicyName(p);
    for (const JobOutcome& o : a.value().jobs) {
      EXPECT_GE(o.start, o.arrival);
      // No job runs faster than its compute alone.
      EXPECT_GE(o.finish - o.start, o.compute_only_seconds * (1 - 1e-9)) << PolicyName(p) << " job " << o.id;
    }
  }
}

TEST(SchedSimTest, InvalidScenariosSayWhatIsWrong) {
  Scenario s;
  s.nodes_per_zone = 2;  // 8 slots per zone cannot hold 8 workers and 2 servers
  const Status st = ValidateScenario(s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("must fit one zone"), std::string::npos) << st.message();
  auto r = Simulate(s, Policy::kDefault);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace tenax::bench::schedsim

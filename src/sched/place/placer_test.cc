#include "tenax/sched/place/placer.h"

#include <gtest/gtest.h>

#include <set>

#include "sched_test_links.h"

namespace tenax::sched {
namespace {

using testing::TableLinks;
using testing::ZonedNodes;

std::multiset<std::string> NodesOf(const std::vector<NodeState>& nodes, const Placement& p) {
  std::multiset<std::string> out;
  for (const SlotAssignment& s : p.slots) out.insert(nodes[s.node].name);
  return out;
}

TEST(PlacerTest, AGangThatFitsOneZoneStaysInOneZone) {
  auto nodes = ZonedNodes({{"a", 3}, {"b", 3}, {"c", 3}}, 2);
  nodes[0].used = 2;  // zone a: 4 free
  nodes[3].used = 1;  // zone b: 5 free
  TableLinks links;
  GangRequest req;
  req.job = "j";
  req.workers = 5;
  auto p = PlaceGang(nodes, links, req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p.value().slots.size(), 5u);
  ASSERT_EQ(p.value().zones.size(), 1u);
  // b (5 free) and c (6 free) fit; c packs 5 slots on 3 hosts, b needs all 3
  // hosts too; equal cost, so the tie goes to the zone named first.
  EXPECT_EQ(p.value().zones[0], "b");
  for (const SlotAssignment& s : p.value().slots) EXPECT_EQ(nodes[s.node].zone, "b");
}

TEST(PlacerTest, StorageAffinityChoosesTheZoneThatHoldsTheData) {
  auto nodes = ZonedNodes({{"a", 3}, {"b", 3}}, 2);
  TableLinks links;
  GangRequest req;
  req.job = "j";
  req.workers = 4;
  req.storage_nodes = {"b-1"};
  auto p = PlaceGang(nodes, links, req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p.value().zones, std::vector<std::string>{"b"});
  // The first slots go on the storage node itself (a perfect link).
  EXPECT_EQ(nodes[p.value().slots[0].node].name, "b-1");
}

TEST(PlacerTest, HardWaitsAndSoftTakesTheFewestZones) {
  auto nodes = ZonedNodes({{"a", 2}, {"b", 2}, {"c", 1}}, 2);  // a 4, b 4, c 2 free
  TableLinks links;
  GangRequest req;
  req.job = "big";
  req.workers = 6;
  req.zone = ZoneConstraint::kHard;
  auto hard = PlaceGang(nodes, links, req);
  ASSERT_FALSE(hard.ok());
  EXPECT_EQ(hard.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(hard.status().message().find("has 4 free"), std::string::npos) << hard.status().message();

  req.zone = ZoneConstraint::kSoft;
  // a and b are well linked; c is far from both.
  links.Set("a-0", "b-0", {0.5, 0.0, 8.0, true});
  links.Set("a-1", "b-0", {0.5, 0.0, 8.0, true});
  links.Set("a-0", "b-1", {0.5, 0.0, 8.0, true});
  links.Set("a-1", "b-1", {0.5, 0.0, 8.0, true});
  for (const char* x : {"a-0", "a-1", "b-0", "b-1"}) links.Set(x, "c-0", {5.0, 0.0, 1.0, true});
  auto soft = PlaceGang(nodes, links, req);
  ASSERT_TRUE(soft.ok()) << soft.status().ToString();
  EXPECT_EQ(soft.value().zones, (std::vector<std::string>{"a", "b"}));
  EXPECT_DOUBLE_EQ(soft.value().worst_link.throughput_gbps, 8.0);

  GangRequest too_big = req;
  too_big.workers = 11;
  auto none = PlaceGang(nodes, links, too_big);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("10 free"), std::string::npos) << none.status().message();
}

TEST(PlacerTest, ADegradedNodeInsideTheZoneIsAvoided) {
  auto nodes = ZonedNodes({{"a", 4}}, 1);
  TableLinks links;
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) {
      const bool bad = i == 1 || j == 1;  // a-1's NIC is degraded
      links.Set("a-" + std::to_string(i), "a-" + std::to_string(j),
                bad ? LinkMetrics{0.3, 0.02, 0.5, true} : LinkMetrics{0.1, 0.0, 10.0, true});
    }
  }
  GangRequest req;
  req.job = "j";
  req.workers = 3;
  auto p = PlaceGang(nodes, links, req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(NodesOf(nodes, p.value()), (std::multiset<std::string>{"a-0", "a-2", "a-3"}));
  EXPECT_DOUBLE_EQ(p.value().worst_link.throughput_gbps, 10.0);
}

TEST(PlacerTest, ServersAreSlotsAfterTheWorkers) {
  auto nodes = ZonedNodes({{"a", 2}}, 2);
  TableLinks links;
  GangRequest req;
  req.job = "async";
  req.workers = 3;
  req.servers = 1;
  auto p = PlaceGang(nodes, links, req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p.value().slots.size(), 4u);
  EXPECT_EQ(p.value().slots[2].role, "worker");
  EXPECT_EQ(p.value().slots[2].index, 2);
  EXPECT_EQ(p.value().slots[3].role, "server");
  EXPECT_EQ(p.value().slots[3].index, 0);
}

TEST(PlacerTest, BadRequestsAreRefused) {
  auto nodes = ZonedNodes({{"a", 2}}, 2);
  TableLinks links;
  GangRequest req;
  req.workers = 0;
  EXPECT_EQ(PlaceGang(nodes, links, req).status().code(), StatusCode::kInvalidArgument);
  req.workers = 1;
  PlacerOptions o;
  o.weights = ScoreWeights{0, 0, 0};
  EXPECT_EQ(PlaceGang(nodes, links, req, o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseZoneConstraint("medium").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseZoneConstraint("hard").value(), ZoneConstraint::kHard);
}

TEST(PlacerTest, AfterANodeLossOnlyItsSlotsMoveAndStayInTheZone) {
  auto nodes = ZonedNodes({{"a", 4}, {"b", 4}}, 1);
  TableLinks links;
  GangRequest req;
  req.job = "j";
  req.workers = 3;
  req.zone = ZoneConstraint::kHard;
  auto p = PlaceGang(nodes, links, req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::string zone = p.value().zones[0];
  // Lose the node of worker 1.
  std::vector<NodeState> after = nodes;
  for (const SlotAssignment& s : p.value().slots) after[s.node].used = after[s.node].capacity;
  const int lost = p.value().slots[1].node;
  auto r = Replace(after, links, req, p.value(), {1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value().slots[0].node, p.value().slots[0].node);
  EXPECT_EQ(r.value().slots[2].node, p.value().slots[2].node);
  EXPECT_NE(r.value().slots[1].node, lost);
  EXPECT_EQ(nodes[r.value().slots[1].node].zone, zone);
  EXPECT_EQ(r.value().zones, std::vector<std::string>{zone});

  // With the zone full, hard refuses and soft goes to the other zone.
  for (auto& n : after) {
    if (n.zone == zone) n.used = n.capacity;
  }
  EXPECT_EQ(Replace(after, links, req, p.value(), {1}).status().code(), StatusCode::kUnavailable);
  req.zone = ZoneConstraint::kSoft;
  auto soft = Replace(after, links, req, p.value(), {1});
  ASSERT_TRUE(soft.ok()) << soft.status().ToString();
  EXPECT_NE(nodes[soft.value().slots[1].node].zone, zone);
  EXPECT_EQ(soft.value().zones.size(), 2u);
  EXPECT_EQ(Replace(after, links, req, p.value(), {7}).status().code(), StatusCode::kInvalidArgument);
}

TEST(PlacerTest, ADegradedLinkNamesTheNodeWithMoreBadLinksAndReplacementFixesIt) {
  auto nodes = ZonedNodes({{"a", 5}}, 1);
  TableLinks links;
  GangRequest req;
  req.job = "j";
  req.workers = 3;
  auto p = PlaceGang(nodes, links, req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const Placement& placed = p.value();
  const std::string victim = nodes[placed.slots[2].node].name;
  for (const SlotAssignment& s : placed.slots) {
    if (nodes[s.node].name != victim) links.Set(nodes[s.node].name, victim, {0.3, 0.05, 0.2, true});
  }
  auto degraded = DegradedSlots(nodes, links, placed, DegradationThresholds{});
  ASSERT_EQ(degraded, std::vector<int>{2});

  std::vector<NodeState> now = nodes;
  for (size_t i = 0; i < placed.slots.size(); ++i) {
    if (i != 2) now[placed.slots[i].node].used = 1;
  }
  now[placed.slots[2].node].used = 1;  // the degraded node is not a candidate
  auto r = Replace(now, links, req, placed, degraded);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(nodes[r.value().slots[2].node].name, victim);
  EXPECT_TRUE(DegradedSlots(nodes, links, r.value(), DegradationThresholds{}).empty());
}

TEST(PlacerTest, InATwoNodeJobTheNodeWithTheBadNicIsTheOneToMove) {
  auto nodes = ZonedNodes({{"a", 4}}, 1);
  TableLinks links;
  for (int other : {0, 2, 3}) links.Set("a-1", "a-" + std::to_string(other), {0.3, 0.03, 0.2, true});  // a-1's NIC
  Placement p;
  p.slots = {SlotAssignment{"worker", 0, 1}, SlotAssignment{"worker", 1, 0}};  // the bad node has rank 0
  EXPECT_EQ(DegradedSlots(nodes, links, p, DegradationThresholds{}), std::vector<int>{0});
  p.slots = {SlotAssignment{"worker", 0, 0}, SlotAssignment{"worker", 1, 1}};
  EXPECT_EQ(DegradedSlots(nodes, links, p, DegradationThresholds{}), std::vector<int>{1});
}

// Live migration's plan (tenax run, placement.migrate): the member behind
// the bad NIC moves to a host whose links to the others meet the
// thresholds; never onto another bad link, never without a free slot.
TEST(PlacerTest, AMigrationMovesTheMemberOffABadNicOntoAGoodHostAndNeverOntoAnotherBadLink) {
  auto nodes = ZonedNodes({{"a", 4}}, 1);  // a-0 .. a-3, one slot each
  nodes[0].used = 1;
  nodes[1].used = 1;
  const std::vector<int> members = {0, 1};
  TableLinks links;
  const DegradationThresholds t;  // 10 ms, 1 Gbit/s, 1% loss
  EXPECT_FALSE(PlanMigration(nodes, links, members, t).has_value()) << "healthy links: nothing to move";

  const LinkMetrics bad{41.0, 0.0, 0.38, true};
  for (const char* other : {"a-0", "a-2", "a-3"}) links.Set("a-1", other, bad);
  auto plan = PlanMigration(nodes, links, members, t);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(1, plan->member);
  EXPECT_EQ(1, plan->from);
  EXPECT_EQ(2, plan->to) << "a-2 and a-3 are alike: the first";
  EXPECT_EQ("a-1-a-0: rtt 41.0 ms > 10 ms, 0.38 Gbit/s < 1 Gbit/s", plan->why);
  EXPECT_DOUBLE_EQ(41.0, plan->worst.rtt_ms);

  // a-2's link to the member that stays is bad too: a-3 is the only good one.
  links.Set("a-2", "a-0", {25.0, 0.0, 4.0, true});
  plan = PlanMigration(nodes, links, members, t);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(3, plan->to);
  // ... and a-3's as well: no move, said (a move onto a bad link would loop).
  links.Set("a-3", "a-0", {0.3, 0.05, 4.0, true});
  plan = PlanMigration(nodes, links, members, t);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(-1, plan->to);
  EXPECT_EQ("none of the 2 other hosts with a free slot has links to the other members within the thresholds",
            plan->why_not);
  nodes[2].used = 1;
  nodes[3].used = 1;
  plan = PlanMigration(nodes, links, members, t);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ("no other host has a free slot", plan->why_not);

  // A move must make the exchange faster, not only meet the thresholds:
  // with the only free hosts behind the same bad link or across a
  // 0.2 Gbit/s zone link, the 4 MB exchange is no faster anywhere.
  {
    auto zoned = ZonedNodes({{"a", 3}, {"b", 1}}, 1);  // a-0 a-1 a-2, b-0
    zoned[0].used = 1;
    zoned[1].used = 1;
    TableLinks far;
    for (const char* other : {"a-0", "a-2", "b-0"}) far.Set("a-1", other, bad);
    far.Set("b-0", "a-0", {2.0, 0.0, 0.2, true});
    DegradationThresholds zones = t;
    zones.min_throughput_gbps = 0.1;  // the zone link itself is no fault
    auto move = PlanMigration(zoned, far, members, zones);
    ASSERT_TRUE(move.has_value());
    EXPECT_EQ(2, move->to) << "a-2, in the zone, healthy";
    EXPECT_LT(move->estimated_seconds_after, 0.8 * move->estimated_seconds_now);
    far.Set("a-2", "a-0", bad);  // a-2 behind the same trouble: only b-0 is left
    auto stay = PlanMigration(zoned, far, members, zones);
    ASSERT_TRUE(stay.has_value());
    EXPECT_EQ(-1, stay->to);
    EXPECT_EQ(0u, stay->why_not.rfind("no host would make the exchange faster: the best, b-0,", 0)) << stay->why_not;
  }

  // Throughput not judged (0): a link that is only narrow moves nobody.
  TableLinks narrow;
  narrow.Set("a-0", "a-1", {0.3, 0.0, 0.1, true});
  DegradationThresholds delay_only;
  delay_only.min_throughput_gbps = 0;
  EXPECT_FALSE(PlanMigration(nodes, narrow, members, delay_only).has_value());
  EXPECT_TRUE(PlanMigration(nodes, narrow, members, t).has_value());
}

}  // namespace
}  // namespace tenax::sched

namespace tenax::sched {
namespace {

using testing::TableLinks;
using testing::ZonedNodes;

// A NIC gone bad (issue 33's degraded scenario): a tenth of the bandwidth
// and 2% loss on every link of `node`.
void BadNic(TableLinks& links, const std::vector<NodeState>& nodes, const std::string& node) {
  for (const NodeState& n : nodes) {
    if (n.name != node) links.Set(node, n.name, LinkMetrics{0.3, 0.02, 0.5, true});
  }
}

TEST(PlacerRuleTest, EstimateStepPricesTheAllreduceTheServersAndTheInputRead) {
  auto nodes = ZonedNodes({{"a", 2}, {"b", 1}}, 4);
  TableLinks links;
  const LinkMetrics inside{0.2, 0.0, 8.0, true}, across{1.0, 0.0, 4.0, true};
  links.Set("a-0", "a-1", inside);
  links.Set("a-0", "b-0", across);
  links.Set("a-1", "b-0", across);
  GangRequest req;
  req.workers = 2;
  req.gradient_bytes = 1e6;
  req.input_bytes = 2e5;
  req.compute_seconds = 0.5;
  // Sync: the workers' ring over a-0/a-1; each reads from b-0 across zones.
  StepEstimate sync = EstimateStep(nodes, links, req, {0, 1}, {2});
  EXPECT_DOUBLE_EQ(sync.exchange_seconds, RingAllreduceSeconds(2, 1e6, inside));
  EXPECT_DOUBLE_EQ(sync.input_seconds, RingAllreduceSeconds(2, 2e5, across));
  EXPECT_DOUBLE_EQ(sync.step_seconds, 0.5 + sync.exchange_seconds);  // the read hides under the compute
  req.compute_seconds = 0;
  EXPECT_DOUBLE_EQ(EstimateStep(nodes, links, req, {0, 1}, {2}).step_seconds,
                   sync.input_seconds + sync.exchange_seconds);
  // Async: one server on b-0 moves 2 x 2 workers x 1e6 bytes over the
  // worker<->server link; the workers' own link does not count.
  req.servers = 1;
  StepEstimate async = EstimateStep(nodes, links, req, {0, 1, 2}, {});
  EXPECT_DOUBLE_EQ(async.exchange_seconds, RingAllreduceSeconds(2, 4e6, across));
  EXPECT_EQ(async.input_seconds, 0.0);
}

TEST(PlacerRuleTest, ABadNicOnTheStorageNodeSendsAHardJobToAHealthyZone) {
  // Zone a holds the data on a-0, whose NIC is bad; its only other host is
  // a-1. Zone b is healthy. Reading the input across zones costs far less
  // than an allreduce across a-0's NIC.
  auto nodes = ZonedNodes({{"a", 2}, {"b", 2}}, 2);
  TableLinks links;  // unmeasured pairs: the healthy cloud defaults
  BadNic(links, nodes, "a-0");
  GangRequest req;
  req.job = "hard";
  req.workers = 4;
  req.zone = ZoneConstraint::kHard;
  req.storage_nodes = {"a-0"};
  req.gradient_bytes = 4e6;
  req.input_bytes = 1e5;
  auto p = PlaceGang(nodes, links, req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p.value().zones, std::vector<std::string>{"b"});
  EXPECT_EQ(NodesOf(nodes, p.value()), (std::multiset<std::string>{"b-0", "b-0", "b-1", "b-1"}));
  EXPECT_GT(p.value().input_seconds, 0.0);  // it still reads from a-0, across zones
  // The data's zone would have cost more: its gang spans a-0's NIC.
  const std::vector<int> storage = {0};
  EXPECT_LT(p.value().step_seconds, EstimateStep(nodes, links, req, {0, 0, 1, 1}, storage).step_seconds);
}

TEST(PlacerRuleTest, TheFirstSlotsNoLongerGoOntoAStorageNodeBehindABadNic) {
  auto nodes = ZonedNodes({{"a", 4}}, 2);
  TableLinks links;
  BadNic(links, nodes, "a-0");
  GangRequest req;
  req.job = "j";
  req.workers = 4;
  req.storage_nodes = {"a-0"};
  req.input_bytes = 1e5;
  auto p = PlaceGang(nodes, links, req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(NodesOf(nodes, p.value()).count("a-0"), 0u);
  EXPECT_GT(p.value().worst_link.throughput_gbps, 1.0);
}

TEST(PlacerRuleTest, AParameterServerAvoidsABadNode) {
  // Both zones hold the 4 workers on one host; in zone a the server's only
  // free slot is a-1, behind a bad NIC. The old zone cost (the workers'
  // allreduce only) tied the zones and took a.
  auto nodes = ZonedNodes({{"a", 2}, {"b", 2}}, 4);
  nodes[1].used = 3;  // a-1: 1 free
  nodes[3].used = 3;  // b-1: 1 free
  TableLinks links;
  BadNic(links, nodes, "a-1");
  GangRequest req;
  req.job = "async";
  req.workers = 4;
  req.servers = 1;
  req.zone = ZoneConstraint::kHard;
  auto p = PlaceGang(nodes, links, req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p.value().zones, std::vector<std::string>{"b"});
  EXPECT_EQ(nodes[p.value().slots[4].node].name, "b-1");
  EXPECT_EQ(p.value().slots[4].role, "server");
  EXPECT_LT(p.value().allreduce_seconds, 1e-4);  // one worker host: all the old cost saw
  EXPECT_GT(p.value().exchange_seconds, 0.0);
}

TEST(PlacerRuleTest, HealthyLinksKeepTheGangBesideItsDataAndOnTheFewestHosts) {
  auto nodes = ZonedNodes({{"a", 3}, {"b", 3}}, 4);
  nodes[0].used = 2;  // a-0: 2 free
  TableLinks links;
  GangRequest req;
  req.job = "j";
  req.workers = 2;
  req.storage_nodes = {"b-1"};
  req.input_bytes = 1e6;
  auto p = PlaceGang(nodes, links, req);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // Reading beside the data is cheapest: both workers on the storage node.
  EXPECT_EQ(NodesOf(nodes, p.value()), (std::multiset<std::string>{"b-1", "b-1"}));
  EXPECT_DOUBLE_EQ(p.value().input_seconds, RingAllreduceSeconds(2, 1e6, LinkMetrics{0, 0, 1e300, true}));
  // Without data, a 2-worker gang takes the host it fills exactly (a-0),
  // keeping whole hosts free for larger gangs.
  req.storage_nodes.clear();
  auto q = PlaceGang(nodes, links, req);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(NodesOf(nodes, q.value()), (std::multiset<std::string>{"a-0", "a-0"}));
}

TEST(PlacerRuleTest, WithMaxSlowdownASoftJobWaitsRatherThanCrossABadLinkWhileSlotsWillFree) {
  // One free slot in each zone, and the zones' link is bad: a 2-worker
  // soft job would allreduce across it.
  auto nodes = ZonedNodes({{"a", 1}, {"b", 1}}, 2);
  nodes[0].used = 1;
  nodes[1].used = 1;
  TableLinks links;
  links.Set("a-0", "b-0", LinkMetrics{1.0, 0.02, 0.5, true});
  GangRequest req;
  req.job = "soft";
  req.workers = 2;
  req.gradient_bytes = 1e8;
  req.compute_seconds = 0.2;
  PlacerOptions o;
  EXPECT_TRUE(PlaceGang(nodes, links, req, o).ok());  // 0: takes what fits
  o.max_slowdown = 3;
  auto wait = PlaceGang(nodes, links, req, o);
  ASSERT_FALSE(wait.ok());
  EXPECT_EQ(wait.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(wait.status().message().find("waits"), std::string::npos) << wait.status().message();
  // A healthy cross-zone link is within the bound.
  links.Set("a-0", "b-0", LinkMetrics{1.0, 0.0, 5.0, true});
  EXPECT_TRUE(PlaceGang(nodes, links, req, o).ok());
  // On an idle cluster nothing will free a better slot: it takes the best.
  links.Set("a-0", "b-0", LinkMetrics{1.0, 0.02, 0.5, true});
  auto idle = ZonedNodes({{"a", 1}, {"b", 1}}, 1);
  EXPECT_TRUE(PlaceGang(idle, links, req, o).ok());
  o.max_slowdown = -1;
  EXPECT_EQ(PlaceGang(nodes, links, req, o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tenax::sched

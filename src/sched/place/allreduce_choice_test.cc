#include "tenax/sched/place/allreduce_choice.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sched_test_links.h"

namespace tenax::sched {
namespace {

using testing::TableLinks;
using testing::ZonedNodes;

const LinkMetrics kFast{0.2, 0.0, 10.0, true};
const LinkMetrics kSlow{10.0, 0.0, 1.0, true};

// Every pair of `nodes` measured: kFast inside a zone, kSlow across.
TableLinks Measured(const std::vector<NodeState>& nodes) {
  TableLinks links;
  for (size_t a = 0; a < nodes.size(); ++a) {
    for (size_t b = a + 1; b < nodes.size(); ++b) {
      links.Set(nodes[a].name, nodes[b].name, nodes[a].zone == nodes[b].zone ? kFast : kSlow);
    }
  }
  return links;
}

TEST(AllreduceChoiceTest, TwoZonesOverASlowLinkGoHierarchicalWithTheModelsEstimates) {
  auto nodes = ZonedNodes({{"a", 2}, {"b", 2}}, 1);
  const double bytes = 64.0 * (1 << 20);
  auto c = ChooseAllreduce(nodes, Measured(nodes), bytes);
  EXPECT_TRUE(c.hierarchical) << c.reason;
  EXPECT_EQ(c.zone_count, 2);
  EXPECT_EQ(c.zone_size, 2);
  EXPECT_EQ(c.zones, (std::vector<std::string>{"a", "a", "b", "b"}));
  // Flat ring of 4, bounded by the slow link: 1.5 * bytes / 125 MB/s + 6 * 10 ms.
  EXPECT_NEAR(c.ring_seconds, 1.5 * bytes / 1.25e8 + 6 * 0.010, 1e-9);
  // Inside: ring of 2 over the fast link; across: ring of 2 over half the bytes.
  EXPECT_NEAR(c.hierarchical_seconds, (bytes / 1.25e9 + 2 * 0.0002) + (0.5 * bytes / 1.25e8 + 2 * 0.010), 1e-9);
  EXPECT_LT(c.hierarchical_seconds, 0.5 * c.ring_seconds);
  EXPECT_NE(c.reason.find("hierarchical: 2 zones of 2"), std::string::npos) << c.reason;
}

TEST(AllreduceChoiceTest, OneZoneUnequalZonesAndAnUnmeasuredPairKeepTheFlatRingAndSayWhy) {
  auto one = ZonedNodes({{"a", 4}}, 1);
  auto c1 = ChooseAllreduce(one, Measured(one), 1e6);
  EXPECT_FALSE(c1.hierarchical);
  EXPECT_NE(c1.reason.find("one zone"), std::string::npos) << c1.reason;

  auto unequal = ZonedNodes({{"a", 3}, {"b", 1}}, 1);
  auto c2 = ChooseAllreduce(unequal, Measured(unequal), 1e6);
  EXPECT_FALSE(c2.hierarchical);
  EXPECT_NE(c2.reason.find("unequal size (zone 'a' has 3 members, zone 'b' 1)"), std::string::npos) << c2.reason;

  auto four = ZonedNodes({{"a", 2}, {"b", 2}}, 1);
  TableLinks partial = Measured(four);
  TableLinks missing;  // every pair but a-1 - b-0
  for (size_t a = 0; a < four.size(); ++a) {
    for (size_t b = a + 1; b < four.size(); ++b) {
      if (four[a].name == "a-1" && four[b].name == "b-0") continue;
      missing.Set(four[a].name, four[b].name, *partial.Link(four[a], four[b]));
    }
  }
  auto c3 = ChooseAllreduce(four, missing, 1e6);
  EXPECT_FALSE(c3.hierarchical);
  EXPECT_NE(c3.reason.find("no probe has measured the link a-1 - b-0"), std::string::npos) << c3.reason;
}

TEST(AllreduceChoiceTest, MembersSharingAHostNeedNoMeasuredLinkBetweenThem) {
  // Two hosts, one per zone, two members on each: the pairs on one host
  // have no network link; the cross pair decides.
  auto hosts = ZonedNodes({{"a", 1}, {"b", 1}}, 2);
  std::vector<NodeState> members = {hosts[0], hosts[0], hosts[1], hosts[1]};
  TableLinks links;
  links.Set("a-0", "b-0", kSlow);
  auto c = ChooseAllreduce(members, links, 64.0 * (1 << 20));
  EXPECT_TRUE(c.hierarchical) << c.reason;
  EXPECT_EQ(c.zone_size, 2);
}

TEST(AllreduceChoiceTest, AnUnreachableCrossLinkMakesTheFlatRingInfinitelyExpensive) {
  auto nodes = ZonedNodes({{"a", 1}, {"b", 1}}, 1);
  TableLinks links;
  links.Set("a-0", "b-0", LinkMetrics{1.0, 0.0, 1.0, false});
  auto c = ChooseAllreduce(nodes, links, 1e6);
  EXPECT_TRUE(std::isinf(c.ring_seconds));
  EXPECT_TRUE(std::isinf(c.hierarchical_seconds));
  EXPECT_FALSE(c.hierarchical);  // inf < inf is false: nothing to gain, keep the ring
}

}  // namespace
}  // namespace tenax::sched

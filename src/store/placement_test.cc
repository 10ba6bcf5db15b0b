#include "tenax/store/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace tenax::store {
namespace {

std::vector<DataNodeInfo> Nodes(int n, int zones) {
  std::vector<DataNodeInfo> out;
  for (int i = 0; i < n; ++i) {
    out.push_back({"data-" + std::to_string(i), zones > 0 ? "zone-" + std::to_string(i % zones) : ""});
  }
  return out;
}

TEST(Placement, NoStripeHasTwoChunksOnOneNodeAndNodesFillEvenly) {
  for (int n : {6, 7, 9}) {
    auto placed = PlaceStripes(120, 6, 4, Nodes(n, 0));
    ASSERT_TRUE(placed.ok()) << placed.status().message();
    ASSERT_EQ(placed->size(), 120u);
    std::vector<int> load(static_cast<size_t>(n), 0), parity(static_cast<size_t>(n), 0);
    for (const auto& stripe : *placed) {
      ASSERT_EQ(stripe.size(), 6u);
      EXPECT_EQ(std::set<int>(stripe.begin(), stripe.end()).size(), 6u) << "two chunks of a stripe on one node";
      for (size_t c = 0; c < stripe.size(); ++c) {
        ++load[static_cast<size_t>(stripe[c])];
        if (c >= 4) ++parity[static_cast<size_t>(stripe[c])];
      }
    }
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    EXPECT_LE(*hi - *lo, 1) << n << " nodes";
    // Parity spreads evenly too, within 2 (placing a stripe greedily on
    // distinct nodes cannot always balance both kinds to 1).
    const auto [plo, phi] = std::minmax_element(parity.begin(), parity.end());
    EXPECT_LE(*phi - *plo, 2) << n << " nodes";
    EXPECT_GT(*plo, 0) << n << " nodes";
  }
}

TEST(Placement, ChunksOfAStripeSpreadOverZones) {
  // 3 zones x 2 nodes, 4+2: every zone gets exactly 2 chunks of a stripe,
  // so a lost zone loses exactly m = 2 chunks: still decodable.
  auto placed = PlaceStripes(50, 6, 4, Nodes(6, 3));
  ASSERT_TRUE(placed.ok());
  for (const auto& stripe : *placed) {
    std::map<int, int> per_zone;
    for (int node : stripe) ++per_zone[node % 3];
    for (const auto& [zone, count] : per_zone) EXPECT_EQ(count, 2) << "zone " << zone;
  }
  // 2 zones of 4 and 2 nodes, 3 chunks per stripe: both zones used.
  std::vector<DataNodeInfo> uneven = {{"a", "z1"}, {"b", "z1"}, {"c", "z1"}, {"d", "z1"}, {"e", "z2"}, {"f", "z2"}};
  auto p2 = PlaceStripes(20, 3, 2, uneven);
  ASSERT_TRUE(p2.ok());
  for (const auto& stripe : *p2) {
    const bool z2 = std::any_of(stripe.begin(), stripe.end(), [](int i) { return i >= 4; });
    EXPECT_TRUE(z2);
  }
}

TEST(Placement, TooFewNodesIsAClearError) {
  auto placed = PlaceStripes(1, 6, 4, Nodes(5, 0));
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(placed.status().message().find("only 5 are available"), std::string::npos) << placed.status().message();
}

TEST(Placement, ReplacementsAvoidTheStripesNodesWhileTheyCan) {
  const auto nodes = Nodes(7, 0);
  // Stripe on nodes 0..5, node 2's chunk lost; node 6 is free.
  std::vector<bool> alive(7, true);
  alive[2] = false;
  auto r = PlaceReplacement({0, 1, -1, 3, 4, 5}, nodes, alive, std::vector<uint64_t>(7, 10));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->node, 6);
  EXPECT_FALSE(r->shares_a_node);
  // Six nodes, one dead: every live node holds a chunk; the least loaded
  // one takes it and the plan says the stripe now shares a node.
  std::vector<bool> six(6, true);
  six[2] = false;
  auto shared = PlaceReplacement({0, 1, -1, 3, 4, 5}, Nodes(6, 0), six, {9, 9, 0, 9, 3, 9});
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(shared->node, 4);
  EXPECT_TRUE(shared->shares_a_node);
  EXPECT_FALSE(PlaceReplacement({0}, Nodes(1, 0), {false}, {0}).ok());
}

}  // namespace
}  // namespace tenax::store

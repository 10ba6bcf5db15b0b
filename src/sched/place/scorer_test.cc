#include "tenax/sched/place/scorer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sched_test_links.h"

namespace tenax::sched {
namespace {

using testing::TableLinks;
using testing::ZonedNodes;

TEST(ScorerTest, TheCandidateWithTheBetterWorstLinkToThePeersWinsAndScoresAreNormalised) {
  auto nodes = ZonedNodes({{"a", 4}}, 1);
  TableLinks links;
  // Peer a-0. a-1: fast; a-2: slow; a-3: in between.
  links.Set("a-0", "a-1", {0.1, 0.0, 10.0, true});
  links.Set("a-0", "a-2", {0.5, 0.0, 1.0, true});
  links.Set("a-0", "a-3", {0.3, 0.0, 5.5, true});
  auto s = ScoreNodes(nodes, {1, 2, 3}, {0}, links, ScoreWeights{});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(s[0].score, 100.0);  // best everywhere
  EXPECT_DOUBLE_EQ(s[1].score, 0.0 + 100.0 * 0.2);  // worst throughput and delay; loss all equal -> 1
  // a-3: throughput (5.5-1)/(10-1) = 0.5, delay (0.5-0.3)/(0.5-0.1) = 0.5, loss 1.
  EXPECT_NEAR(s[2].score, 100.0 * (0.5 * 0.5 + 0.3 * 0.5 + 0.2 * 1.0), 1e-9);
  EXPECT_DOUBLE_EQ(s[2].worst.throughput_gbps, 5.5);
}

TEST(ScorerTest, TheWorstLinkToAnyPeerCounts) {
  auto nodes = ZonedNodes({{"a", 4}}, 1);
  TableLinks links;
  links.Set("a-2", "a-0", {0.1, 0.0, 10.0, true});
  links.Set("a-2", "a-1", {0.1, 0.0, 10.0, true});
  links.Set("a-3", "a-0", {0.1, 0.0, 20.0, true});
  links.Set("a-3", "a-1", {0.1, 0.05, 20.0, true});  // lossy to one peer
  auto s = ScoreNodes(nodes, {2, 3}, {0, 1}, links, ScoreWeights{0.0, 0.0, 1.0});
  EXPECT_DOUBLE_EQ(s[0].score, 100.0);
  EXPECT_DOUBLE_EQ(s[1].score, 0.0);
  EXPECT_DOUBLE_EQ(s[1].worst.loss, 0.05);
  // With throughput alone, a-3's 20 Gbit/s wins instead.
  auto t = ScoreNodes(nodes, {2, 3}, {0, 1}, links, ScoreWeights{1.0, 0.0, 0.0});
  EXPECT_DOUBLE_EQ(t[0].score, 0.0);
  EXPECT_DOUBLE_EQ(t[1].score, 100.0);
}

TEST(ScorerTest, EqualCandidatesTieAtFullScoreAndUnreachableScoresZero) {
  auto nodes = ZonedNodes({{"a", 4}}, 1);
  TableLinks links;
  links.Set("a-0", "a-1", {0.2, 0.0, 10.0, true});
  links.Set("a-0", "a-2", {0.2, 0.0, 10.0, true});
  links.Set("a-0", "a-3", {0.2, 1.0, 0.0, false});
  auto s = ScoreNodes(nodes, {1, 2, 3}, {0}, links, ScoreWeights{});
  EXPECT_DOUBLE_EQ(s[0].score, 100.0);
  EXPECT_DOUBLE_EQ(s[1].score, 100.0);
  EXPECT_DOUBLE_EQ(s[2].score, 0.0);
  EXPECT_FALSE(s[2].worst.reachable);
}

TEST(ScorerTest, UnmeasuredPairsFallBackByZoneAndTheSameHostIsPerfect) {
  auto nodes = ZonedNodes({{"a", 2}, {"b", 1}}, 2);
  TableLinks links;  // nothing measured
  auto s = ScoreNodes(nodes, {0, 1, 2}, {0}, links, ScoreWeights{});
  EXPECT_DOUBLE_EQ(s[0].score, 100.0);  // the peer's own host
  EXPECT_GT(s[1].score, s[2].score);     // same zone beats another zone
  EXPECT_DOUBLE_EQ(s[1].worst.throughput_gbps, UnmeasuredLinks{}.same_zone.throughput_gbps);
  EXPECT_DOUBLE_EQ(s[2].worst.rtt_ms, UnmeasuredLinks{}.cross_zone.rtt_ms);
}

TEST(ScorerTest, WeightsMustBeUsable) {
  EXPECT_TRUE(ValidateWeights(ScoreWeights{}).ok());
  EXPECT_EQ(ValidateWeights(ScoreWeights{0, 0, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateWeights(ScoreWeights{-1, 1, 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateWeights(ScoreWeights{std::nan(""), 1, 1}).code(), StatusCode::kInvalidArgument);
}

TEST(ScorerTest, RingAllreduceCostFollowsTheSlowestLinkAndLoss) {
  const double bytes = 8e6;
  LinkMetrics good{0.2, 0.0, 10.0, true};
  // 2*3/4 * 8e6 B / 1.25e9 B/s + 6 * 0.2 ms
  EXPECT_NEAR(RingAllreduceSeconds(4, bytes, good), 1.5 * 8e6 / 1.25e9 + 6 * 0.0002, 1e-12);
  EXPECT_EQ(RingAllreduceSeconds(1, bytes, good), 0.0);
  LinkMetrics lossy = good;
  lossy.loss = 0.01;
  EXPECT_GT(RingAllreduceSeconds(4, bytes, lossy), 5 * RingAllreduceSeconds(4, bytes, good));
  LinkMetrics gone = good;
  gone.reachable = false;
  EXPECT_TRUE(std::isinf(RingAllreduceSeconds(4, bytes, gone)));
}

TEST(ScorerTest, AutoTcpStreamsTakesOneOnAShortCleanLinkAndFourOtherwise) {
  // An idle namespaced link, and the same with one late ping of five (what
  // a loaded machine shows): one stream.
  EXPECT_EQ(AutoTcpStreams(LinkMetrics{0.02, 0.0, 10.0, true}), 1);
  EXPECT_EQ(AutoTcpStreams(LinkMetrics{0.02, 0.2, 10.0, true}), 1);
  EXPECT_EQ(AutoTcpStreams(LinkMetrics{9.9, 0.1, 10.0, true}), 1);
  // Two lost of five, a 10 ms round trip, or no answer at all: four.
  EXPECT_EQ(AutoTcpStreams(LinkMetrics{0.02, 0.4, 10.0, true}), 4);
  EXPECT_EQ(AutoTcpStreams(LinkMetrics{10.0, 0.0, 10.0, true}), 4);
  EXPECT_EQ(AutoTcpStreams(LinkMetrics{0.02, 0.0, 10.0, false}), 4);
}

}  // namespace
}  // namespace tenax::sched

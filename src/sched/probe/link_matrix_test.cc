#include "tenax/sched/probe/link_matrix.h"

#include <gtest/gtest.h>

namespace tenax::sched {
namespace {

TEST(LinkMatrixTest, OldSamplesDecayWithTheHalfLife) {
  LinkMatrix m(10.0);
  m.Observe("x", "y", {1.0, 0.0, 10.0}, 0.0);
  m.Observe("y", "x", {3.0, 0.0, 2.0}, 10.0);  // one half-life later, either order
  auto l = m.Link("x", "y");
  ASSERT_TRUE(l.has_value());
  // weights 0.5 and 1: (0.5*1 + 3) / 1.5
  EXPECT_NEAR(l->rtt_ms, 3.5 / 1.5, 1e-12);
  EXPECT_NEAR(l->throughput_gbps, (0.5 * 10 + 2) / 1.5, 1e-12);
  EXPECT_TRUE(l->reachable);
  // Much later, the newest sample dominates.
  m.Observe("x", "y", {5.0, 0.1, 1.0}, 200.0);
  EXPECT_NEAR(m.Link("x", "y")->rtt_ms, 5.0, 1e-3);
  EXPECT_NEAR(m.Link("x", "y")->loss, 0.1, 1e-4);
  EXPECT_FALSE(m.Link("x", "z").has_value());
}

TEST(LinkMatrixTest, AnUnansweredProbeMarksThePairUnreachableUntilAnAnswer) {
  LinkMatrix m(10.0);
  m.Observe("x", "y", {1.0, 0.0, 10.0}, 0.0);
  m.ObserveUnreachable("x", "y", 0.0);
  auto l = m.Link("x", "y");
  ASSERT_TRUE(l.has_value());
  EXPECT_FALSE(l->reachable);
  EXPECT_NEAR(l->loss, 0.5, 1e-12);
  EXPECT_NEAR(l->rtt_ms, 1.0, 1e-12);  // delay and throughput keep their means
  EXPECT_NEAR(l->throughput_gbps, 10.0, 1e-12);
  m.Observe("x", "y", {1.0, 0.0, 10.0}, 1.0);
  EXPECT_TRUE(m.Link("x", "y")->reachable);
  m.ObserveUnreachable("p", "q", 0.0);  // never answered
  EXPECT_FALSE(m.Link("p", "q")->reachable);
}

TEST(LinkMatrixTest, JsonRoundTripsAndBadFilesSayWhy) {
  LinkMatrix m(30.0);
  m.Observe("n1", "n2", {0.5, 0.01, 4.0}, 0.0);
  m.ObserveUnreachable("n1", "n3", 0.0);
  auto back = LinkMatrix::FromJson(m.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  auto l = back.value().Link("n2", "n1");
  ASSERT_TRUE(l.has_value());
  EXPECT_DOUBLE_EQ(l->rtt_ms, 0.5);
  EXPECT_DOUBLE_EQ(l->loss, 0.01);
  EXPECT_DOUBLE_EQ(l->throughput_gbps, 4.0);
  EXPECT_FALSE(back.value().Link("n1", "n3")->reachable);

  for (const char* bad : {"", "[1]", "{\"links\":3}", "{\"links\":[{\"a\":\"x\",\"b\":\"x\",\"rtt_ms\":1,\"loss\":0,\"throughput_gbps\":1}]}",
                          "{\"links\":[{\"a\":\"x\",\"b\":\"y\",\"rtt_ms\":1,\"loss\":2,\"throughput_gbps\":1}]}",
                          "{\"links\":[{\"a\":\"x\",\"b\":\"y\",\"loss\":0,\"throughput_gbps\":1}]}",
                          "{\"half_life_seconds\":-1,\"links\":[]}"}) {
    auto r = LinkMatrix::FromJson(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace tenax::sched

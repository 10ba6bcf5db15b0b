#include "tenax/store/recovery_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace tenax::store {
namespace {

// A dataset of 10 classes x 6000 samples (Fashion-MNIST's training split).
std::vector<uint64_t> Totals() { return std::vector<uint64_t>(10, 6000); }

LostChunk Data(uint64_t stripe, std::vector<uint64_t> counts) {
  LostChunk c;
  c.stripe = stripe;
  c.index = 0;
  c.class_counts = std::move(counts);
  const uint64_t samples = std::accumulate(c.class_counts.begin(), c.class_counts.end(), uint64_t{0});
  c.bytes = samples * 785;
  return c;
}

LostChunk Parity(uint64_t stripe, uint64_t bytes) {
  LostChunk c;
  c.stripe = stripe;
  c.index = 4;
  c.parity = true;
  c.bytes = bytes;
  return c;
}

TEST(RecoveryPlan, FullRebuildsEverything) {
  std::vector<LostChunk> lost = {Data(0, std::vector<uint64_t>(10, 100)), Parity(1, 785000)};
  auto plan = PlanRecovery("full", Totals(), lost);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->first, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(plan->later.empty());
  EXPECT_EQ(plan->first_bytes, 1000 * 785u + 785000u);
  EXPECT_DOUBLE_EQ(plan->available_share, 1.0);
  EXPECT_DOUBLE_EQ(plan->max_class_deviation, 0.0);
}

// Losing chunks that each hold every class evenly leaves the class shares
// as they were: PRM rebuilds only what the availability floor needs, the
// fewest bytes first, and never parity.
TEST(RecoveryPlan, PrmRebuildsOnlyWhatTheAvailabilityFloorNeeds) {
  std::vector<LostChunk> lost;
  for (uint64_t s = 0; s < 20; ++s) lost.push_back(Data(s, std::vector<uint64_t>(10, 50)));  // 10000 samples
  for (uint64_t s = 0; s < 5; ++s) lost.push_back(Parity(s, 500 * 785));
  PrmParams p;
  p.min_available = 0.9;  // 54000 of 60000: 4000 of the 10000 lost samples back
  auto plan = PlanRecovery("prm", Totals(), lost, p);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->first.size(), 8u);  // 8 x 500 samples
  for (size_t i : plan->first) EXPECT_FALSE(lost[i].parity);
  EXPECT_EQ(plan->later.size(), 17u);
  EXPECT_NEAR(plan->available_share, 54000.0 / 60000, 1e-12);
  EXPECT_LE(plan->max_class_deviation, 1e-12);
  auto full = PlanRecovery("full", Totals(), lost, p);
  ASSERT_TRUE(full.ok());
  EXPECT_LT(static_cast<double>(plan->first_bytes), 0.35 * static_cast<double>(full->first_bytes));
}

// A lost chunk that held most of one class skews the shares: PRM rebuilds
// exactly that one, not the even ones, even though it is larger.
TEST(RecoveryPlan, PrmRebuildsTheChunksThatSkewTheClassesFirst) {
  std::vector<uint64_t> skewed(10, 0);
  skewed[3] = 3000;  // half of class 3
  std::vector<LostChunk> lost = {Data(0, std::vector<uint64_t>(10, 30)), Data(1, skewed),
                                 Data(2, std::vector<uint64_t>(10, 30))};
  PrmParams p;
  p.class_tolerance = 0.01;
  p.min_available = 0.9;
  auto plan = PlanRecovery("prm", Totals(), lost, p);
  ASSERT_TRUE(plan.ok());
  EXPECT_GT(plan->max_class_deviation_before, 0.04);  // class 3: 5.3% instead of 10%
  EXPECT_EQ(plan->first, (std::vector<size_t>{1}));
  EXPECT_EQ(plan->later, (std::vector<size_t>{0, 2}));
  EXPECT_LE(plan->max_class_deviation, 0.01);
  EXPECT_GE(plan->available_share, 0.9);
}

TEST(RecoveryPlan, ApproxRebuildsTheMostImportantTierFirst) {
  std::vector<LostChunk> lost = {Data(0, std::vector<uint64_t>(10, 10)), Data(1, std::vector<uint64_t>(10, 10)),
                                 Parity(0, 100)};
  lost[0].tier = 1;
  lost[1].tier = 0;
  lost[2].tier = 1;
  auto plan = PlanRecovery("approx", Totals(), lost);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->first, (std::vector<size_t>{1}));
  EXPECT_EQ(plan->later, (std::vector<size_t>{0, 2}));
}

// When the floor cannot be reached without everything, PRM rebuilds every
// lost data chunk first (and says so through the shares).
TEST(RecoveryPlan, PrmFallsBackToAllDataWhenNothingLessWillDo) {
  std::vector<LostChunk> lost;
  for (uint64_t s = 0; s < 4; ++s) lost.push_back(Data(s, std::vector<uint64_t>(10, 500)));  // a third of the data
  PrmParams p;
  p.min_available = 1.0;
  auto plan = PlanRecovery("prm", Totals(), lost, p);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->first.size(), 4u);
  EXPECT_DOUBLE_EQ(plan->available_share, 1.0);
}

TEST(RecoveryPlan, BadInputIsRefused) {
  EXPECT_FALSE(PlanRecovery("fast", Totals(), {}).ok());
  EXPECT_FALSE(PlanRecovery("prm", Totals(), {Data(0, {1, 2, 3})}).ok());  // 3 classes, not 10
  std::vector<uint64_t> too_many(10, 0);
  too_many[0] = 7000;
  EXPECT_FALSE(PlanRecovery("prm", Totals(), {Data(0, too_many)}).ok());
  PrmParams bad;
  bad.min_available = 1.5;
  EXPECT_FALSE(PlanRecovery("prm", Totals(), {}, bad).ok());
}

}  // namespace
}  // namespace tenax::store

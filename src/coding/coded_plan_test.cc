#include "tenax/coding/coded_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "testing.h"

namespace tenax::coding {
namespace {

// The cyclic code every test here uses (seed 7); each test asserts it was
// built (ASSERT_OK_AND_ASSIGN) before using it.
Result<GradientCode> Cyclic(int n, int s) { return GradientCode::CyclicRepetition(n, s, 7); }

TEST(CodeAssignment, StartsAsIdentityAndRefusesNonPermutations) {
  CodeAssignment a(4);
  EXPECT_EQ(a.rows(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(a.worker_of(2), 2);
  EXPECT_FALSE(a.Set({0, 1, 1, 3}).ok());
  EXPECT_FALSE(a.Set({0, 1, 2}).ok());
  EXPECT_FALSE(a.Set({0, 1, 2, 4}).ok());
  EXPECT_EQ(a.rows(), (std::vector<int>{0, 1, 2, 3}));  // unchanged by the refusals
  ASSERT_TRUE(a.Set({3, 0, 1, 2}).ok());
  EXPECT_EQ(a.row_of(0), 3);
  EXPECT_EQ(a.worker_of(3), 0);
  EXPECT_EQ(a.worker_of(0), 1);
}

TEST(Coverage, IsOneForEveryExactDecodingAndCountsPartitionsOtherwise) {
  ASSERT_OK_AND_ASSIGN(GradientCode code, Cyclic(4, 1));
  Decoder decoder(code);
  CodeAssignment a(4);
  ASSERT_TRUE(a.Set({2, 3, 0, 1}).ok());
  // Workers 0, 1, 3 compute rows 2, 3, 1: an exact set.
  std::vector<int> rows = {a.row_of(0), a.row_of(1), a.row_of(3)};
  auto d = decoder.DecodeExact(rows);
  ASSERT_TRUE(d.ok()) << d.status().message();
  std::vector<int> workers;
  for (int r : d->workers) workers.push_back(a.worker_of(r));
  const std::vector<double> w = PartitionWeights(code, a, workers, d->coeffs);
  for (double c : w) EXPECT_NEAR(c, 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(Coverage(w), 1.0);

  // Uncoded, 3 of 4 arrivals rescaled by 4/3: three partitions contribute.
  auto identity = GradientCode::Uncoded(4);
  ASSERT_TRUE(identity.ok());
  CodeAssignment id(4);
  const std::vector<double> u = PartitionWeights(*identity, id, {0, 2, 3}, {4.0 / 3, 4.0 / 3, 4.0 / 3});
  EXPECT_NEAR(u[0], 4.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(u[1], 0.0);
  EXPECT_DOUBLE_EQ(Coverage(u), 0.75);
}

TEST(StragglerDetector, FlagsTheWorkerFarAboveTheMedianAndReportsRecovery) {
  StragglerDetector d(4, 2.0, 0.5);
  for (int step = 0; step < 20; ++step) {
    for (int w = 0; w < 4; ++w) d.Observe(w, w == 3 ? 0.5 : 0.1);
  }
  EXPECT_EQ(d.Update(), std::vector<int>{3});
  EXPECT_TRUE(d.slow(3));
  EXPECT_FALSE(d.slow(0));
  EXPECT_NEAR(d.Ratio(3), 5.0, 1e-6);
  EXPECT_TRUE(d.Update().empty());  // no change, no event
  for (int step = 0; step < 20; ++step) {
    for (int w = 0; w < 4; ++w) d.Observe(w, 0.1);
  }
  EXPECT_EQ(d.Update(), std::vector<int>{3});
  EXPECT_FALSE(d.slow(3));
}

TEST(ShufflePolicy, KeepsTheSupportStructureAndMovesPartitionsAwayFromSlowWorkers) {
  ASSERT_OK_AND_ASSIGN(GradientCode code, Cyclic(4, 1));
  ShufflePolicy policy(code);
  CodeAssignment a(4);
  const std::vector<bool> slow = {false, false, false, true};
  std::vector<int64_t> held_by_slow(4, 0);
  for (int period = 0; period < 8; ++period) {
    for (int step = 0; step < 10; ++step) {
      policy.ObserveStep(a, slow);
      for (int j : code.Partitions(a.row_of(3))) held_by_slow[static_cast<size_t>(j)] += 1;
    }
    ShuffleResult next = policy.Next(a, slow);
    std::vector<int> sorted = next.rows;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted, (std::vector<int>{0, 1, 2, 3}));  // a permutation of the code's rows
    EXPECT_NE(next.rows[3], a.row_of(3)) << "the slow worker keeps its partitions";
    // Two rows change hands per move of the slow worker: each gives up
    // partitions the other did not hold.
    EXPECT_GT(next.partitions_moved, 0);
    EXPECT_LE(next.partitions_moved, 4 * 2);
    ASSERT_TRUE(a.Set(next.rows).ok());
  }
  EXPECT_EQ(policy.slow_exposure(), held_by_slow);
  // Every partition spent time on the slow worker, evenly: the slow
  // worker's rows rotated rather than staying on one.
  const auto [lo, hi] = std::minmax_element(held_by_slow.begin(), held_by_slow.end());
  EXPECT_GT(*lo, 0);
  EXPECT_LE(*hi - *lo, 20);
  EXPECT_EQ(std::accumulate(held_by_slow.begin(), held_by_slow.end(), int64_t{0}), 8 * 10 * 2);
}

TEST(StragglerDetector, SeesBothOfTwoSlowWorkersOutOfFourAgainstAFastReference) {
  // With a plain median (the mean of a fast and a slow worker, 0.3 s) a 5x
  // worker would be only 1.7x "the median" and go unnoticed.
  StragglerDetector d(4, 2.0, 0.5);
  EXPECT_EQ(d.ReferenceSeconds(), 0.0);
  for (int step = 0; step < 20; ++step) {
    for (int w = 0; w < 4; ++w) d.Observe(w, w == 1 || w == 2 ? 0.5 : 0.1);
  }
  EXPECT_NEAR(d.ReferenceSeconds(), 0.1, 1e-9);
  EXPECT_EQ(d.Update(), (std::vector<int>{1, 2}));
  EXPECT_NEAR(d.Ratio(2), 5.0, 1e-6);
  EXPECT_NEAR(d.Ratio(0), 1.0, 1e-6);
}

TEST(StragglerDetector, AWorkerThatNeverArrivesIsSeenThroughItsSilenceAndNoOneFlaps) {
  StragglerDetector d(4, 2.0, 0.5);
  for (int w = 0; w < 3; ++w) d.Observe(w, 0.1);
  // Worker 3 has returned nothing yet: silence below the others' mean is
  // no evidence, silence far above it is.
  d.ObserveSilence(0, 0.05);
  EXPECT_NEAR(d.Ratio(0), 1.0, 1e-9);  // silence shorter than its mean: ignored
  for (int step = 0; step < 5; ++step) d.ObserveSilence(3, 0.2 * (step + 1));
  EXPECT_EQ(d.Update(), std::vector<int>{3});
  EXPECT_GT(d.Ratio(3), 5.0);
  // Hysteresis: a worker at 1.8x the reference (between 3/4 x 2 and 2)
  // stays what it was.
  StragglerDetector h(4, 2.0, 1.0);  // smoothing 1: the last observation is the mean
  for (int w = 0; w < 4; ++w) h.Observe(w, w == 2 ? 0.25 : 0.1);
  EXPECT_EQ(h.Update(), std::vector<int>{2});
  h.Observe(2, 0.18);
  EXPECT_TRUE(h.Update().empty());
  EXPECT_TRUE(h.slow(2));
  h.Observe(2, 0.14);
  EXPECT_EQ(h.Update(), std::vector<int>{2});
  EXPECT_FALSE(h.slow(2));
  h.Observe(2, 0.18);
  EXPECT_TRUE(h.Update().empty());
  EXPECT_FALSE(h.slow(2));
}

// Rows held by the slow workers after a shuffle, and the error of the best
// decoding from the fast workers' rows.
double ErrorWithout(const GradientCode& code, const CodeAssignment& a, const std::vector<bool>& slow) {
  std::vector<int> fast_rows;
  for (int w = 0; w < a.n(); ++w) {
    if (!slow[static_cast<size_t>(w)]) fast_rows.push_back(a.row_of(w));
  }
  Decoder decoder(code);
  auto d = decoder.Decode(fast_rows);
  EXPECT_TRUE(d.ok());
  return d.ok() ? d->error : 1.0;
}

TEST(ShufflePolicy, MoreSlowWorkersThanSGetRowsThatLeaveEveryPartitionOnAFastWorker) {
  // Workers 1 and 2 slow, on neighbouring cyclic rows 1 and 2: partition 2
  // is held by slow workers only.
  ASSERT_OK_AND_ASSIGN(GradientCode cyclic, Cyclic(4, 1));
  ShufflePolicy policy(cyclic);
  CodeAssignment a(4);
  const std::vector<bool> slow = {false, true, true, false};
  const double before = ErrorWithout(cyclic, a, slow);
  for (int period = 0; period < 4; ++period) {
    for (int step = 0; step < 10; ++step) policy.ObserveStep(a, slow);
    ShuffleResult next = policy.Next(a, slow);
    ASSERT_TRUE(a.Set(next.rows).ok());
    // The slow workers' rows are two apart: their partitions are disjoint,
    // so every partition has a fast holder.
    std::vector<int> held;
    for (int w : {1, 2}) {
      for (int j : cyclic.Partitions(a.row_of(w))) held.push_back(j);
    }
    std::sort(held.begin(), held.end());
    EXPECT_EQ(held, (std::vector<int>{0, 1, 2, 3})) << "period " << period;
    EXPECT_LT(ErrorWithout(cyclic, a, slow), before - 1e-3) << "period " << period;
  }

  // Fractional repetition, groups {0,1} and {2,3}: two slow workers in one
  // group lose its partitions; one in each group decode exactly.
  auto frc = GradientCode::FractionalRepetition(4, 1);
  ASSERT_TRUE(frc.ok());
  ShufflePolicy frc_policy(*frc);
  CodeAssignment b(4);
  const std::vector<bool> first_group_slow = {true, true, false, false};
  EXPECT_GT(ErrorWithout(*frc, b, first_group_slow), 0.5);
  ShuffleResult next = frc_policy.Next(b, first_group_slow);
  ASSERT_TRUE(b.Set(next.rows).ok());
  EXPECT_NE(b.row_of(0) / 2, b.row_of(1) / 2) << "both slow workers in one group";
  EXPECT_LT(ErrorWithout(*frc, b, first_group_slow), 1e-9);
}

TEST(ShufflePolicy, WithoutStragglersNothingMoves) {
  ASSERT_OK_AND_ASSIGN(GradientCode code, Cyclic(5, 2));
  ShufflePolicy policy(code);
  CodeAssignment a(5);
  ASSERT_TRUE(a.Set({4, 2, 0, 1, 3}).ok());
  ShuffleResult next = policy.Next(a, std::vector<bool>(5, false));
  EXPECT_EQ(next.rows, a.rows());
  EXPECT_EQ(next.partitions_moved, 0);
}

}  // namespace
}  // namespace tenax::coding

// The pace estimate of `tenax bench elastic`: a fault's cost must not depend
// on how fast the machine ran that run, and steps trained twice after a
// restart must count as lost.
#include "step_pace.h"

#include <gtest/gtest.h>

namespace tenax::bench {
namespace {

// Samples every 10 steps from step 10 to `last`, `per_step` seconds a step,
// with `stall` seconds added once after step `stall_after`.
std::vector<StepSample> Marks(double per_step, int64_t last, int64_t stall_after, double stall) {
  std::vector<StepSample> s;
  for (int64_t step = 10; step <= last; step += 10) {
    s.push_back({step, static_cast<double>(step) * per_step + (step > stall_after ? stall : 0.0)});
  }
  return s;
}

TEST(StepPaceTest, AStallIsTheExcessWhateverTheMachinesSpeedThatRun) {
  const auto fast = PaceOf(Marks(0.02, 1170, 390, 1.5));
  const auto slow = PaceOf(Marks(0.023, 1170, 390, 1.5));  // the same run 15% slower
  ASSERT_TRUE(fast.has_value());
  ASSERT_TRUE(slow.has_value());
  EXPECT_NEAR(1.5, fast->excess_seconds, 1e-9);
  EXPECT_NEAR(1.5, slow->excess_seconds, 1e-9);
  EXPECT_EQ(1160, fast->steps);
  EXPECT_NEAR(0.023, slow->median_step_seconds, 1e-12);
  EXPECT_NEAR(1160 * 0.023 + 1.5, slow->loop_seconds, 1e-9);
  EXPECT_EQ(116, fast->blocks);  // 117 samples
  // The walls of the two runs differ by 3.5 s; their costs of the fault do not.
  const auto free = PaceOf(Marks(0.02, 1170, 0, 0.0));
  ASSERT_TRUE(free.has_value());
  EXPECT_NEAR(1.5, slow->excess_seconds - free->excess_seconds, 1e-9);
}

TEST(StepPaceTest, ARestartFromACheckpointCountsItsGapAndTheStepsTrainedTwice) {
  // Killed after step 390 at 39 s; the restarted attempt resumes from the
  // checkpoint of step 350 three seconds later and trains 350..1000 again.
  std::vector<StepSample> s;
  for (int64_t step = 10; step <= 390; step += 10) s.push_back({step, 0.1 * static_cast<double>(step)});
  for (int64_t step = 360; step <= 1000; step += 10) s.push_back({step, 42.0 + 0.1 * static_cast<double>(step - 350)});
  const auto p = PaceOf(s);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(990, p->steps);  // one pass, 10 -> 1000
  EXPECT_NEAR(0.1, p->median_step_seconds, 1e-12);
  EXPECT_NEAR(106.0, p->loop_seconds, 1e-9);
  EXPECT_NEAR(3.0 + 4.0, p->excess_seconds, 1e-9);  // the gap, then 40 steps again
  EXPECT_EQ(38 + 64, p->blocks);  // the block going back is not one
}

TEST(StepPaceTest, SlowerBlocksAfterAFaultAreLostTimeButOneOutlierDoesNotMoveTheMedian) {
  std::vector<StepSample> s;
  double t = 0;
  for (int64_t step = 10; step <= 1000; step += 10) {
    t += step > 500 && step <= 540 ? 1.25 : 1.0;  // four blocks 25% slower
    s.push_back({step, t});
  }
  const auto p = PaceOf(s);
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(0.1, p->median_step_seconds, 1e-12);
  EXPECT_NEAR(4 * 0.25, p->excess_seconds, 1e-9);
}

// A fault that slows every later step moves the median, not the excess: the
// split at the fault's step shows it (the benchmark prints both medians).
TEST(StepPaceTest, TheSplitAtTheFaultShowsASlowdownTheMedianWouldAbsorb) {
  std::vector<StepSample> s;
  double t = 0;
  for (int64_t step = 10; step <= 1200; step += 10) {
    t += step > 400 ? 1.2 : 1.0;  // 20% slower after step 400, for two thirds of the run
    s.push_back({step, t});
  }
  const auto p = PaceOf(s, 400);
  ASSERT_TRUE(p.has_value());
  EXPECT_NEAR(0.12, p->median_step_seconds, 1e-12);  // the median moved with the slowdown
  EXPECT_NEAR(0.10, p->median_step_seconds_before, 1e-12);
  EXPECT_NEAR(0.12, p->median_step_seconds_after, 1e-12);
  const auto unsplit = PaceOf(s);
  ASSERT_TRUE(unsplit.has_value());
  EXPECT_EQ(0.0, unsplit->median_step_seconds_before);
  EXPECT_EQ(0.0, unsplit->median_step_seconds_after);
}

TEST(StepPaceTest, TooFewSamplesOrNoProgressSayNothing) {
  EXPECT_FALSE(PaceOf({}).has_value());
  EXPECT_FALSE(PaceOf({{10, 1.0}, {20, 2.0}}).has_value());               // one block
  EXPECT_FALSE(PaceOf({{10, 1.0}, {20, 2.0}, {10, 3.0}}).has_value());    // ends where it began
  EXPECT_FALSE(PaceOf({{10, 1.0}, {10, 2.0}, {10, 3.0}}).has_value());    // never advanced
  EXPECT_FALSE(PaceOf({{10, 1.0}, {20, 1.0}, {30, 1.0}}).has_value());    // no time passed
}

}  // namespace
}  // namespace tenax::bench

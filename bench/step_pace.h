// What a fault cost a training run, measured against the run's own pace.
//
// Comparing a faulty run's wall with a fault-free run's cannot resolve a loss
// of about a second on a shared 2-core machine: the machine's speed moves by
// 5-10% between runs minutes apart, which is 1-2 s in a 25 s job. The pace
// estimate asks each run alone how long its loop took beyond what its own
// typical step would give:
//
//   excess = loop seconds - nominal steps x median seconds per step,
//
// with the loop and the steps from the first (step, time) sample to the last,
// and the median over the blocks between consecutive samples that advanced.
// A fault's cost is then excess(faulty) - excess(fault-free) of the same
// round: a run slower all along has a slower median, not more excess. Every
// cost of a fault is in the excess: a stall, slower blocks after it (a
// replacement starting beside the members), and steps trained twice (a
// restart from a checkpoint goes back in steps: its blocks do not count as
// advancing, and its time is in the loop while the nominal steps stay those
// of one pass).
//
// What the median cannot see: a fault that slowed every step after it by
// the same amount for over half the run would move the median, not the
// excess. So a faulty run's pace is also split at the fault (the medians
// before and after it), and the benchmark prints both: a faithful
// estimate needs them close.
//
// Header-only and free of tenax's libraries: pure arithmetic, unit-tested in
// bench/step_pace_test.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "median.h"

namespace tenax::bench {

// One progress mark: `step` optimizer steps were done at `seconds` (any
// clock, the same for every sample of a run).
struct StepSample {
  int64_t step = 0;
  double seconds = 0;
};

struct StepPace {
  double loop_seconds = 0;          // last sample's time - first's
  int64_t steps = 0;                // last sample's step - first's (one pass)
  double median_step_seconds = 0;   // over the advancing blocks
  double excess_seconds = 0;        // loop_seconds - steps x median_step_seconds
  int64_t blocks = 0;               // advancing blocks the median was taken over
  // With a split step: the medians of the advancing blocks that end at or
  // before it and of those that start at or after it (0 where none).
  double median_step_seconds_before = 0;
  double median_step_seconds_after = 0;
};

// nullopt when the samples cannot say: fewer than two advancing blocks, or a
// last step not after the first (a run that never progressed). `split_step`
// > 0: also the medians before and after that step (the fault's).
inline std::optional<StepPace> PaceOf(const std::vector<StepSample>& samples, int64_t split_step = 0) {
  if (samples.size() < 3) return std::nullopt;
  std::vector<double> per_step, before, after;
  for (size_t i = 1; i < samples.size(); ++i) {
    const int64_t ds = samples[i].step - samples[i - 1].step;
    const double dt = samples[i].seconds - samples[i - 1].seconds;
    if (ds <= 0 || dt <= 0) continue;
    const double x = dt / static_cast<double>(ds);
    per_step.push_back(x);
    if (split_step > 0 && samples[i].step <= split_step) before.push_back(x);
    if (split_step > 0 && samples[i - 1].step >= split_step) after.push_back(x);
  }
  StepPace p;
  p.steps = samples.back().step - samples.front().step;
  if (per_step.size() < 2 || p.steps <= 0) return std::nullopt;
  p.loop_seconds = samples.back().seconds - samples.front().seconds;
  p.median_step_seconds = Median(per_step);
  p.excess_seconds = p.loop_seconds - static_cast<double>(p.steps) * p.median_step_seconds;
  p.blocks = static_cast<int64_t>(per_step.size());
  p.median_step_seconds_before = Median(before);
  p.median_step_seconds_after = Median(after);
  return p;
}

}  // namespace tenax::bench

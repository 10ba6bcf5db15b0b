// The decoder's bookkeeping for coded training (docs/coded.md): which
// worker computes which row of the code (the assignment, changed by the
// shuffle), which workers are stragglers (from observed arrival times),
// and how much of the data each step used (coverage).
//
// - Assignment: worker w computes row row_of(w) of B, so it reads the data
//   partitions in that row's support. Data partition j always sits in
//   column j: a shuffle permutes rows among workers and so keeps the
//   code's support structure (every partition still on s+1 workers).
// - Shuffle (Johri, Yardi, Bodas, ITW'21): data held by persistently slow
//   workers contributes less (never, when the decoder does without them).
//   Every shuffle period the policy gives the k workers detected as slow
//   the k rows whose loss costs the least: first the smallest error of
//   decoding from the other rows (so that, with more slow workers than s,
//   no partition is held by slow workers only when the code allows it),
//   then the partitions held by slow workers least so far (so that what a
//   slow worker held moves to faster ones); every other worker keeps its
//   row when it can (moving a partition to a worker costs a copy of it).
// - Straggler detection: an exponentially weighted mean of each worker's
//   arrival time (from the step's start to its result, measured also for
//   results that came too late to be used); a worker above slow_factor x
//   the lower median of those means (a fast worker's as long as at most
//   half of the workers are slow) is a straggler, and stops being one below
//   3/4 of that. A worker that has returned nothing for longer than its
//   mean counts that silence as an observation, so one too slow to ever
//   arrive is seen too.
//   The approximate decoder's deadline is a multiple of that reference.
// - Coverage of a step: the share of partitions whose gradient entered the
//   decoded update with weight >= 1/2 (sum_i a_i B[row_i, j]); 1 for any
//   exact decoding.
//
// Pure values, single-threaded (the decoder's thread). No I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/coding/coded_config.h"
#include "tenax/coding/gradient_code.h"

namespace tenax::coding {

// The code of a job's scheme for n workers: cyclic (seeded: every process
// gets the same), frc, or the identity for wait_all and ignore_stragglers.
Result<GradientCode> CodeOfScheme(const CodedConfig& coded, int n, uint64_t seed);

class CodeAssignment {
 public:
  explicit CodeAssignment(int n);  // worker w computes row w
  int n() const { return static_cast<int>(row_of_.size()); }
  int row_of(int worker) const { return row_of_[static_cast<size_t>(worker)]; }
  int worker_of(int row) const;
  const std::vector<int>& rows() const { return row_of_; }
  // InvalidArgument unless `rows` is a permutation of 0..n-1.
  Status Set(std::vector<int> rows);

 private:
  std::vector<int> row_of_;
};

// Per-partition weights of a decoded update: c_j = sum over the decoding's
// workers of a_i B[row_of(worker_i), j].
std::vector<double> PartitionWeights(const GradientCode& code, const CodeAssignment& assignment,
                                     const std::vector<int>& workers, const std::vector<double>& coeffs);
// The share of partitions with weight >= 1/2.
double Coverage(const std::vector<double>& partition_weights);

class StragglerDetector {
 public:
  // `smoothing`: the weight of a new observation in the running mean.
  StragglerDetector(int workers, double slow_factor, double smoothing = 0.2);
  // A worker's result took `seconds` from its step's start (late ones too).
  void Observe(int worker, double seconds);
  // `worker` has returned nothing for `seconds`: counted as an observation
  // when it exceeds its running mean (so a worker too slow to ever arrive
  // is still seen), ignored otherwise.
  void ObserveSilence(int worker, double seconds);
  // Recomputes who is slow (above slow_factor x the reference; fast again
  // below 3/4 of that); returns the workers whose state changed.
  std::vector<int> Update();
  bool slow(int worker) const { return slow_[static_cast<size_t>(worker)]; }
  const std::vector<bool>& slow_workers() const { return slow_; }
  // The lower median of the workers' running mean arrival times: what a
  // typical fast worker takes (0 before anything was observed).
  double ReferenceSeconds() const;
  // The running mean arrival time of `worker` over ReferenceSeconds() (1
  // before anything was observed).
  double Ratio(int worker) const;

 private:
  double slow_factor_, smoothing_;
  std::vector<double> mean_;
  std::vector<bool> seen_, slow_;
};

struct ShuffleResult {
  std::vector<int> rows;          // the new row of each worker
  int64_t partitions_moved = 0;   // (worker, partition) pairs new to their worker
};

class ShufflePolicy {
 public:
  explicit ShufflePolicy(const GradientCode& code);  // `code` must outlive the policy
  // Counts, for every partition, the steps in which a slow worker held it.
  void ObserveStep(const CodeAssignment& assignment, const std::vector<bool>& slow);
  // The next assignment (see the header comment); deterministic.
  ShuffleResult Next(const CodeAssignment& assignment, const std::vector<bool>& slow) const;
  const std::vector<int64_t>& slow_exposure() const { return exposure_; }

 private:
  const GradientCode& code_;
  std::vector<int64_t> exposure_;
};

}  // namespace tenax::coding

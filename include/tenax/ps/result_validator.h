// BOINC's validator for one parameter-server shard: every returned result
// is untrusted input and must pass here before it may reach the model.
// Rejected (with a reason naming what was wrong): a size other than the
// shard's part, a NaN or Inf anywhere, or an update norm far outside the
// running distribution of accepted ones.
//
// The update norm is the L2 norm of what the result would change: for
// kModel results ||W_c - W_server||, for kDelta ||D||, for kGradientSum
// ||G|| — the caller computes it (UpdateNorm below) so the validator does
// not need the model. The running distribution is the median of the last
// `window` accepted norms; after `warmup` accepted results a norm above
// median * norm_factor is rejected ("far outside"). Small norms are never
// rejected (a worker that made little progress does little harm).
//
// Threading: one validator per shard, used from one thread. Pure: no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>

#include "tenax/core/status.h"
#include "tenax/ps/merge_rule.h"

namespace tenax::ps {

struct ValidatorOptions {
  double norm_factor = 10.0;  // > 1
  int warmup = 5;             // accepted results before the norm check applies (>= 1)
  int window = 50;            // accepted norms the median is taken over (>= warmup)
};

// InvalidArgument naming async.norm_factor etc.
Status ValidateValidatorOptions(const ValidatorOptions& options);

// ||result - model|| for kModel, ||result|| otherwise; NaN if any value is
// not finite. Sizes must match for kModel.
double UpdateNorm(ResultKind kind, std::span<const float> result, std::span<const float> model);

class ResultValidator {
 public:
  explicit ResultValidator(ValidatorOptions options = {});

  // OK, or InvalidArgument with the reason ("size 10 != 12 floats",
  // "NaN at index 3", "update norm 1e4 is 250x the median 40 of the last 50").
  // Does not record anything.
  Status Check(std::span<const float> result, size_t expected_size, double update_norm) const;
  // Adds an accepted result's norm to the running distribution.
  void RecordAccepted(double update_norm);

  // The current median (0 before any accepted result) and count, for logs.
  double median() const;
  int64_t accepted() const { return accepted_; }

 private:
  ValidatorOptions options_;
  std::deque<double> recent_;
  int64_t accepted_ = 0;
};

}  // namespace tenax::ps

// How a parameter-server shard folds a returned work-unit result into its
// part of the model (docs/async.md explains the choice of rule). Pure
// arithmetic on float spans: no libtorch, no I/O.
//
// Results come in three kinds, one per rule, produced by the worker from
// the model version it pulled (W_base) and its local training:
//   vc_asgd  kModel        the worker's trained model W_c.
//            W <- a*W + (1-a)*W_c with a = 1 - (1-alpha)*f/(1+s)^p,
//            where s = staleness (server merges since W_base was pulled),
//            f = steps_done/unit_steps (a partial result weighs less),
//            alpha = server weight at s = 0, p = staleness_power.
//   delta    kDelta        D = W_c - W_base.
//            W <- W + f' * D / (1+s)^p   (f' = 1: D already holds only the
//            steps done).
//   asgd     kGradientSum  G = sum of the unit's minibatch gradients, each
//            taken at W_base (no local updates: classic asynchronous SGD).
//            W <- W - lr * G / (1+s)^p.
// Threading: a MergeRule is immutable after construction; Apply may run on
// any thread. Failure: Apply's sizes are the caller's contract (checked by
// the validator first); it asserts them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tenax/core/status.h"

namespace tenax::ps {

enum class ResultKind { kModel, kDelta, kGradientSum };
const char* ToString(ResultKind kind);

struct MergeParams {
  std::string rule = "vc_asgd";  // "vc_asgd" | "delta" | "asgd"
  double alpha = 0.0;            // vc_asgd: [0, 1)
  double staleness_power = 1.0;  // all rules: [0, 4]
  double lr = 0.02;              // asgd: (0, 10]
};

// InvalidArgument naming the key (async.rule, async.alpha,
// async.staleness_power, async.server_lr) and its allowed range.
Status ValidateMergeParams(const MergeParams& params);

struct MergeInput {
  std::span<const float> result;  // the shard's part of the result
  int64_t staleness = 0;          // >= 0
  int64_t steps_done = 0;         // 1..unit_steps
  int64_t unit_steps = 0;         // >= 1
};

class MergeRule {
 public:
  virtual ~MergeRule() = default;
  virtual ResultKind expects() const = 0;
  virtual const char* name() const = 0;
  // The weight the rule gives the result (vc_asgd: 1-a; delta, asgd: the
  // staleness scale) — for logs and the benchmark's report.
  virtual double Weight(const MergeInput& in) const = 0;
  // Folds `in.result` into `model` (same size).
  virtual void Apply(std::span<float> model, const MergeInput& in) const = 0;
};

// InvalidArgument as ValidateMergeParams.
Result<std::unique_ptr<MergeRule>> MakeMergeRule(const MergeParams& params);

}  // namespace tenax::ps

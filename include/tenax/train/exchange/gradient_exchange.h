// The exchange seam of the training loop: how a step's local gradients
// become the update every replica applies. Five modes implement it: local
// (single process), allreduce (sync), allreduce over a changing membership
// (elastic), coded gather from the fastest n-s workers (gradient coding) and
// push/pull to parameter-server shards (async VC-ASGD).
//
// One concern per interface; a mode implements the ones it needs and hands
// them out through GradientExchange's accessors (nullptr: the behaviour
// stated here, which the loop supplies):
//   GradientExchange     reducing gradients and scalars; every mode.
//   ExchangeMembership   membership and the batch slice (elastic, async).
//                        Without it: a fixed group, a global batch of
//                        batch_size x world, slice r for rank r, no state
//                        to hand a joiner, and a stop signal is the loop's.
//                        With it, a stop signal is the exchange's: the
//                        replica leaves at a step boundary (Cancelled from
//                        AtStepBoundary once it has).
//   SampleChoice         the samples of a step and their weights (coded).
//                        Without it: the loop's sampler and the mean loss.
//   ModelElsewhere       where updates are applied and the job's model
//                        lives (coded: the decoder; async: the shards).
//                        Without it: the loop's optimizer applies every
//                        update, the local model is the job's, evaluated
//                        at every epoch's end, and the job ends at its
//                        last step. With it, epochs are not evaluated
//                        locally (the local model is not the job's).
//
// Contract (the loop calls, per run):
//   Attach(model)           once, before the optimizer is built. May replace
//                           the initial parameters (a broadcast from rank 0)
//                           and may point the parameters' .grad at its own
//                           memory (zero-copy allreduce buffers).
//   per step: AtStepBoundary(applied) -> [read the step's samples] ->
//             BeginStep() -> forward/backward -> FinishStep()
//                           AtStepBoundary may re-form the group (elastic),
//                           sync with the shards (async) or load the
//                           decoder's model (coded). BeginStep zeroes the
//                           gradients. Gradient hooks installed by Attach
//                           may start communication while backward runs;
//                           FinishStep returns once every parameter's .grad
//                           holds the update to apply (the average over
//                           replicas for data parallelism).
//   MeanOverReplicas / SumOverReplicas
//                           collective reductions of scalars (loss at log
//                           points, correct counts at evaluation). Every
//                           replica calls them at the same points.
//   Detach()                before the model is saved: .grad no longer
//                           aliases exchange memory.
// Aborted from FinishStep or the reductions: the membership changed during
// the call and the step was not applied; the loop goes back to the step
// boundary and continues from what AtStepBoundary returns.
// Threading: one thread of control (the training thread) calls everything;
// hooks run on it too (libtorch runs CPU backward on the calling thread).
// Failure: a lost or hung peer, a missed deadline or an interrupt returns a
// typed error naming the rank (PeerLost, DeadlineExceeded, Cancelled); the
// loop stops and returns it. After an error the exchange is unusable.
// Ownership: the exchange does not own the model; the model outlives it.
// The concern interfaces a mode hands out live as long as the exchange.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tenax/core/status.h"
#include "tenax/train/trainable_model.h"

namespace tenax {

class ExchangeMembership;
class SampleChoice;
class ModelElsewhere;

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;

  // Where this replica sits now (a membership may move it at a step boundary).
  virtual int rank() const = 0;
  virtual int world() const = 0;

  virtual Status Attach(TrainableModel& model) = 0;
  // Called at every step boundary, before the step's data is read, with
  // the steps this replica has applied; returns the steps applied after
  // it (a joiner learns where the others are; a replica that missed the
  // interrupted step copies it from one that did).
  virtual Result<int64_t> AtStepBoundary(int64_t applied_steps) { return applied_steps; }
  virtual void BeginStep() = 0;
  virtual Status FinishStep() = 0;
  virtual Result<double> MeanOverReplicas(double local) = 0;
  virtual Result<double> SumOverReplicas(double local) = 0;
  virtual void Detach() = 0;

  // Facts for summary.json (e.g. "workers") and the start-up log line.
  virtual void DescribeInSummary(nlohmann::json& summary) const = 0;
  virtual std::string Describe() const = 0;

  // The concerns this mode has (see the top of this file); nullptr: none.
  virtual ExchangeMembership* membership() { return nullptr; }
  virtual SampleChoice* sample_choice() { return nullptr; }
  virtual ModelElsewhere* model_elsewhere() { return nullptr; }
  const ExchangeMembership* membership() const { return const_cast<GradientExchange*>(this)->membership(); }
};

// This replica's part [offset, offset + count) of a global batch.
struct BatchSlice {
  int64_t offset = 0, count = 0;
};

// Membership that changes while training, and the batch slice.
class ExchangeMembership {
 public:
  virtual ~ExchangeMembership() = default;
  // Samples per global batch for `batch_size` per replica as configured.
  virtual int64_t GlobalBatch(int64_t batch_size) const = 0;
  virtual BatchSlice SliceOf(int64_t global_batch) const = 0;
  // The optimizer whose state travels with the model (elastic joiners);
  // called once after Attach.
  virtual Status AttachOptimizer(torch::optim::Optimizer& optimizer) {
    (void)optimizer;
    return Status::Ok();
  }
};

// The samples of a step, chosen by the exchange (coded: fixed data
// partitions, each weighted by the code).
class SampleChoice {
 public:
  struct WeightedSamples {
    torch::Tensor indices;  // int64 [k]: training samples to read
    torch::Tensor weights;  // float32 [k]: the loss is sum_k weights[k] * loss_k
  };
  virtual ~SampleChoice() = default;
  // Called after AtStepBoundary with the step about to be computed;
  // nullopt: the loop's own sampler for this step.
  virtual std::optional<WeightedSamples> SamplesOf(int64_t global_step, int64_t batch_size) = 0;
};

// The job's model lives elsewhere (coded: the decoder; async: the shards).
class ModelElsewhere {
 public:
  virtual ~ModelElsewhere() = default;
  // False when the step's update is applied elsewhere (coded: by the
  // decoder, whose model the next AtStepBoundary loads): the loop then
  // skips its optimizer's step.
  virtual bool AppliesUpdatesLocally() const { return true; }
  // True when the job ended before the loop's last step (coded: the
  // decoder's time budget, coded.max_seconds); checked after AtStepBoundary.
  virtual bool Finished() const { return false; }
  // Called once after the last step: loads the job's final model into the
  // parameters (async: pulled from the shards); true when it did, and the
  // loop then evaluates that model on the whole test set on rank 0 before
  // writing the outputs.
  virtual Result<bool> LoadFinalModel() = 0;
};

// What the loop does with an exchange, the defaults above applied.
inline int64_t GlobalBatchOf(const GradientExchange& x, int64_t batch_size) {
  const ExchangeMembership* m = x.membership();
  return m ? m->GlobalBatch(batch_size) : batch_size * x.world();
}
inline BatchSlice ReplicaSlice(const GradientExchange& x, int64_t global_batch) {
  if (const ExchangeMembership* m = x.membership()) return m->SliceOf(global_batch);
  const int64_t b = global_batch / x.world();
  return {x.rank() * b, b};
}

}  // namespace tenax

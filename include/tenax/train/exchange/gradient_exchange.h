// The exchange seam of the training loop: how a step's local gradients
// become the update every replica applies. Five modes implement it: local
// (single process), allreduce (sync), allreduce over a changing membership
// (elastic), coded gather from the fastest n-s workers (gradient coding) and
// push/pull to parameter-server shards (async VC-ASGD). The functions below
// the core contract come in four groups, each with defaults that describe a
// fixed membership, the loop's own sampler, local updates and a local
// model, so a mode overrides only the groups it needs (issue 28 asks for
// them to become separate small interfaces; not done yet).
//
// Contract (the loop calls, per run):
//   Attach(model)           once, before the optimizer is built. May replace
//                           the initial parameters (a broadcast from rank 0)
//                           and may point the parameters' .grad at its own
//                           memory (zero-copy allreduce buffers).
//   per step: BeginStep() -> forward/backward -> FinishStep()
//                           BeginStep zeroes the gradients. Gradient hooks
//                           installed by Attach may start communication while
//                           backward runs; FinishStep returns once every
//                           parameter's .grad holds the update to apply (the
//                           average over replicas for data parallelism).
//   MeanOverReplicas / SumOverReplicas
//                           collective reductions of scalars (loss at log
//                           points, correct counts at evaluation). Every
//                           replica calls them at the same points.
//   Detach()                before the model is saved: .grad no longer
//                           aliases exchange memory.
// Threading: one thread of control (the training thread) calls everything;
// hooks run on it too (libtorch runs CPU backward on the calling thread).
// Failure: a lost or hung peer, a missed deadline or an interrupt returns a
// typed error naming the rank (PeerLost, DeadlineExceeded, Cancelled); the
// loop stops and returns it. After an error the exchange is unusable.
// Ownership: the exchange does not own the model; the model outlives it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tenax/core/status.h"
#include "tenax/train/trainable_model.h"

namespace tenax {

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;

  // Where this replica sits. The sampler gives rank r slice r of every global
  // batch of world x batch_size samples.
  virtual int rank() const = 0;
  virtual int world() const = 0;

  virtual Status Attach(TrainableModel& model) = 0;
  virtual void BeginStep() = 0;
  virtual Status FinishStep() = 0;
  virtual Result<double> MeanOverReplicas(double local) = 0;
  virtual Result<double> SumOverReplicas(double local) = 0;
  virtual void Detach() = 0;

  // --- Membership that changes while training (elastic); the defaults
  // describe a fixed membership. ---
  // Samples per global batch for `batch_size` per replica as configured.
  virtual int64_t GlobalBatch(int64_t batch_size) const { return batch_size * world(); }
  // This replica's part [offset, offset + count) of a global batch.
  struct Slice {
    int64_t offset = 0, count = 0;
  };
  virtual Slice SliceOf(int64_t global_batch) const {
    const int64_t b = global_batch / world();
    return {rank() * b, b};
  }
  // Called at every step boundary, before the step's data is read, with
  // the steps this replica has applied; returns the steps applied after
  // it. An elastic exchange may re-form its group here and change rank(),
  // world() and the count (a joiner learns where the others are; a
  // replica that missed the interrupted step copies it from one that did).
  virtual Result<int64_t> AtStepBoundary(int64_t applied_steps) { return applied_steps; }
  // Aborted from FinishStep or the reductions: the membership changed
  // during the call and the step was not applied; go back to the step
  // boundary (AtStepBoundary) and continue from what it returns.
  // True when a stop signal is the exchange's to act on (elastic: the
  // replica leaves the group at a step boundary, Cancelled from
  // AtStepBoundary once it has) rather than the loop's.
  virtual bool HandlesStop() const { return false; }
  // The optimizer whose state travels with the model (elastic joiners);
  // called once after Attach.
  virtual Status AttachOptimizer(torch::optim::Optimizer& optimizer) {
    (void)optimizer;
    return Status::Ok();
  }

  // --- Samples the exchange chooses (coded: fixed data partitions, each
  // weighted by the code). ---
  struct WeightedSamples {
    torch::Tensor indices;  // int64 [k]: training samples to read
    torch::Tensor weights;  // float32 [k]: the loss is sum_k weights[k] * loss_k
  };
  // nullopt: the loop's own sampler (SliceOf) and the mean loss. Called
  // after AtStepBoundary with the step about to be computed.
  virtual std::optional<WeightedSamples> SamplesOf(int64_t global_step, int64_t batch_size) {
    (void)global_step, (void)batch_size;
    return std::nullopt;
  }
  // False when the step's update is applied elsewhere (coded: by the
  // decoder, whose model the next AtStepBoundary loads): the loop then
  // skips its optimizer's step.
  virtual bool AppliesUpdatesLocally() const { return true; }
  // True when the job ended before the loop's last step (coded: the
  // decoder's time budget, coded.max_seconds); checked after AtStepBoundary.
  virtual bool Finished() const { return false; }

  // --- Models that live elsewhere (async: on parameter-server shards). ---
  // Whether the loop evaluates the local model at every epoch's end (async
  // workers' local models are not the job's model: no).
  virtual bool EvaluatesEpochs() const { return true; }
  // Called once after the last step: the exchange may load the job's final
  // model into the parameters (async: pulled from the shards); true when it
  // did, and the loop then evaluates that model on the whole test set on
  // rank 0 before writing the outputs.
  virtual Result<bool> LoadFinalModel() { return false; }

  // Facts for summary.json (e.g. "workers") and the start-up log line.
  virtual void DescribeInSummary(nlohmann::json& summary) const = 0;
  virtual std::string Describe() const = 0;
};

}  // namespace tenax

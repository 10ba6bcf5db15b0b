// The bucketed allreduce exchange, shared by the fixed-membership exchange
// (allreduce_exchange.cc) and the elastic one (elastic_exchange.cc), which
// derives from it. Internal to src/train; the contracts are in
// include/tenax/train/exchange/allreduce_exchange.h.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "tenax/comm/allreduce.h"
#include "allreduce_exchange.h"
#include "tenax/train/device.h"

namespace tenax::train_internal {

// The allreduce buffer holds every parameter's gradient, then (elastic)
// control floats that ride with the last bucket and are never scaled (the
// membership flag, then each member's measured seconds per sample), then
// one scalar slot for reductions of loss and correct counts.
struct GradientLayout {
  struct Slot {
    torch::Tensor param;
    size_t offset = 0, count = 0;
    size_t bucket = 0;
  };
  std::vector<Slot> slots;  // in reverse registration order
  struct Bucket {
    size_t offset = 0, count = 0, params = 0;
  };
  std::vector<Bucket> buckets;
  size_t params_count = 0;  // floats of all gradients
  size_t flag_slot = 0;      // == params_count: the first control float
  size_t control_count = 0;  // control floats after the gradients
  size_t scalar_slot = 0, total = 0;
};

GradientLayout PlanGradients(const std::vector<torch::Tensor>& params, size_t bucket_bytes, size_t control_floats);

class AllreduceExchange : public GradientExchange {
 public:
  AllreduceExchange(comm::Group* group, AllreduceExchangeOptions options) : group_(group), options_(std::move(options)) {}
  ~AllreduceExchange() override { Detach(); }

  int rank() const override { return group_->rank(); }
  int world() const override { return group_->world(); }
  Status Attach(TrainableModel& model) override;
  void BeginStep() override;
  Status FinishStep() override;
  Result<double> MeanOverReplicas(double local) override;
  Result<double> SumOverReplicas(double local) override { return Reduce(local, 1.0f); }
  void Detach() override;
  void DescribeInSummary(nlohmann::json& summary) const override;
  std::string Describe() const override;

 protected:
  Deadline StepDeadline() const { return Deadline::After(options_.step_timeout); }
  // Plans the buffer, creates the allreduce over group_ and makes the
  // gradients views of it; with `broadcast`, rank 0's parameters first.
  // `control_floats` ride after the gradients (GradientLayout).
  // Prepare + Rebind (+ BroadcastFromRankZero).
  Status Setup(TrainableModel& model, bool broadcast, size_t control_floats);
  // Once per model, whatever the group: checks the parameters, plans the
  // buffer (layout_), the staging and the gradient hooks. No collective
  // yet: nothing here talks to a peer, so nothing here fails for one.
  Status Prepare(TrainableModel& model, size_t control_floats);
  // A new allreduce over group_ (the first, or a re-formed one), the
  // gradients views of it. Fails (PeerLost, DeadlineExceeded) when a member
  // sends no offer; allreduce_ and buffer_ are then null and the caller may
  // Rebind again over another group.
  Status Rebind();
  // Rank 0's parameters to every member (needs a bound allreduce).
  Status BroadcastFromRankZero();
  // A GPU's staged sums land in buffer_: page-locked while it lives
  // (buffer_pin_); unpinned, after the copies reading it, before the
  // allreduce owning it goes.
  void PinBuffer();
  void UnpinBuffer();
  // Multiplier of this rank's gradients before the sum (1/W: the mean).
  virtual float LocalScale() const { return 1.0f / static_cast<float>(world()); }
  Result<double> Reduce(double local, float scale);

  comm::Group* group_;
  AllreduceExchangeOptions options_;
  GradientLayout layout_;
  std::unique_ptr<comm::SumCollective> allreduce_;
  // The flat ring, or the hierarchical allreduce when options_.zones says so.
  Result<std::unique_ptr<comm::SumCollective>> CreateSum(size_t count);
  float* buffer_ = nullptr;
  bool prescale_ = false;  // LocalScale differs between ranks: scale before the sum

 private:
  void LaunchReady(bool all);
  void PointGradients();
  // A bucket whose parameters all got their gradient: ready to start.
  bool BucketReady(size_t bucket) const;
  // Staging: copies bucket `bucket` of grads_ into staging_ (on the copy
  // stream for a GPU; at once on the CPU) and marks it ready.
  void StageOut(size_t bucket);
  // Staging: copies the results of the buckets completed so far back
  // into grads_ (on the current stream: the optimizer's kernels follow).
  Status TakeResults();
  Status FinishStagedStep();

  std::vector<size_t> pending_;
  size_t next_bucket_ = 0;
  Status hook_status_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;

  // Staging (a model on a GPU, or options_.stage_gradients): the gradients
  // live in grads_ on the model's device; each complete bucket is copied
  // into staging_ (page-locked host memory for a GPU), its allreduce reads
  // it there (comm::Allreduce::Start's input) and writes the sum into
  // buffer_, from where it is copied back into grads_. Debian's UCX has no
  // CUDA transport, so device memory never goes to the transport itself.
  bool staged_ = false;
  // The hooks run on the training thread (CPU backward) and may start
  // transfers; on a GPU they run on autograd's device thread and only
  // enqueue copies, which the training thread starts in FinishStep.
  bool hooks_start_transfers_ = true;
  torch::Device device_{torch::kCPU};
  torch::Tensor grads_;    // [params_count] on device_
  torch::Tensor staging_;  // [total] on the host
  // A GPU's: buffer_ (the transport's memory, where the sums land) made
  // page-locked, so that each sum's copy back to the device is
  // asynchronous (pageable memory would synchronise the stream first).
  // Released, after the pending copies, before the allreduce that owns
  // the memory goes (UnpinBuffer).
  HostPin buffer_pin_;
  bool sums_page_locked_ = false;  // the last PinBuffer succeeded (for the summary)
  std::optional<c10::Stream> copy_stream_;
  std::vector<DeviceMarker> copied_;                // per bucket: its copy into staging_
  std::unique_ptr<std::atomic<bool>[]> staged_out_;  // per bucket: copy enqueued (hook thread -> training thread)
  uint64_t completed_before_step_ = 0;               // the allreduce's completed segments at BeginStep
  size_t results_in_ = 0;                            // buckets copied back into grads_ this step
  double staging_wait_seconds_ = 0;                  // after backward, until the last copy had landed
  int64_t staged_steps_ = 0;
};

}  // namespace tenax::train_internal

#include "allreduce_exchange.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "allreduce_exchange_impl.h"
#include "tenax/comm/hierarchical_allreduce.h"

namespace tenax {
namespace train_internal {

GradientLayout PlanGradients(const std::vector<torch::Tensor>& params, size_t bucket_bytes, size_t control_floats) {
  GradientLayout g;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    GradientLayout::Slot s;
    s.param = *it;
    s.offset = g.params_count;
    s.count = static_cast<size_t>(it->numel());
    g.params_count += s.count;
    if (g.buckets.empty() || g.buckets.back().count * sizeof(float) >= bucket_bytes) {
      g.buckets.push_back({s.offset, 0, 0});
    }
    g.buckets.back().count += s.count;
    g.buckets.back().params += 1;
    s.bucket = g.buckets.size() - 1;
    g.slots.push_back(s);
  }
  g.flag_slot = g.params_count;
  g.control_count = control_floats;
  g.buckets.back().count += control_floats;  // the control floats ride with the last bucket
  g.scalar_slot = g.params_count + control_floats;
  g.total = g.scalar_slot + 1;
  return g;
}

Status AllreduceExchange::Attach(TrainableModel& model) { return Setup(model, true, 0); }

Result<std::unique_ptr<comm::SumCollective>> AllreduceExchange::CreateSum(size_t count) {
  if (!options_.hierarchical) {
    TENAX_ASSIGN_OR_RETURN(auto flat, comm::Allreduce::Create(*group_, count, StepDeadline()));
    return std::unique_ptr<comm::SumCollective>(std::move(flat));
  }
  TENAX_ASSIGN_OR_RETURN(auto h, comm::HierarchicalAllreduce::Create(*group_, options_.zones, count, StepDeadline()));
  return std::unique_ptr<comm::SumCollective>(std::move(h));
}

Status AllreduceExchange::Setup(TrainableModel& model, bool broadcast, size_t control_floats) {
  TENAX_RETURN_IF_ERROR(Prepare(model, control_floats));
  TENAX_RETURN_IF_ERROR(Rebind());
  if (broadcast) TENAX_RETURN_IF_ERROR(BroadcastFromRankZero());
  return Status::Ok();
}

Status AllreduceExchange::Prepare(TrainableModel& model, size_t control_floats) {
  const auto params = model.Parameters();
  for (const auto& p : params) {
    if (p.scalar_type() != torch::kFloat32 || !p.is_contiguous()) {
      return InvalidArgument("synchronous training needs contiguous float32 parameters, got one of " +
                             std::string(c10::toString(p.scalar_type())));
    }
    if (p.device() != params.front().device()) {
      return InvalidArgument("synchronous training needs every parameter on one device, got " +
                             params.front().device().str() + " and " + p.device().str());
    }
  }
  device_ = params.front().device();
  staged_ = options_.stage_gradients || !device_.is_cpu();
  hooks_start_transfers_ = device_.is_cpu();
  const size_t bucket_bytes =
      options_.bucket_bytes > 0 ? options_.bucket_bytes : device_.is_cuda() ? kGpuBucketBytes : kCpuBucketBytes;
  layout_ = PlanGradients(params, bucket_bytes, control_floats);
  if (staged_) {
    grads_ = torch::zeros({static_cast<int64_t>(layout_.params_count)},
                          torch::TensorOptions().dtype(torch::kFloat32).device(device_));
    staging_ = HostStaging(device_, static_cast<int64_t>(layout_.total));
    copy_stream_ = CopyStream(device_);
    copied_ = std::vector<DeviceMarker>(layout_.buckets.size());
    staged_out_ = std::make_unique<std::atomic<bool>[]>(layout_.buckets.size());
  }
  pending_.assign(layout_.buckets.size(), 0);
  for (auto& s : layout_.slots) {
    auto acc = torch::autograd::impl::grad_accumulator(s.param);
    const size_t bucket = s.bucket;
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, bucket](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          if (pending_[bucket] > 0 && --pending_[bucket] == 0) {
            if (staged_) StageOut(bucket);
            if (hooks_start_transfers_) LaunchReady(false);
          }
          return outputs;
        }));
    accumulators_.push_back(std::move(acc));
  }
  return Status::Ok();
}

// The initial model is rank 0's: broadcast as a sum where the others
// contribute zeros (x + 0 == x exactly).
Status AllreduceExchange::BroadcastFromRankZero() {
  torch::NoGradGuard no_grad;
  std::memset(buffer_, 0, layout_.params_count * sizeof(float));
  auto host_view = [&](const GradientLayout::Slot& s) {
    return torch::from_blob(buffer_ + s.offset, s.param.sizes(), torch::kFloat32);
  };
  if (rank() == 0) {
    for (auto& s : layout_.slots) host_view(s).copy_(s.param);
  }
  TENAX_RETURN_IF_ERROR(allreduce_->Run(0, layout_.params_count, 1.0f, StepDeadline()));
  for (auto& s : layout_.slots) s.param.copy_(host_view(s));
  return Status::Ok();
}

// Gradients live in the allreduce buffer (or, staged, in grads_);
// autograd accumulates into them.
void AllreduceExchange::PointGradients() {
  for (auto& s : layout_.slots) {
    s.param.mutable_grad() = staged_ ? grads_.narrow(0, static_cast<int64_t>(s.offset), static_cast<int64_t>(s.count))
                                           .view(s.param.sizes())
                                     : torch::from_blob(buffer_ + s.offset, s.param.sizes(), torch::kFloat32);
  }
}

void AllreduceExchange::PinBuffer() {
  if (!device_.is_cuda()) return;
  buffer_pin_ = HostPin(device_, buffer_, layout_.total * sizeof(float));
  sums_page_locked_ = buffer_pin_.active();
  if (!buffer_pin_.active()) {
    spdlog::warn("rank {}: the allreduce buffer could not be page-locked ({}); each sum goes back to the GPU "
                 "through the driver's bounce buffer, synchronously",
                 rank(), buffer_pin_.error());
  }
}

void AllreduceExchange::UnpinBuffer() {
  if (!buffer_pin_.active()) return;
  DeviceMarker copies;  // the sums' copies back to the device read the buffer until done
  copies.Record(device_);
  copies.Wait();
  buffer_pin_ = HostPin();
}

Status AllreduceExchange::Rebind() {
  UnpinBuffer();
  allreduce_.reset();  // its regions stay registered for peers still holding their keys (net::MemoryRegion)
  buffer_ = nullptr;
  TENAX_ASSIGN_OR_RETURN(allreduce_, CreateSum(layout_.total));
  allreduce_->SetInterrupt(options_.interrupt);
  buffer_ = allreduce_->data();
  PinBuffer();
  PointGradients();
  return Status::Ok();
}

void AllreduceExchange::BeginStep() {
  for (size_t i = 0; i < pending_.size(); ++i) pending_[i] = layout_.buckets[i].params;
  next_bucket_ = 0;
  hook_status_ = Status::Ok();
  if (!staged_) {
    std::memset(buffer_, 0, layout_.params_count * sizeof(float));  // zero_grad, in the buffer
    return;
  }
  grads_.zero_();  // on the device's current stream, before backward's kernels
  for (size_t i = 0; i < layout_.buckets.size(); ++i) staged_out_[i].store(false, std::memory_order_relaxed);
  results_in_ = 0;
  auto polled = allreduce_->Poll();  // every earlier segment is complete: this step counts from here
  if (polled.ok()) completed_before_step_ = *polled;
  else hook_status_ = polled.status();
}

Status AllreduceExchange::FinishStep() {
  if (staged_) return FinishStagedStep();
  LaunchReady(true);  // buckets whose parameters got no gradient
  TENAX_RETURN_IF_ERROR(hook_status_);
  return allreduce_->Wait(StepDeadline());
}

bool AllreduceExchange::BucketReady(size_t bucket) const {
  if (!staged_) return pending_[bucket] == 0;
  return staged_out_[bucket].load(std::memory_order_acquire) && copied_[bucket].Done();
}

void AllreduceExchange::StageOut(size_t bucket) {
  const auto& bk = layout_.buckets[bucket];
  const int64_t grads = static_cast<int64_t>(std::min(bk.offset + bk.count, layout_.params_count) - bk.offset);
  const torch::Tensor from = grads_.narrow(0, static_cast<int64_t>(bk.offset), grads);
  torch::Tensor to = staging_.narrow(0, static_cast<int64_t>(bk.offset), grads);
  if (copy_stream_) {
    // Backward has enqueued this bucket's last kernel on the current
    // stream; the copy stream starts after it, the host does not wait.
    DeviceMarker produced;
    produced.Record(device_);
    produced.MakeStreamWait(*copy_stream_);
  }
  CopyOnStream(copy_stream_, from, to);
  if (copy_stream_) copied_[bucket].Record(*copy_stream_);
  staged_out_[bucket].store(true, std::memory_order_release);
}

Status AllreduceExchange::TakeResults() {
  TENAX_ASSIGN_OR_RETURN(uint64_t completed, allreduce_->Poll());
  const size_t done = std::min(static_cast<size_t>(completed - completed_before_step_), next_bucket_);
  for (; results_in_ < done; ++results_in_) {
    const auto& bk = layout_.buckets[results_in_];
    const int64_t grads = static_cast<int64_t>(std::min(bk.offset + bk.count, layout_.params_count) - bk.offset);
    torch::Tensor to = grads_.narrow(0, static_cast<int64_t>(bk.offset), grads);
    const torch::Tensor from = torch::from_blob(buffer_ + bk.offset, {grads}, torch::kFloat32);
    torch::NoGradGuard no_grad;
    // On the current stream: the optimizer's kernels come after it. From
    // page-locked memory (buffer_pin_) the host does not wait; the buffer
    // is next written by this step's successor's sums, which start only
    // after backward's kernels, queued behind this copy.
    to.copy_(from, /*non_blocking=*/true);
  }
  return Status::Ok();
}

// The training thread after backward: buckets whose parameters got no
// gradient are staged as they are (zeros); then each bucket starts as its
// copy lands, in bucket order (the same on every rank), and each sum goes
// back to the device as it completes.
Status AllreduceExchange::FinishStagedStep() {
  TENAX_RETURN_IF_ERROR(hook_status_);
  for (size_t b = 0; b < layout_.buckets.size(); ++b) {
    if (!staged_out_[b].load(std::memory_order_acquire)) StageOut(b);
  }
  const Deadline deadline = StepDeadline();
  const auto wait_start = SteadyClock::now();
  while (next_bucket_ < layout_.buckets.size()) {
    const size_t before = next_bucket_;
    LaunchReady(false);
    TENAX_RETURN_IF_ERROR(hook_status_);
    TENAX_RETURN_IF_ERROR(TakeResults());
    if (next_bucket_ == before) {
      if (deadline.Expired()) {
        return DeadlineExceeded("rank " + std::to_string(rank()) + ": the device's copy of gradient bucket " +
                                std::to_string(next_bucket_) + " did not land before the step deadline");
      }
      std::this_thread::yield();
    }
  }
  staging_wait_seconds_ += std::chrono::duration<double>(SteadyClock::now() - wait_start).count();
  ++staged_steps_;
  TENAX_RETURN_IF_ERROR(allreduce_->Wait(deadline));
  return TakeResults();
}

Result<double> AllreduceExchange::MeanOverReplicas(double local) {
  return Reduce(local, 1.0f / static_cast<float>(world()));
}

void AllreduceExchange::Detach() {
  // The parameters keep their values; .grad no longer aliases the buffer
  // (a saved model holds parameters, and the buffer dies with us).
  for (auto& s : layout_.slots) s.param.mutable_grad() = torch::Tensor();
  accumulators_.clear();
  UnpinBuffer();
}

void AllreduceExchange::DescribeInSummary(nlohmann::json& summary) const {
  summary["workers"] = world();
  summary["gradient_staging"] = staged_;
  if (allreduce_) {
    // This rank's bytes into its peers' memory by link class (zones known),
    // else in all.
    nlohmann::json a{{"algorithm", allreduce_->algorithm()}};
    uint64_t same = 0, cross = 0;
    for (int r = 0; r < world(); ++r) {
      if (r == rank()) continue;
      const uint64_t b = allreduce_->bytes_sent_to(r);
      const bool known = options_.zones.size() == static_cast<size_t>(world());
      (known && options_.zones[static_cast<size_t>(r)] != options_.zones[static_cast<size_t>(rank())] ? cross : same) += b;
    }
    if (options_.zones.size() == static_cast<size_t>(world())) {
      a["rank_bytes_sent"] = {{"same_zone", same}, {"cross_zone", cross}};
    } else {
      a["rank_bytes_sent"] = {{"all", same}};
    }
    summary["allreduce"] = a;
  }
  if (staged_ && staged_steps_ > 0) {
    // Bytes through host memory per step (each gradient out, its sum back)
    // and the host's wait, after backward, for the copies to land.
    summary["staging"] = {{"bytes_per_step", 2 * layout_.params_count * sizeof(float)},
                          {"wait_ms_per_step", 1e3 * staging_wait_seconds_ / static_cast<double>(staged_steps_)},
                          {"buckets", layout_.buckets.size()},
                          {"sums_page_locked", sums_page_locked_}};
  }
  summary["global_batch_size"] = GlobalBatchOf(*this, summary.value("batch_size", int64_t{0}));
}

std::string AllreduceExchange::Describe() const {
  return "rank " + std::to_string(rank()) + "/" + std::to_string(world()) + " (allreduce of " +
         std::to_string(layout_.params_count) + " gradients in " + std::to_string(layout_.buckets.size()) +
         " buckets)";
}

// Starts, in bucket order (the same on every rank), each bucket whose
// parameters are all accumulated (or every remaining one with `all`). With
// prescale_ (elastic) the gradients are scaled here, before the sum, so
// that ranks with different shares of the batch weigh their gradients by
// it; the control floats are not scaled.
void AllreduceExchange::LaunchReady(bool all) {
  const float scale = LocalScale();
  while (next_bucket_ < layout_.buckets.size() && (all || BucketReady(next_bucket_))) {
    const auto& bk = layout_.buckets[next_bucket_++];
    if (!hook_status_.ok()) continue;
    // The bucket's values: in the buffer, or (staged) in the staging
    // memory, where the control floats of the last bucket are copied too.
    float* values = buffer_;
    if (staged_) {
      values = staging_.data_ptr<float>();
      const size_t end = bk.offset + bk.count;
      if (end > layout_.params_count) {
        std::memcpy(values + layout_.params_count, buffer_ + layout_.params_count,
                    (end - layout_.params_count) * sizeof(float));
      }
    }
    const float* input = staged_ ? values + bk.offset : nullptr;
    if (!prescale_) {  // the same scale everywhere: applied by the allreduce, after the sum
      hook_status_ = allreduce_->Start(bk.offset, bk.count, scale, input);
      continue;
    }
    const size_t grads = std::min(bk.offset + bk.count, layout_.params_count) - bk.offset;
    for (size_t i = 0; i < grads; ++i) values[bk.offset + i] *= scale;
    hook_status_ = allreduce_->Start(bk.offset, bk.count, 1.0f, input);
  }
  if (hook_status_.ok()) {
    auto polled = allreduce_->Poll();
    if (!polled.ok()) hook_status_ = polled.status();
  }
}

Result<double> AllreduceExchange::Reduce(double local, float scale) {
  buffer_[layout_.scalar_slot] = static_cast<float>(local);
  TENAX_RETURN_IF_ERROR(allreduce_->Run(layout_.scalar_slot, 1, scale, StepDeadline()));
  return static_cast<double>(buffer_[layout_.scalar_slot]);
}

}  // namespace train_internal

std::unique_ptr<GradientExchange> MakeAllreduceExchange(comm::Group& group, const AllreduceExchangeOptions& options) {
  return std::make_unique<train_internal::AllreduceExchange>(&group, options);
}

}  // namespace tenax

#include "allreduce_exchange.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>

#include "allreduce_exchange_impl.h"

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

Status AllreduceExchange::Setup(TrainableModel& model, bool broadcast, size_t control_floats) {
  for (const auto& p : model.Parameters()) {
    if (p.scalar_type() != torch::kFloat32 || !p.is_contiguous()) {
      return InvalidArgument("synchronous training needs contiguous float32 parameters, got one of " +
                             std::string(c10::toString(p.scalar_type())));
    }
  }
  layout_ = PlanGradients(model.Parameters(), options_.bucket_bytes, control_floats);
  TENAX_ASSIGN_OR_RETURN(allreduce_, comm::Allreduce::Create(*group_, layout_.total, StepDeadline()));
  allreduce_->SetInterrupt(options_.interrupt);
  buffer_ = allreduce_->data();

  if (broadcast) {
    // The initial model is rank 0's: broadcast as a sum where the others
    // contribute zeros (x + 0 == x exactly).
    torch::NoGradGuard no_grad;
    std::memset(buffer_, 0, layout_.params_count * sizeof(float));
    if (rank() == 0) {
      for (auto& s : layout_.slots) {
        std::memcpy(buffer_ + s.offset, s.param.data_ptr<float>(), s.count * sizeof(float));
      }
    }
    TENAX_RETURN_IF_ERROR(allreduce_->Run(0, layout_.params_count, 1.0f, StepDeadline()));
    for (auto& s : layout_.slots) {
      s.param.copy_(torch::from_blob(buffer_ + s.offset, s.param.sizes(), torch::kFloat32));
    }
  }
  PointGradients();
  pending_.assign(layout_.buckets.size(), 0);
  for (auto& s : layout_.slots) {
    auto acc = torch::autograd::impl::grad_accumulator(s.param);
    const size_t bucket = s.bucket;
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, bucket](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          if (pending_[bucket] > 0 && --pending_[bucket] == 0) LaunchReady(false);
          return outputs;
        }));
    accumulators_.push_back(std::move(acc));
  }
  return Status::Ok();
}

// Gradients live in the allreduce buffer; autograd accumulates into them.
void AllreduceExchange::PointGradients() {
  for (auto& s : layout_.slots) {
    s.param.mutable_grad() = torch::from_blob(buffer_ + s.offset, s.param.sizes(), torch::kFloat32);
  }
}

Status AllreduceExchange::Rebind() {
  allreduce_.reset();  // its regions stay registered for peers still holding their keys (net::MemoryRegion)
  buffer_ = nullptr;
  TENAX_ASSIGN_OR_RETURN(allreduce_, comm::Allreduce::Create(*group_, layout_.total, StepDeadline()));
  allreduce_->SetInterrupt(options_.interrupt);
  buffer_ = allreduce_->data();
  PointGradients();
  return Status::Ok();
}

void AllreduceExchange::BeginStep() {
  std::memset(buffer_, 0, layout_.params_count * sizeof(float));  // zero_grad, in the buffer
  for (size_t i = 0; i < pending_.size(); ++i) pending_[i] = layout_.buckets[i].params;
  next_bucket_ = 0;
  hook_status_ = Status::Ok();
}

Status AllreduceExchange::FinishStep() {
  LaunchReady(true);  // buckets whose parameters got no gradient
  TENAX_RETURN_IF_ERROR(hook_status_);
  return allreduce_->Wait(StepDeadline());
}

Result<double> AllreduceExchange::MeanOverReplicas(double local) {
  return Reduce(local, 1.0f / static_cast<float>(world()));
}

void AllreduceExchange::Detach() {
  // The parameters keep their values; .grad no longer aliases the buffer
  // (a saved model holds parameters, and the buffer dies with us).
  for (auto& s : layout_.slots) s.param.mutable_grad() = torch::Tensor();
  accumulators_.clear();
}

void AllreduceExchange::DescribeInSummary(nlohmann::json& summary) const {
  summary["workers"] = world();
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
  while (next_bucket_ < layout_.buckets.size() && (all || pending_[next_bucket_] == 0)) {
    const auto& bk = layout_.buckets[next_bucket_++];
    if (!hook_status_.ok()) continue;
    if (!prescale_) {  // the same scale everywhere: applied by the allreduce, after the sum
      hook_status_ = allreduce_->Start(bk.offset, bk.count, scale);
      continue;
    }
    const size_t grads = std::min(bk.offset + bk.count, layout_.params_count) - bk.offset;
    for (size_t i = 0; i < grads; ++i) buffer_[bk.offset + i] *= scale;
    hook_status_ = allreduce_->Start(bk.offset, bk.count, 1.0f);
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

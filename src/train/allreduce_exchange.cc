#include "tenax/train/allreduce_exchange.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <cstring>

#include "tenax/comm/allreduce.h"

namespace tenax {
namespace {

// The allreduce buffer holds every parameter's gradient, then one scalar
// slot for reductions of loss and correct counts.
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
  size_t scalar_slot = 0, total = 0;
};

GradientLayout PlanGradients(const std::vector<torch::Tensor>& params, size_t bucket_bytes) {
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
  g.scalar_slot = g.params_count;
  g.total = g.params_count + 1;
  return g;
}

class AllreduceExchange final : public GradientExchange {
 public:
  AllreduceExchange(comm::Group& group, AllreduceExchangeOptions options)
      : group_(group), options_(std::move(options)) {}

  ~AllreduceExchange() override { Detach(); }

  int rank() const override { return group_.rank(); }
  int world() const override { return group_.world(); }

  Status Attach(TrainableModel& model) override {
    for (const auto& p : model.Parameters()) {
      if (p.scalar_type() != torch::kFloat32 || !p.is_contiguous()) {
        return InvalidArgument("synchronous training needs contiguous float32 parameters, got one of " +
                               std::string(c10::toString(p.scalar_type())));
      }
    }
    layout_ = PlanGradients(model.Parameters(), options_.bucket_bytes);
    TENAX_ASSIGN_OR_RETURN(allreduce_, comm::Allreduce::Create(group_, layout_.total, StepDeadline()));
    allreduce_->SetInterrupt(options_.interrupt);
    buffer_ = allreduce_->data();

    // The initial model is rank 0's: broadcast as a sum where the others
    // contribute zeros (x + 0 == x exactly).
    {
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
    // Gradients live in the allreduce buffer; autograd accumulates into them.
    for (auto& s : layout_.slots) {
      s.param.mutable_grad() = torch::from_blob(buffer_ + s.offset, s.param.sizes(), torch::kFloat32);
    }
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

  void BeginStep() override {
    std::memset(buffer_, 0, layout_.params_count * sizeof(float));  // zero_grad, in the buffer
    for (size_t i = 0; i < pending_.size(); ++i) pending_[i] = layout_.buckets[i].params;
    next_bucket_ = 0;
  }

  Status FinishStep() override {
    LaunchReady(true);  // buckets whose parameters got no gradient
    TENAX_RETURN_IF_ERROR(hook_status_);
    return allreduce_->Wait(StepDeadline());
  }

  Result<double> MeanOverReplicas(double local) override {
    return Reduce(local, 1.0f / static_cast<float>(world()));
  }
  Result<double> SumOverReplicas(double local) override { return Reduce(local, 1.0f); }

  void Detach() override {
    // The parameters keep their values; .grad no longer aliases the buffer
    // (a saved model holds parameters, and the buffer dies with us).
    for (auto& s : layout_.slots) s.param.mutable_grad() = torch::Tensor();
    accumulators_.clear();
  }

  void DescribeInSummary(nlohmann::json& summary) const override {
    summary["workers"] = world();
    summary["global_batch_size"] = summary.value("batch_size", int64_t{0}) * world();
  }

  std::string Describe() const override {
    return "rank " + std::to_string(rank()) + "/" + std::to_string(world()) + " (allreduce of " +
           std::to_string(layout_.params_count) + " gradients in " + std::to_string(layout_.buckets.size()) +
           " buckets)";
  }

 private:
  Deadline StepDeadline() const { return Deadline::After(options_.step_timeout); }

  // Starts, in bucket order (the same on every rank), each bucket whose
  // parameters are all accumulated (or every remaining one with `all`).
  void LaunchReady(bool all) {
    while (next_bucket_ < layout_.buckets.size() && (all || pending_[next_bucket_] == 0)) {
      const auto& bk = layout_.buckets[next_bucket_++];
      if (hook_status_.ok()) hook_status_ = allreduce_->Start(bk.offset, bk.count, 1.0f / static_cast<float>(world()));
    }
    if (hook_status_.ok()) {
      auto polled = allreduce_->Poll();
      if (!polled.ok()) hook_status_ = polled.status();
    }
  }

  Result<double> Reduce(double local, float scale) {
    buffer_[layout_.scalar_slot] = static_cast<float>(local);
    TENAX_RETURN_IF_ERROR(allreduce_->Run(layout_.scalar_slot, 1, scale, StepDeadline()));
    return static_cast<double>(buffer_[layout_.scalar_slot]);
  }

  comm::Group& group_;
  AllreduceExchangeOptions options_;
  GradientLayout layout_;
  std::unique_ptr<comm::Allreduce> allreduce_;
  float* buffer_ = nullptr;
  std::vector<size_t> pending_;
  size_t next_bucket_ = 0;
  Status hook_status_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace

std::unique_ptr<GradientExchange> MakeAllreduceExchange(comm::Group& group, const AllreduceExchangeOptions& options) {
  return std::make_unique<AllreduceExchange>(group, options);
}

}  // namespace tenax

#include "local_exchange.h"

namespace tenax {
namespace {

class LocalExchange final : public GradientExchange {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  Status Attach(TrainableModel& model) override {
    params_ = model.Parameters();
    return Status::Ok();
  }
  // On a GPU the gradients are dropped (backward then hands each one over
  // without a zeroing kernel and an add, as PyTorch's zero_grad(set_to_none)
  // does: a launch-bound model pays per kernel); on the CPU they are zeroed
  // in place (no fresh allocation, whose pages would fault in every step).
  void BeginStep() override {
    for (auto& p : params_) {
      if (!p.grad().defined()) continue;
      if (p.is_cuda()) {
        p.mutable_grad() = torch::Tensor();
      } else {
        p.mutable_grad().zero_();
      }
    }
  }
  Status FinishStep() override { return Status::Ok(); }
  Result<double> MeanOverReplicas(double local) override { return local; }
  Result<double> SumOverReplicas(double local) override { return local; }
  void Detach() override { params_.clear(); }
  void DescribeInSummary(nlohmann::json&) const override {}
  std::string Describe() const override { return "single process"; }

 private:
  std::vector<torch::Tensor> params_;
};

}  // namespace

std::unique_ptr<GradientExchange> MakeLocalExchange() { return std::make_unique<LocalExchange>(); }

}  // namespace tenax

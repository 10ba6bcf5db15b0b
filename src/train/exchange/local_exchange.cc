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
  void BeginStep() override {
    for (auto& p : params_) {
      if (p.grad().defined()) p.mutable_grad().zero_();
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

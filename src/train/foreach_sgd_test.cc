// The multi-tensor SGD that a GPU run uses, run on the CPU against
// libtorch's SGD: the same parameters and momentum buffers, bit for bit.
#include "foreach_sgd.h"

#include <gtest/gtest.h>

#include "exchange/optimizer_state_key.h"

namespace tenax::train_internal {
namespace {

std::vector<torch::Tensor> Params(uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> p;
  for (auto shape : std::vector<std::vector<int64_t>>{{16, 8}, {8}, {3, 3, 5}, {1}}) {
    p.push_back(torch::randn(shape).requires_grad_(true));
  }
  return p;
}

void SetGrads(std::vector<torch::Tensor>& params, int step, bool skip_one) {
  torch::manual_seed(100 + step);
  for (size_t i = 0; i < params.size(); ++i) {
    // A parameter without a gradient in some steps (an unused layer) is skipped by both.
    params[i].mutable_grad() = skip_one && i == 2 && step % 2 == 1 ? torch::Tensor() : torch::randn(params[i].sizes());
  }
}

TEST(ForeachSgd, EveryOptionGivesTheBitsOfLibtorchsSgd) {
  for (const auto& o : {torch::optim::SGDOptions(0.05).momentum(0.9),
                        torch::optim::SGDOptions(0.01).momentum(0.9).weight_decay(1e-3).dampening(0.1),
                        torch::optim::SGDOptions(0.02).momentum(0.8).nesterov(true).weight_decay(5e-4),
                        torch::optim::SGDOptions(0.1)}) {
    auto a = Params(3), b = Params(3);
    torch::optim::SGD reference(a, o);
    ForeachSgd foreach_sgd(b, o);
    foreach_sgd.ForceForeach(true);
    for (int step = 0; step < 6; ++step) {
      SetGrads(a, step, true);
      SetGrads(b, step, true);
      reference.step();
      foreach_sgd.step();
    }
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i << " lr " << o.lr() << " nesterov " << o.nesterov();
      if (o.momentum() == 0) continue;
      // The momentum lives where libtorch's SGD keeps it (the elastic state copy reads it there).
      const auto& sa = static_cast<torch::optim::SGDParamState&>(*reference.state().at(OptimizerStateKey(a[i])));
      const auto& sb = static_cast<torch::optim::SGDParamState&>(*foreach_sgd.state().at(OptimizerStateKey(b[i])));
      EXPECT_TRUE(torch::equal(sa.momentum_buffer(), sb.momentum_buffer())) << "momentum of parameter " << i;
    }
    EXPECT_GT(a[0].abs().sum().item<double>(), 0.0);
  }
}

}  // namespace
}  // namespace tenax::train_internal

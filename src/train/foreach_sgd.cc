#include "foreach_sgd.h"

#include <vector>

#include "exchange/optimizer_state_key.h"

namespace tenax::train_internal {

torch::Tensor ForeachSgd::step(LossClosure closure) {
  bool on_gpu = force_foreach_;
  for (const auto& group : param_groups_) {
    for (const auto& p : group.params()) on_gpu = on_gpu || p.is_cuda();
  }
  if (!on_gpu) return torch::optim::SGD::step(std::move(closure));

  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    std::vector<torch::Tensor> params, grads;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      params.push_back(p);
      grads.push_back(p.grad());
    }
    if (params.empty()) continue;
    // The same element-wise arithmetic as SGD::step, in the same order.
    std::vector<torch::Tensor> steps = o.weight_decay() != 0 ? at::_foreach_add(grads, params, o.weight_decay()) : grads;
    if (o.momentum() != 0) {
      std::vector<torch::Tensor> bufs(params.size()), old_bufs, old_steps;
      for (size_t i = 0; i < params.size(); ++i) {
        auto found = state_.find(OptimizerStateKey(params[i]));
        if (found == state_.end()) {  // the first step: the buffer starts as the step
          bufs[i] = torch::clone(steps[i]).detach();
          auto st = std::make_unique<torch::optim::SGDParamState>();
          st->momentum_buffer(bufs[i]);
          state_[OptimizerStateKey(params[i])] = std::move(st);
        } else {
          bufs[i] = static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer();
          old_bufs.push_back(bufs[i]);
          old_steps.push_back(steps[i]);
        }
      }
      if (!old_bufs.empty()) {
        at::_foreach_mul_(old_bufs, o.momentum());
        at::_foreach_add_(old_bufs, old_steps, 1 - o.dampening());
      }
      steps = o.nesterov() ? at::_foreach_add(steps, bufs, o.momentum()) : bufs;
    }
    at::_foreach_add_(params, steps, -o.lr());
  }
  return loss;
}

}  // namespace tenax::train_internal

// SGD (momentum, dampening, weight decay, Nesterov) whose update on a GPU
// runs as a few multi-tensor kernels (libtorch's _foreach_ ops) instead of
// three kernels per parameter: on a GPU the per-parameter launches of
// torch::optim::SGD cost a launch-bound model (the built-in cnn at batch
// 64) several percent of its step, and PyTorch's Python SGD uses the
// foreach form on CUDA by default. On the CPU it is torch::optim::SGD's
// step itself, bit for bit.
//
// The state is SGD's (a momentum_buffer per parameter under libtorch's
// key), so the elastic state copy and a saved optimizer see no difference.
// Threading and failure: as torch::optim::SGD (throws c10::Error on a CUDA
// error; the training loop turns it into a Status).
#pragma once

#include <torch/torch.h>

namespace tenax::train_internal {

class ForeachSgd final : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override;
  // Tests: the multi-tensor form on the CPU too (libtorch runs it there
  // tensor by tensor), to compare it with SGD's.
  void ForceForeach(bool on) { force_foreach_ = on; }

 private:
  bool force_foreach_ = false;
};

}  // namespace tenax::train_internal

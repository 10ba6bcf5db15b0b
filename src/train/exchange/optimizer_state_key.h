// The key under which libtorch's C++ optimizers keep a parameter's state:
// the parameter's TensorImpl, spelled as a string by libtorch 1.x
// (c10::guts::to_string of the pointer; Debian 12's 1.13) and as the
// pointer itself by libtorch 2.x (a CUDA PyTorch wheel), where
// c10::guts::to_string is gone. The one place that knows the difference.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

namespace tenax::train_internal {

inline auto OptimizerStateKey(const torch::Tensor& param) {
#if TORCH_VERSION_MAJOR >= 2
  return static_cast<void*>(param.unsafeGetTensorImpl());
#else
  return c10::guts::to_string(param.unsafeGetTensorImpl());
#endif
}

}  // namespace tenax::train_internal

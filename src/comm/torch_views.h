// libtorch views over planned arenas: received tensors are used in place
// (torch::from_blob over the arena, no copy), and a module's parameters give
// the tensor list a plan is made from.
#pragma once

#include <torch/torch.h>

#include "tenax/comm/buffer_plan.h"

namespace tenax::comm {

Result<DType> FromTorch(torch::ScalarType type);
torch::ScalarType ToTorch(DType dtype);

// A tensor aliasing `base + t.offset`; valid while the arena lives.
torch::Tensor View(const PlannedTensor& t, uint8_t* base);

// The specs of every parameter of `module` (name, dtype, shape), in order.
Result<std::vector<TensorSpec>> SpecsOf(const torch::nn::Module& module);

}  // namespace tenax::comm

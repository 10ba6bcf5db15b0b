#include "torch_views.h"

namespace tenax::comm {

Result<DType> FromTorch(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32:
      return DType::kFloat32;
    case torch::kFloat64:
      return DType::kFloat64;
    case torch::kFloat16:
      return DType::kFloat16;
    case torch::kBFloat16:
      return DType::kBFloat16;
    case torch::kInt64:
      return DType::kInt64;
    case torch::kInt32:
      return DType::kInt32;
    case torch::kUInt8:
      return DType::kUInt8;
    default:
      return InvalidArgument(std::string("unsupported tensor dtype ") + c10::toString(type));
  }
}

torch::ScalarType ToTorch(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return torch::kFloat32;
    case DType::kFloat64:
      return torch::kFloat64;
    case DType::kFloat16:
      return torch::kFloat16;
    case DType::kBFloat16:
      return torch::kBFloat16;
    case DType::kInt64:
      return torch::kInt64;
    case DType::kInt32:
      return torch::kInt32;
    case DType::kUInt8:
      return torch::kUInt8;
  }
  return torch::kUInt8;
}

torch::Tensor View(const PlannedTensor& t, uint8_t* base) {
  return torch::from_blob(base + t.offset, t.spec.shape, torch::TensorOptions().dtype(ToTorch(t.spec.dtype)));
}

Result<std::vector<TensorSpec>> SpecsOf(const torch::nn::Module& module) {
  std::vector<TensorSpec> specs;
  for (const auto& p : module.named_parameters()) {
    TENAX_ASSIGN_OR_RETURN(DType dtype, FromTorch(p.value().scalar_type()));
    specs.push_back({p.key(), dtype, p.value().sizes().vec(), false});
  }
  return specs;
}

}  // namespace tenax::comm

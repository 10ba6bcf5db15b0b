#include "tenax/comm/buffer_plan.h"

#include <set>

namespace tenax::comm {
namespace {

constexpr size_t kCacheLine = 64;
constexpr size_t kMaxArenaBytes = size_t{1} << 48;

size_t AlignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t HashString(uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = Mix(h, c);
  return Mix(h, s.size());
}

}  // namespace

size_t DTypeSize(DType d) {
  switch (d) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kFloat16:
      return 2;
    case DType::kBFloat16:
      return 2;
    case DType::kInt64:
      return 8;
    case DType::kInt32:
      return 4;
    case DType::kUInt8:
      return 1;
  }
  return 0;
}

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt64:
      return "int64";
    case DType::kInt32:
      return "int32";
    case DType::kUInt8:
      return "uint8";
  }
  return "?";
}

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const PlannedTensor* BufferPlan::Find(const std::string& name) const {
  for (const auto& t : tensors) {
    if (t.spec.name == name) return &t;
  }
  return nullptr;
}

Result<BufferPlan> PlanBuffers(const std::vector<TensorSpec>& specs, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return InvalidArgument("alignment " + std::to_string(alignment) + " is not a power of two");
  }
  BufferPlan plan;
  plan.alignment = alignment;
  std::set<std::string> names;
  uint64_t h = 0x74656e6178ull;  // "tenax"
  size_t offset = 0;
  for (const auto& spec : specs) {
    if (spec.name.empty()) return InvalidArgument("a tensor without a name");
    if (!names.insert(spec.name).second) return InvalidArgument("tensor '" + spec.name + "' is listed twice");
    if (static_cast<uint32_t>(spec.dtype) >= kDTypeCount)
      return InvalidArgument("tensor '" + spec.name + "': bad dtype");
    size_t bytes = DTypeSize(spec.dtype);
    for (int64_t d : spec.shape) {
      if (d < 0) return InvalidArgument("tensor '" + spec.name + "' has a negative dimension");
      if (d > 0 && bytes > kMaxArenaBytes / static_cast<size_t>(d)) {
        return InvalidArgument("tensor '" + spec.name + "' is larger than 2^48 bytes");
      }
      bytes *= static_cast<size_t>(d);
    }
    h = HashString(h, spec.name);
    h = Mix(h, static_cast<uint64_t>(spec.dtype));
    h = Mix(h, spec.dynamic);
    for (int64_t d : spec.shape) h = Mix(h, static_cast<uint64_t>(d));
    if (spec.dynamic) {
      plan.dynamic.push_back(spec);
      continue;
    }
    offset = AlignUp(offset, alignment);
    if (offset + bytes > kMaxArenaBytes) return InvalidArgument("the plan needs more than 2^48 bytes");
    plan.tensors.push_back({spec, offset, bytes});
    offset += bytes;
  }
  plan.data_bytes = offset;
  plan.signal_offset = AlignUp(offset, kCacheLine);
  plan.total_bytes = plan.signal_offset + kCacheLine;
  plan.fingerprint = Mix(Mix(h, alignment), plan.total_bytes);
  return plan;
}

}  // namespace tenax::comm

// The communication planner ("graph analyzer"): from the list of tensors a
// step exchanges, a static layout of one registered arena, computed once.
// Both sides compute the same plan from the same list; the fingerprint lets
// them check that before any byte moves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::comm {

enum class DType : uint32_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  kInt64 = 4,
  kInt32 = 5,
  kUInt8 = 6
};
inline constexpr uint32_t kDTypeCount = 7;

size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);

struct TensorSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  bool dynamic = false;  // size known only at run time: not placed in the arena

  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
};

struct PlannedTensor {
  TensorSpec spec;
  size_t offset = 0;  // in the arena, a multiple of the alignment
  size_t nbytes = 0;
};

struct BufferPlan {
  std::vector<PlannedTensor> tensors;  // static tensors, in the order given
  std::vector<TensorSpec> dynamic;     // the dynamic-path tensors
  size_t data_bytes = 0;               // [0, data_bytes) holds every static tensor: one coalesced write
  size_t signal_offset = 0;            // an 8-byte step counter on its own cache line after the data
  size_t total_bytes = 0;
  size_t alignment = 64;
  uint64_t fingerprint = 0;  // hash of names, dtypes, shapes and layout

  const PlannedTensor* Find(const std::string& name) const;
};

// InvalidArgument for duplicate or empty names, negative dimensions, an
// alignment that is not a power of two, or a layout beyond 2^48 bytes.
Result<BufferPlan> PlanBuffers(const std::vector<TensorSpec>& specs, size_t alignment = 64);

}  // namespace tenax::comm

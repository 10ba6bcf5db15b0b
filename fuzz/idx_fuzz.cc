// Fuzzes the IDX/gzip decoder and the Fashion-MNIST consistency checks: no
// input may crash, hang or allocate past the limit; every rejection must be a
// DataLoss status.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "tenax/data/fashion_mnist.h"
#include "tenax/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Small limit: the decoder must enforce it, and fuzzing stays fast.
  constexpr size_t kLimit = 1 << 20;
  auto r = tenax::DecodeIdx(std::span<const uint8_t>(data, size), "fuzz", kLimit);
  if (r.ok()) {
    if (r->data.size() > kLimit) std::abort();
    // Pair the decoded array with itself: exercises the cross checks.
    auto pair = tenax::MakeLabeledImages(*r, *r, 0, "images", "labels");
    (void)pair;
  } else if (r.status().code() != tenax::StatusCode::kDataLoss) {
    std::abort();
  }
  return 0;
}

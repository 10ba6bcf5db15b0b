// Fuzzes the .npy decoder and the image/label checks: no input may crash,
// hang or allocate past the limit; every rejection must be a DataLoss status.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "tenax/data/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Small limit: the decoder must enforce it, and fuzzing stays fast.
  constexpr size_t kLimit = 1 << 20;
  const std::span<const uint8_t> bytes(data, size);
  auto header = tenax::DecodeNpyHeader(bytes, "fuzz", kLimit);
  auto r = tenax::DecodeNpy(bytes, "fuzz", kLimit);
  if (r.ok()) {
    if (!header.ok() || r->data.size() > kLimit || r->data.size() != header->data_bytes ||
        header->data_offset + header->data_bytes != size) {
      std::abort();
    }
    // Pair the decoded array with itself: exercises the image and label checks.
    auto samples = tenax::MakeNpySamples(*r, *r, "images", "labels");
    if (samples.ok()) {
      for (int64_t label : samples->labels) {
        if (label < 0 || label >= tenax::kMaxNpyClasses) std::abort();
      }
      if (samples->images.dtype == tenax::NpyDtype::kUint8) (void)tenax::Uint8PixelStatistics(samples->images.data);
    } else if (samples.status().code() != tenax::StatusCode::kDataLoss) {
      std::abort();
    }
  } else if (r.status().code() != tenax::StatusCode::kDataLoss ||
             (!header.ok() && header.status().code() != tenax::StatusCode::kDataLoss)) {
    std::abort();
  }
  return 0;
}

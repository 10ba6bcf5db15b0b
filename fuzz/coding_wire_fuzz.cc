// Fuzzes the decoders of the coded-training messages (coding/coded_codec.h):
// any bytes decode or give ProtocolError; what decodes is within bounds.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tenax/coding/coded_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  using tenax::StatusCode;
  if (auto w = tenax::coding::DecodeCodedWelcome(bytes, "fuzz"); w.ok()) {
    if (w->slot_offset() >= w->slots_length() || w->workers() > tenax::coding::kMaxCodedWorkers) std::abort();
  } else if (w.status().code() != StatusCode::kProtocolError) {
    std::abort();
  }
  if (auto s = tenax::coding::DecodeCodedStep(bytes, "fuzz"); s.ok()) {
    if (s->step() < 0) std::abort();
  } else if (s.status().code() != StatusCode::kProtocolError) {
    std::abort();
  }
  if (auto r = tenax::coding::DecodeCodedReady(bytes, "fuzz"); r.ok()) {
    if (r->step() < 0 || !(r->compute_seconds() >= 0)) std::abort();
  } else if (r.status().code() != StatusCode::kProtocolError) {
    std::abort();
  }
  return 0;
}

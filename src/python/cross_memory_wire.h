// The messages of the cross-memory sum's rounds (cross_memory_sum.h) and
// the cut of a tensor into per-rank chunks. Pure functions, without torch,
// so that fuzz/cross_memory_wire_fuzz.cc can reach the decoders: the
// messages come from peers over the network.
//
// Failures: a decoder returns ProtocolError for anything but what the
// encoder writes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "tenax/core/status.h"

namespace tenax::python {

// Round 1 of the probe: where a rank runs and a token in its memory.
struct CrossMemoryProbe {
  std::string host;  // boot id / pid namespace (no spaces)
  int64_t pid = 0;   // > 0
  uint64_t token_address = 0;
  std::array<uint64_t, 2> token{};
};
std::string EncodeProbe(const CrossMemoryProbe& p);
Result<CrossMemoryProbe> DecodeProbe(std::string_view bytes);

// Round A of a sum: the rank's tensor and its length in floats.
struct CrossMemoryTensor {
  uint64_t address = 0;
  uint64_t count = 0;
};
std::string EncodeTensor(const CrossMemoryTensor& t);
Result<CrossMemoryTensor> DecodeTensor(std::string_view bytes);

// [begin, end) of chunk `s` of `count` floats cut among `p` ranks: chunks
// start on a 64-byte line, cover [0, count) in order without overlap, and
// trailing ones may be empty. p >= 1, 0 <= s < p.
std::pair<size_t, size_t> ChunkOf(size_t count, int p, int s);

}  // namespace tenax::python

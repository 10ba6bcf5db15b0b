// Wire forms of the messages between coded-training workers and their
// decoder (proto/coding_wire.proto), their control-message kinds, and the
// fixed header of the decoder's model region. Decoders bound sizes and
// check every field; errors are ProtocolError naming the peer. Fuzzed
// (fuzz/coding_wire_fuzz.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "coding_wire.pb.h"
#include "tenax/core/status.h"
#include "tenax/net/message_kinds.h"

namespace tenax::coding {

inline constexpr uint32_t kCodedWelcomeKind = net::KindValue(net::MessageKind::kCodedWelcome);
inline constexpr uint32_t kCodedStepKind = net::KindValue(net::MessageKind::kCodedStep);
inline constexpr uint32_t kCodedReadyKind = net::KindValue(net::MessageKind::kCodedReady);

inline constexpr size_t kMaxCodedMessageBytes = 64 << 10;
inline constexpr uint32_t kMaxCodedWorkers = 1024;
inline constexpr uint64_t kMaxCodedFloats = uint64_t{1} << 32;
inline constexpr int64_t kMaxCodedSteps = int64_t{1} << 40;

// The first bytes of the decoder's model region, read one-sided by
// workers: a seqlock (`seq` odd while the decoder writes, even once the
// rows and parameters of `step` are consistent). Little-endian.
struct CodedModelHeader {
  uint64_t magic = kMagic;
  uint64_t seq = 0;
  int64_t step = 0;          // updates applied to the parameters
  uint64_t param_count = 0;
  uint64_t workers = 0;
  uint64_t reserved[3] = {};
  static constexpr uint64_t kMagic = 0x3144434458414e54;  // "TNXCDC1" + 1
};
static_assert(sizeof(CodedModelHeader) == 64);
inline constexpr size_t kCodedRowsBytes = kMaxCodedWorkers * sizeof(int32_t);
inline constexpr size_t CodedModelRegionBytes(uint64_t param_count) {
  return sizeof(CodedModelHeader) + kCodedRowsBytes + param_count * sizeof(float);
}

Result<wire::CodedWelcome> DecodeCodedWelcome(std::string_view bytes, const std::string& peer);
Result<wire::CodedStep> DecodeCodedStep(std::string_view bytes, const std::string& peer);
Result<wire::CodedReady> DecodeCodedReady(std::string_view bytes, const std::string& peer);

}  // namespace tenax::coding

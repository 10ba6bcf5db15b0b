// Wire forms of the messages between workers and parameter-server shards
// (proto/ps_wire.proto), their control-message kinds, and the fixed header
// at the start of a shard's model region. Decoders bound sizes and check
// every field; errors are ProtocolError naming the peer. Fuzzed
// (fuzz/ps_wire_fuzz.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "ps_wire.pb.h"
#include "tenax/core/status.h"
#include "tenax/net/message_kinds.h"

namespace tenax::ps {

inline constexpr uint32_t kPsHelloKind = net::KindValue(net::MessageKind::kPsHello);
inline constexpr uint32_t kPsWelcomeKind = net::KindValue(net::MessageKind::kPsWelcome);
inline constexpr uint32_t kResultReadyKind = net::KindValue(net::MessageKind::kResultReady);
inline constexpr uint32_t kResultOutcomeKind = net::KindValue(net::MessageKind::kResultOutcome);

inline constexpr size_t kMaxPsMessageBytes = 64 << 10;
// A model of more floats than this is refused (16 GiB of float32).
inline constexpr uint64_t kMaxModelFloats = uint64_t{1} << 32;

// The first bytes of a shard's model region, read one-sided by workers.
// The shard writes it as a seqlock: `seq` is odd while the parameters
// change and even (and bumped) once they are consistent, so a reader that
// sees the same even seq before and after copying the parameters holds one
// version. Stored little-endian (x86 and arm64 both are).
struct ModelRegionHeader {
  uint64_t magic = kMagic;
  uint64_t seq = 0;
  uint64_t version = 0;      // merges folded in (the shard's model version)
  uint64_t param_count = 0;  // floats after the header
  uint64_t reserved[4] = {};
  static constexpr uint64_t kMagic = 0x314c444f4d584e54;  // "TNXMODL1"
};
static_assert(sizeof(ModelRegionHeader) == 64);

// Publishes a new version of a region that starts with `h`: seq made odd,
// `write()` changes the floats after the header, `version` stored, seq made
// even again. One writer (the shard's thread); readers are one-sided and
// retry on an odd or changed seq. Serves the model and the tail average.
template <typename Write>
void SeqlockWrite(ModelRegionHeader& h, uint64_t version, Write&& write) {
  std::atomic_ref<uint64_t> seq(h.seq);
  seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_release);
  write();
  std::atomic_ref<uint64_t>(h.version).store(version, std::memory_order_relaxed);
  seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

Result<wire::PsHello> DecodePsHello(std::string_view bytes, const std::string& peer);
Result<wire::PsWelcome> DecodePsWelcome(std::string_view bytes, const std::string& peer);
Result<wire::ResultReady> DecodeResultReady(std::string_view bytes, const std::string& peer);
Result<wire::ResultOutcome> DecodeResultOutcome(std::string_view bytes, const std::string& peer);

}  // namespace tenax::ps

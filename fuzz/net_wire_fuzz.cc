// Fuzzes the decoders of bytes that arrive from the network: control-message
// envelopes and region descriptors. Every input must decode or give a
// ProtocolError; nothing may crash or read out of bounds.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "tenax/comm/channel_codec.h"
#include "tenax/coord/coord_codec.h"
#include "tenax/net/control_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto env = tenax::net::DecodeEnvelope(std::span<const uint8_t>(data, size), 1 << 16, "fuzz-peer");
  if (!env.ok() && env.status().code() != tenax::StatusCode::kProtocolError) std::abort();
  if (env.ok() && env->version() != tenax::net::kWireVersion) std::abort();
  auto region = tenax::net::DecodeRegion(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-peer");
  if (!region.ok() && region.status().code() != tenax::StatusCode::kProtocolError) std::abort();
  if (region.ok() && (region->length == 0 || region->rkey.empty())) std::abort();
  // comm's channel messages ride in the same User payloads.
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& status : {tenax::comm::DecodeArenaOffer(text, "fuzz-peer").status(),
                             tenax::comm::DecodeDynamicTensor(text, "fuzz-peer").status(),
                             tenax::comm::DecodeDynamicDone(text, "fuzz-peer").status(),
                             tenax::comm::DecodeMeshHello(text, "fuzz-peer").status(),
                             tenax::comm::DecodeCollectiveOffer(text, "fuzz-peer").status(),
                             tenax::comm::DecodeStateOffer(text, "fuzz-peer").status(),
                             tenax::coord::DecodeJoinRequest(text, "fuzz-peer").status(),
                             tenax::coord::DecodeJoinReply(text, "fuzz-peer").status(),
                             tenax::coord::DecodeRoster(text, "fuzz-peer").status(),
                             tenax::coord::DecodeProgress(text, "fuzz-peer").status(),
                             tenax::coord::DecodeDone(text, "fuzz-peer").status(),
                             tenax::coord::DecodeFailure(text, "fuzz-peer").status(),
                             tenax::coord::DecodeLeave(text, "fuzz-peer").status(),
                             tenax::coord::DecodeWatch(text, "fuzz-peer").status(),
                             tenax::coord::DecodeFormed(text, "fuzz-peer").status(),
                             tenax::coord::DecodeQueueCounts(text, "fuzz-peer").status(),
                             tenax::coord::DecodeUnitRequest(text, "fuzz-peer").status(),
                             tenax::coord::DecodeUnitGrant(text, "fuzz-peer").status(),
                             tenax::coord::DecodeUnitRelease(text, "fuzz-peer").status(),
                             tenax::coord::DecodeShardHello(text, "fuzz-peer").status(),
                             tenax::coord::DecodeShardWelcome(text, "fuzz-peer").status(),
                             tenax::coord::DecodeShardCheck(text, "fuzz-peer").status(),
                             tenax::coord::DecodeShardVerdict(text, "fuzz-peer").status(),
                             tenax::coord::DecodeShardMerged(text, "fuzz-peer").status()}) {
    if (!status.ok() && status.code() != tenax::StatusCode::kProtocolError) std::abort();
  }
  auto dyn = tenax::comm::DecodeDynamicTensor(text, "fuzz-peer");
  if (dyn.ok() && dyn->length != dyn->spec.nbytes()) std::abort();
  auto roster = tenax::coord::DecodeRoster(text, "fuzz-peer");
  if (roster.ok()) {
    std::vector<bool> seen(static_cast<size_t>(roster->members_size()));
    for (const auto& m : roster->members()) {
      if (m.rank() >= seen.size() || seen[m.rank()]) std::abort();
      seen[m.rank()] = true;
    }
  }
  auto grant = tenax::coord::DecodeUnitGrant(text, "fuzz-peer");
  if (grant.ok() && grant->state() == "unit" && (grant->steps() < 1 || grant->shards_size() < 1)) std::abort();
  auto hello = tenax::comm::DecodeMeshHello(text, "fuzz-peer");
  if (hello.ok() && hello->rank() >= hello->world()) std::abort();
  return 0;
}

// Wire forms of the channel's control messages (proto/comm_wire.proto).
// Decoders bound sizes and check every field; errors are ProtocolError
// naming the peer.
#pragma once

#include <string>
#include <string_view>

#include "comm_wire.pb.h"
#include "tenax/comm/buffer_plan.h"
#include "tenax/core/status.h"
#include "tenax/net/message_kinds.h"

namespace tenax::comm {

inline constexpr size_t kMaxChannelMessageBytes = 64 << 10;
inline constexpr size_t kMaxTensorRank = 16;

Result<wire::ArenaOffer> DecodeArenaOffer(std::string_view bytes, const std::string& peer);

std::string EncodeDynamicTensor(const TensorSpec& spec, uint64_t offset, uint64_t length, uint64_t sequence);
struct DynamicAnnouncement {
  TensorSpec spec;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t sequence = 0;
};
// Also checks that `length` equals the bytes the shape and dtype describe.
Result<DynamicAnnouncement> DecodeDynamicTensor(std::string_view bytes, const std::string& peer);

Result<uint64_t> DecodeDynamicDone(std::string_view bytes, const std::string& peer);

// Collective groups (comm/group.h, comm/allreduce.h).
inline constexpr uint32_t kMaxGroupRanks = 4096;
std::string EncodeMeshHello(const std::string& job_id, uint32_t rank, uint32_t world, uint64_t generation);
// Checks rank < world <= kMaxGroupRanks and a job id of at most 256 bytes.
Result<wire::MeshHello> DecodeMeshHello(std::string_view bytes, const std::string& peer);
// Checks that both regions are present.
Result<wire::CollectiveOffer> DecodeCollectiveOffer(std::string_view bytes, const std::string& peer);
// Elastic state transfer: checks a region is present and the sizes are sane
// (bytes > 0, a multiple of 4, at most 16 GiB; applied_steps >= 0).
Result<wire::StateOffer> DecodeStateOffer(std::string_view bytes, const std::string& peer);
inline constexpr uint32_t kStateOfferKind = net::KindValue(net::MessageKind::kStateOffer);

}  // namespace tenax::comm

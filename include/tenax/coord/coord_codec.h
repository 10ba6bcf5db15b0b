// Wire forms of the coordinator's messages (proto/coord_wire.proto) and the
// control-message kinds that carry them. Decoders bound sizes and check
// every field; errors are ProtocolError naming the peer.
#pragma once

#include <string>
#include <string_view>

#include "coord_wire.pb.h"
#include "tenax/core/status.h"

namespace tenax::coord {

// net User kinds 0x200..0x2ff.
inline constexpr uint32_t kJoinRequestKind = 0x200;
inline constexpr uint32_t kJoinReplyKind = 0x201;
inline constexpr uint32_t kRosterKind = 0x202;
inline constexpr uint32_t kProgressKind = 0x203;
inline constexpr uint32_t kDoneKind = 0x204;
inline constexpr uint32_t kFailureKind = 0x205;
inline constexpr uint32_t kWatchKind = 0x206;

inline constexpr size_t kMaxCoordMessageBytes = 512 << 10;
inline constexpr uint32_t kMaxWorld = 4096;

Result<wire::JoinRequest> DecodeJoinRequest(std::string_view bytes, const std::string& peer);
Result<wire::JoinReply> DecodeJoinReply(std::string_view bytes, const std::string& peer);
// Checks 1 <= size <= kMaxWorld, ranks 0..size-1 each exactly once, ports.
Result<wire::Roster> DecodeRoster(std::string_view bytes, const std::string& peer);
Result<wire::Progress> DecodeProgress(std::string_view bytes, const std::string& peer);
Result<wire::Done> DecodeDone(std::string_view bytes, const std::string& peer);
Result<wire::Failure> DecodeFailure(std::string_view bytes, const std::string& peer);
Result<wire::Watch> DecodeWatch(std::string_view bytes, const std::string& peer);

}  // namespace tenax::coord

// Wire forms of the coordinator's messages (proto/coord_wire.proto) and the
// control-message kinds that carry them. Decoders bound sizes and check
// every field; errors are ProtocolError naming the peer.
#pragma once

#include <string>
#include <string_view>

#include "coord_wire.pb.h"
#include "tenax/core/status.h"
#include "tenax/net/message_kinds.h"

namespace tenax::coord {

// Control-message kinds (registered in net/message_kinds.h).
inline constexpr uint32_t kJoinRequestKind = net::KindValue(net::MessageKind::kJoinRequest);
inline constexpr uint32_t kJoinReplyKind = net::KindValue(net::MessageKind::kJoinReply);
inline constexpr uint32_t kRosterKind = net::KindValue(net::MessageKind::kRoster);
inline constexpr uint32_t kProgressKind = net::KindValue(net::MessageKind::kProgress);
inline constexpr uint32_t kDoneKind = net::KindValue(net::MessageKind::kDone);
inline constexpr uint32_t kFailureKind = net::KindValue(net::MessageKind::kFailure);
inline constexpr uint32_t kWatchKind = net::KindValue(net::MessageKind::kWatch);
inline constexpr uint32_t kLeaveKind = net::KindValue(net::MessageKind::kLeave);
// A member's report that another member is lost (a wire::Failure naming it).
inline constexpr uint32_t kSuspectKind = net::KindValue(net::MessageKind::kSuspect);

inline constexpr size_t kMaxCoordMessageBytes = 512 << 10;
inline constexpr uint32_t kMaxWorld = 4096;
// Member ids (JoinReply.rank, Member.member_id) grow with every joiner of an
// elastic job; they stay below this.
inline constexpr uint32_t kMaxMemberId = 1 << 20;

Result<wire::JoinRequest> DecodeJoinRequest(std::string_view bytes, const std::string& peer);
Result<wire::JoinReply> DecodeJoinReply(std::string_view bytes, const std::string& peer);
// Checks 1 <= size <= kMaxWorld, ranks 0..size-1 each exactly once, member
// ids unique, ports.
Result<wire::Roster> DecodeRoster(std::string_view bytes, const std::string& peer);
Result<wire::Progress> DecodeProgress(std::string_view bytes, const std::string& peer);
Result<wire::Done> DecodeDone(std::string_view bytes, const std::string& peer);
Result<wire::Failure> DecodeFailure(std::string_view bytes, const std::string& peer);
Result<wire::Leave> DecodeLeave(std::string_view bytes, const std::string& peer);
Result<wire::Watch> DecodeWatch(std::string_view bytes, const std::string& peer);

}  // namespace tenax::coord

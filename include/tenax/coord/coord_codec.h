// Wire forms of the coordinator's messages (proto/coord_wire.proto) and the
// control-message kinds that carry them. Decoders bound sizes and check
// every field; errors are ProtocolError naming the peer.
#pragma once

#include <string>
#include <string_view>

#include "coord_wire.pb.h"
#include "tenax/coord/work_queue.h"
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
inline constexpr uint32_t kFormedKind = net::KindValue(net::MessageKind::kFormed);
inline constexpr uint32_t kQueueCountsKind = net::KindValue(net::MessageKind::kQueueCounts);

// Asynchronous jobs: units (workers <-> coordinator) and shard checks and
// merges (parameter-server shards <-> coordinator).
inline constexpr uint32_t kUnitRequestKind = net::KindValue(net::MessageKind::kUnitRequest);
inline constexpr uint32_t kUnitGrantKind = net::KindValue(net::MessageKind::kUnitGrant);
inline constexpr uint32_t kUnitReleaseKind = net::KindValue(net::MessageKind::kUnitRelease);
inline constexpr uint32_t kShardHelloKind = net::KindValue(net::MessageKind::kShardHello);
inline constexpr uint32_t kShardWelcomeKind = net::KindValue(net::MessageKind::kShardWelcome);
inline constexpr uint32_t kShardCheckKind = net::KindValue(net::MessageKind::kShardCheck);
inline constexpr uint32_t kShardVerdictKind = net::KindValue(net::MessageKind::kShardVerdict);
inline constexpr uint32_t kShardMergedKind = net::KindValue(net::MessageKind::kShardMerged);

inline constexpr size_t kMaxCoordMessageBytes = 512 << 10;
inline constexpr uint32_t kMaxWorld = 4096;
// Member ids (JoinReply.rank, Member.member_id) grow with every joiner of an
// elastic job; they stay below this.
inline constexpr uint32_t kMaxMemberId = 1 << 20;
// Parameter-server shards of one job, and units and attempts of its queue.
inline constexpr uint32_t kMaxShards = 64;
inline constexpr uint64_t kMaxUnits = uint64_t{1} << 40;
inline constexpr uint64_t kMaxAttempts = 1 << 20;

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
Result<wire::Formed> DecodeFormed(std::string_view bytes, const std::string& peer);
// Counts are never negative.
Result<wire::QueueCounts> DecodeQueueCounts(std::string_view bytes, const std::string& peer);
wire::QueueCounts QueueCountsToWire(const WorkQueueCounts& counts);
WorkQueueCounts QueueCountsFromWire(const wire::QueueCounts& counts);
// Asynchronous jobs. Units < kMaxUnits, attempts 1..kMaxAttempts, shards
// < kMaxShards (a grant's shard list: distinct), steps >= 0, verdict words
// from the documented set.
Result<wire::UnitRequest> DecodeUnitRequest(std::string_view bytes, const std::string& peer);
Result<wire::UnitGrant> DecodeUnitGrant(std::string_view bytes, const std::string& peer);
Result<wire::UnitRelease> DecodeUnitRelease(std::string_view bytes, const std::string& peer);
Result<wire::ShardHello> DecodeShardHello(std::string_view bytes, const std::string& peer);
Result<wire::ShardWelcome> DecodeShardWelcome(std::string_view bytes, const std::string& peer);
Result<wire::ShardCheck> DecodeShardCheck(std::string_view bytes, const std::string& peer);
Result<wire::ShardVerdict> DecodeShardVerdict(std::string_view bytes, const std::string& peer);
Result<wire::ShardMerged> DecodeShardMerged(std::string_view bytes, const std::string& peer);

}  // namespace tenax::coord

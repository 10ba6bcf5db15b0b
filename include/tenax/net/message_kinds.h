// The one registry of control-message kinds (the `kind` of
// Node::SendControl). Every layer's kinds are listed here, each inside its
// layer's range, so two layers can never claim one value: the build fails
// (static_assert) on a duplicate or a kind outside its range, and
// Node::SendControl refuses a kind that is not registered (InvalidArgument).
// Kinds are wire values: never renumber one; add new ones inside their
// layer's range. Layers name their kinds through this header
// (e.g. comm::kBarrierKind = KindValue(MessageKind::kBarrier)).
//
// Tests and benchmarks that talk only to themselves may use any value in
// the private test range without listing it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tenax::net {

// X(name, value, layer): the registry itself.
#define TENAX_MESSAGE_KINDS(X)                                       \
  /* comm: planned tensor channels (tensor_channel.h) */             \
  X(kArenaOffer, 0x100, "comm")                                      \
  X(kDynamicTensor, 0x101, "comm")                                   \
  X(kDynamicDone, 0x102, "comm")                                     \
  /* comm: groups and collectives (group.h) */                       \
  X(kMeshHello, 0x110, "comm")                                       \
  X(kCollectiveOffer, 0x111, "comm")                                 \
  X(kBarrier, 0x112, "comm")                                         \
  X(kStateOffer, 0x113, "comm")                                      \
  /* coord: coordinator and its clients (coord_codec.h) */           \
  X(kJoinRequest, 0x200, "coord")                                    \
  X(kJoinReply, 0x201, "coord")                                      \
  X(kRoster, 0x202, "coord")                                         \
  X(kProgress, 0x203, "coord")                                       \
  X(kDone, 0x204, "coord")                                           \
  X(kFailure, 0x205, "coord")                                        \
  X(kWatch, 0x206, "coord")                                          \
  X(kLeave, 0x207, "coord")                                          \
  X(kSuspect, 0x208, "coord")                                        \
  /* coord: asynchronous jobs' units and shards (coord_codec.h) */   \
  X(kUnitRequest, 0x209, "coord")                                    \
  X(kUnitGrant, 0x20a, "coord")                                      \
  X(kUnitRelease, 0x20b, "coord")                                    \
  X(kShardHello, 0x20c, "coord")                                     \
  X(kShardWelcome, 0x20d, "coord")                                   \
  X(kShardCheck, 0x20e, "coord")                                     \
  X(kShardVerdict, 0x20f, "coord")                                   \
  X(kShardMerged, 0x210, "coord")                                    \
  X(kFormed, 0x211, "coord")                                         \
  X(kQueueCounts, 0x212, "coord")                                    \
  /* ps: workers and parameter-server shards (ps_codec.h) */         \
  X(kPsHello, 0x300, "ps")                                           \
  X(kPsWelcome, 0x301, "ps")                                         \
  X(kResultReady, 0x302, "ps")                                       \
  X(kResultOutcome, 0x303, "ps")                                     \
  /* store: clients and `tenax storage` data nodes (storage_codec.h) */ \
  X(kStorageHello, 0x400, "store")                                   \
  X(kStorageWelcome, 0x401, "store")                                 \
  X(kChunkRequest, 0x402, "store")                                   \
  X(kChunkReply, 0x403, "store")                                     \
  /* store: the resident recovery service (recovery_service.h) */   \
  X(kRecoverRequest, 0x404, "store")                                 \
  X(kRecoverReply, 0x405, "store")                                   \
  /* coding: workers and the decoder of coded training (coded_codec.h) */ \
  X(kCodedWelcome, 0x500, "coding")                                  \
  X(kCodedStep, 0x501, "coding")                                     \
  X(kCodedReady, 0x502, "coding")                                    \
  /* sched: probe agents and the coordinator's link matrix (sched_codec.h) */ \
  X(kProbeReport, 0x600, "sched")                                    \
  X(kProbeRoster, 0x601, "sched")                                    \
  X(kLinkQuery, 0x602, "sched")                                      \
  X(kLinkAnswer, 0x603, "sched")                                     \
  X(kProbeOfferRequest, 0x604, "sched")                              \
  X(kProbeOffer, 0x605, "sched")                                     \
  /* bench: `tenax bench transport` between its own two processes */ \
  X(kBenchRun, 0x7e00, "bench")                                      \
  X(kBenchDone, 0x7e01, "bench")                                     \
  X(kBenchReady, 0x7e02, "bench")

enum class MessageKind : uint32_t {
#define TENAX_KIND_ENUM(name, value, layer) name = value,
  TENAX_MESSAGE_KINDS(TENAX_KIND_ENUM)
#undef TENAX_KIND_ENUM
};

constexpr uint32_t KindValue(MessageKind kind) { return static_cast<uint32_t>(kind); }

struct KindRange {
  std::string_view layer;
  uint32_t first;
  uint32_t last;  // inclusive
};

// Each layer's range. "net" is reserved for net's own kinds (its handshake
// uses typed envelopes today, not kinds).
inline constexpr KindRange kKindRanges[] = {
    {"net", 0x0001, 0x00ff},   {"comm", 0x0100, 0x01ff},  {"coord", 0x0200, 0x02ff},
    {"ps", 0x0300, 0x03ff},    {"store", 0x0400, 0x04ff}, {"coding", 0x0500, 0x05ff},
    {"sched", 0x0600, 0x06ff}, {"train", 0x0700, 0x07ff}, {"bench", 0x7e00, 0x7eff},
};

// Private to one test binary (and its peer processes); never listed.
inline constexpr uint32_t kFirstTestKind = 0x7f00;
inline constexpr uint32_t kLastTestKind = 0x7fff;

struct RegisteredKind {
  std::string_view name;
  uint32_t value;
  std::string_view layer;
};

inline constexpr RegisteredKind kRegisteredKinds[] = {
#define TENAX_KIND_ENTRY(name, value, layer) {#name, value, layer},
    TENAX_MESSAGE_KINDS(TENAX_KIND_ENTRY)
#undef TENAX_KIND_ENTRY
};

// True for a listed kind or one in the private test range.
constexpr bool IsRegisteredKind(uint32_t kind) {
  if (kind >= kFirstTestKind && kind <= kLastTestKind) return true;
  for (const auto& k : kRegisteredKinds) {
    if (k.value == kind) return true;
  }
  return false;
}

namespace detail {

constexpr bool KindsAreUnique() {
  for (size_t i = 0; i < std::size(kRegisteredKinds); ++i) {
    for (size_t j = i + 1; j < std::size(kRegisteredKinds); ++j) {
      if (kRegisteredKinds[i].value == kRegisteredKinds[j].value) return false;
    }
  }
  return true;
}

constexpr bool KindsLieInTheirLayersRange() {
  for (const auto& k : kRegisteredKinds) {
    bool inside = false;
    for (const auto& r : kKindRanges) inside |= r.layer == k.layer && k.value >= r.first && k.value <= r.last;
    if (!inside) return false;
  }
  return true;
}

constexpr bool RangesAreDisjoint() {
  for (size_t i = 0; i < std::size(kKindRanges); ++i) {
    if (kKindRanges[i].first > kKindRanges[i].last) return false;
    if (!(kKindRanges[i].last < kFirstTestKind || kKindRanges[i].first > kLastTestKind)) return false;
    for (size_t j = i + 1; j < std::size(kKindRanges); ++j) {
      if (!(kKindRanges[i].last < kKindRanges[j].first || kKindRanges[j].last < kKindRanges[i].first)) return false;
    }
  }
  return true;
}

}  // namespace detail

static_assert(detail::KindsAreUnique(), "two message kinds share a value (message_kinds.h)");
static_assert(detail::KindsLieInTheirLayersRange(), "a message kind lies outside its layer's range");
static_assert(detail::RangesAreDisjoint(), "message kind ranges overlap");

#undef TENAX_MESSAGE_KINDS

}  // namespace tenax::net

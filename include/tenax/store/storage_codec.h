// Wire forms of the storage protocol between store clients and `tenax
// storage` data nodes (proto/store_wire.proto, docs/store.md), and their
// control-message kinds. Decoders bound sizes and check every field
// (a chunk's name as a dataset name, index < k+m, payload bytes within the
// chunk limit, a status code tenax knows; a recovery request's policy and
// parameters); anything else is ProtocolError
// naming the peer. Fuzzed (fuzz/storage_wire_fuzz.cc).
#pragma once

#include <string>
#include <string_view>

#include "store_wire.pb.h"
#include "tenax/core/status.h"
#include "tenax/net/message_kinds.h"
#include "tenax/store/chunk_file.h"

namespace tenax::store {

inline constexpr uint32_t kStorageHelloKind = net::KindValue(net::MessageKind::kStorageHello);
inline constexpr uint32_t kStorageWelcomeKind = net::KindValue(net::MessageKind::kStorageWelcome);
inline constexpr uint32_t kChunkRequestKind = net::KindValue(net::MessageKind::kChunkRequest);
inline constexpr uint32_t kChunkReplyKind = net::KindValue(net::MessageKind::kChunkReply);
inline constexpr uint32_t kRecoverRequestKind = net::KindValue(net::MessageKind::kRecoverRequest);
inline constexpr uint32_t kRecoverReplyKind = net::KindValue(net::MessageKind::kRecoverReply);

inline constexpr size_t kMaxStorageMessageBytes = 64 << 10;
// A recovery's report (its lost chunks listed, up to kMaxReportedLosses).
inline constexpr size_t kMaxRecoverReplyBytes = 512 << 10;

Result<wire::StorageHello> DecodeStorageHello(std::string_view bytes, const std::string& peer);
Result<wire::StorageWelcome> DecodeStorageWelcome(std::string_view bytes, const std::string& peer);
Result<wire::ChunkRequest> DecodeChunkRequest(std::string_view bytes, const std::string& peer);
Result<wire::ChunkReply> DecodeChunkReply(std::string_view bytes, const std::string& peer);
// A request names a valid dataset (or none: all), a known policy, shares
// in [0, 1], classes 0..255 and a finite, non-negative background rate.
Result<wire::RecoverRequest> DecodeRecoverRequest(std::string_view bytes, const std::string& peer);
// A successful reply carries its report as a JSON object with a "results"
// array.
Result<wire::RecoverReply> DecodeRecoverReply(std::string_view bytes, const std::string& peer);

}  // namespace tenax::store

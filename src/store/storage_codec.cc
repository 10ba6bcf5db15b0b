#include "tenax/store/storage_codec.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "tenax/net/bounded_decode.h"

namespace tenax::store {
namespace {

constexpr auto& Bad = net::BadMessage;

template <typename Msg>
Result<Msg> Parse(std::string_view bytes, const std::string& peer, const char* what) {
  return net::DecodeBoundedProto<Msg>(bytes, kMaxStorageMessageBytes, peer, what);
}

// A region offered by a peer: non-null, at most a chunk's size, a key.
bool RegionOk(uint64_t address, uint64_t length, const std::string& rkey) {
  return address != 0 && length > 0 && length <= kMaxChunkPayloadBytes && !rkey.empty() && rkey.size() <= 4096;
}

// `full`: a header as written (k, m, payload); otherwise only the name.
Status CheckHeader(const wire::ChunkHeader& h, bool full, const std::string& peer) {
  if (!CheckDatasetName(h.dataset()).ok()) return Bad(peer, "chunk of a bad dataset name");
  if (h.stripe() > (uint64_t{1} << 48)) return Bad(peer, "chunk of stripe " + std::to_string(h.stripe()));
  if (h.index() > 254) return Bad(peer, "chunk index " + std::to_string(h.index()));
  if (!full) return Status::Ok();
  if (h.k() < 1 || h.k() + h.m() > 255 || h.index() >= h.k() + h.m()) {
    return Bad(peer, "chunk " + std::to_string(h.index()) + " of RS " + std::to_string(h.k()) + "+" +
                         std::to_string(h.m()));
  }
  if (h.payload_bytes() > kMaxChunkPayloadBytes) {
    return Bad(peer, "chunk of " + std::to_string(h.payload_bytes()) + " bytes");
  }
  return Status::Ok();
}

}  // namespace

Result<wire::StorageHello> DecodeStorageHello(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::StorageHello>(bytes, peer, "storage hello"));
  if (m.client().size() > 256) return Bad(peer, "hello with an overlong client name");
  if (!RegionOk(m.recv_address(), m.recv_length(), m.recv_rkey())) return Bad(peer, "hello with an unusable region");
  return m;
}

Result<wire::StorageWelcome> DecodeStorageWelcome(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::StorageWelcome>(bytes, peer, "storage welcome"));
  if (m.node().size() > 256 || m.error().size() > 4096) return Bad(peer, "welcome with overlong text");
  if (!m.error().empty()) return m;
  if (!RegionOk(m.staging_address(), m.staging_length(), m.staging_rkey())) {
    return Bad(peer, "welcome with an unusable staging region");
  }
  return m;
}

Result<wire::ChunkRequest> DecodeChunkRequest(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ChunkRequest>(bytes, peer, "chunk request"));
  switch (m.op()) {
    case wire::ChunkRequest::GET:
      TENAX_RETURN_IF_ERROR(CheckHeader(m.chunk(), false, peer));
      break;
    case wire::ChunkRequest::PUT:
      TENAX_RETURN_IF_ERROR(CheckHeader(m.chunk(), true, peer));
      break;
    case wire::ChunkRequest::STATUS:
      break;
    default:
      return Bad(peer, "chunk request with op " + std::to_string(static_cast<int>(m.op())));
  }
  return m;
}

Result<wire::ChunkReply> DecodeChunkReply(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ChunkReply>(bytes, peer, "chunk reply"));
  if (m.code() > static_cast<uint32_t>(StatusCode::kAborted)) return Bad(peer, "reply with status code " + std::to_string(m.code()));
  if (m.error().size() > 4096) return Bad(peer, "reply with an overlong error");
  if (m.code() == 0 && m.has_chunk()) TENAX_RETURN_IF_ERROR(CheckHeader(m.chunk(), true, peer));
  return m;
}

Result<wire::RecoverRequest> DecodeRecoverRequest(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::RecoverRequest>(bytes, peer, "recover request"));
  if (!m.dataset().empty() && !CheckDatasetName(m.dataset()).ok()) return Bad(peer, "recover request for a bad dataset name");
  if (m.policy() != "full" && m.policy() != "approx" && m.policy() != "prm") {
    return Bad(peer, "recover request with policy '" + m.policy().substr(0, 32) + "' (full, approx or prm)");
  }
  auto share = [](double v) { return std::isfinite(v) && v >= 0 && v <= 1; };
  if (!share(m.min_available()) || !share(m.class_tolerance())) {
    return Bad(peer, "recover request with a share outside [0, 1]");
  }
  if (m.important_classes_size() > 256) return Bad(peer, "recover request with over 256 important classes");
  for (uint32_t c : m.important_classes()) {
    if (c > 255) return Bad(peer, "recover request with class " + std::to_string(c));
  }
  const double rate = m.background_bytes_per_second();
  if (!std::isfinite(rate) || rate < 0 || rate > 1e12) return Bad(peer, "recover request with a bad background rate");
  return m;
}

Result<wire::RecoverReply> DecodeRecoverReply(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, net::DecodeBoundedProto<wire::RecoverReply>(bytes, kMaxRecoverReplyBytes, peer,
                                                                               "recover reply"));
  if (m.code() > static_cast<uint32_t>(StatusCode::kAborted)) return Bad(peer, "reply with status code " + std::to_string(m.code()));
  if (m.error().size() > 4096) return Bad(peer, "reply with an overlong error");
  if (!std::isfinite(m.waited_seconds()) || m.waited_seconds() < 0 || !std::isfinite(m.seconds()) || m.seconds() < 0) {
    return Bad(peer, "recover reply with a bad time");
  }
  if (m.code() != 0) return m;
  const auto report = nlohmann::json::parse(m.report_json(), nullptr, /*allow_exceptions=*/false);
  if (!report.is_object() || !report.contains("results") || !report["results"].is_array()) {
    return Bad(peer, "recover reply whose report is not a JSON object with results");
  }
  return m;
}

}  // namespace tenax::store

#include "tenax/coord/coord_codec.h"

#include <cmath>
#include <set>
#include <vector>

namespace tenax::coord {
namespace {

Status Bad(const std::string& peer, const std::string& what) { return ProtocolError("peer " + peer + ": " + what); }

template <typename Msg>
Result<Msg> Parse(std::string_view bytes, const std::string& peer, const char* what) {
  Msg m;
  if (bytes.size() > kMaxCoordMessageBytes || !m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Bad(peer, std::string("undecodable ") + what + " (" + std::to_string(bytes.size()) + " bytes)");
  }
  return m;
}

bool ShortText(const std::string& s, size_t max = 256) { return s.size() <= max; }

}  // namespace

Result<wire::JoinRequest> DecodeJoinRequest(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::JoinRequest>(bytes, peer, "join request"));
  if (m.job_id().empty() || !ShortText(m.job_id(), 128)) return Bad(peer, "join request with a bad job id");
  if (!ShortText(m.name()) || m.host().empty() || !ShortText(m.host())) return Bad(peer, "join request with a bad name or host");
  if (m.port() == 0 || m.port() > 65535) return Bad(peer, "join request with port " + std::to_string(m.port()));
  if (!ShortText(m.plan_fingerprint(), 128)) return Bad(peer, "join request with a bad plan fingerprint");
  if (m.requested_rank() < -1 || m.requested_rank() >= static_cast<int32_t>(kMaxMemberId)) {
    return Bad(peer, "join request for rank " + std::to_string(m.requested_rank()));
  }
  if (m.rejoin() && m.requested_rank() < 0) return Bad(peer, "rejoin without a rank");
  return m;
}

Result<wire::JoinReply> DecodeJoinReply(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::JoinReply>(bytes, peer, "join reply"));
  if (!m.error().empty()) return m;
  if (m.world() == 0 || m.world() > kMaxWorld || m.rank() >= kMaxMemberId) {
    return Bad(peer, "join reply with rank " + std::to_string(m.rank()) + " of " + std::to_string(m.world()));
  }
  if (m.config_toml().empty()) return Bad(peer, "join reply without the job's configuration");
  return m;
}

Result<wire::Roster> DecodeRoster(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::Roster>(bytes, peer, "roster"));
  const int n = m.members_size();
  if (!ShortText(m.why(), 4096)) return Bad(peer, "roster with an overlong reason");
  if (n == 0 || n > static_cast<int>(kMaxWorld)) return Bad(peer, "roster of " + std::to_string(n) + " members");
  std::vector<bool> seen(static_cast<size_t>(n), false);
  std::set<uint32_t> ids;
  for (const auto& member : m.members()) {
    if (member.member_id() >= kMaxMemberId || !ids.insert(member.member_id()).second) {
      return Bad(peer, "roster with a repeated or out-of-range member id " + std::to_string(member.member_id()));
    }
    if (member.rank() >= static_cast<uint32_t>(n) || seen[member.rank()]) {
      return Bad(peer, "roster with a missing or repeated rank " + std::to_string(member.rank()));
    }
    seen[member.rank()] = true;
    if (member.port() == 0 || member.port() > 65535 || member.host().empty() || !ShortText(member.host()) ||
        !ShortText(member.name())) {
      return Bad(peer, "roster entry for rank " + std::to_string(member.rank()) + " is malformed");
    }
  }
  return m;
}

Result<wire::Progress> DecodeProgress(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::Progress>(bytes, peer, "progress"));
  if (m.rank() >= kMaxMemberId || m.step() < 0 || m.total_steps() < 0 || m.step() > m.total_steps() ||
      !std::isfinite(m.samples_per_second()) || !std::isfinite(m.elapsed_seconds())) {
    return Bad(peer, "progress report out of range");
  }
  return m;
}

Result<wire::Done> DecodeDone(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::Done>(bytes, peer, "done"));
  if (m.rank() > kMaxMemberId) return Bad(peer, "done from rank " + std::to_string(m.rank()));
  return m;
}

Result<wire::Failure> DecodeFailure(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::Failure>(bytes, peer, "failure"));
  if (m.rank() >= kMaxMemberId || !ShortText(m.host()) || !ShortText(m.reason(), 4096)) {
    return Bad(peer, "failure report out of range");
  }
  return m;
}

Result<wire::Leave> DecodeLeave(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::Leave>(bytes, peer, "leave"));
  if (m.rank() >= kMaxMemberId || !ShortText(m.reason(), 4096)) return Bad(peer, "malformed leave");
  return m;
}

Result<wire::Watch> DecodeWatch(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::Watch>(bytes, peer, "watch"));
  if (m.job_id().empty() || !ShortText(m.job_id(), 128)) return Bad(peer, "watch with a bad job id");
  return m;
}

}  // namespace tenax::coord

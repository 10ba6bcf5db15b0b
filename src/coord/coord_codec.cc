#include "tenax/coord/coord_codec.h"

#include <cmath>
#include <set>
#include <vector>

#include "tenax/net/bounded_decode.h"

namespace tenax::coord {
namespace {

constexpr auto& Bad = net::BadMessage;

template <typename Msg>
Result<Msg> Parse(std::string_view bytes, const std::string& peer, const char* what) {
  return net::DecodeBoundedProto<Msg>(bytes, kMaxCoordMessageBytes, peer, what);
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
  if (m.generation() == 0 || m.stable_generation() > m.generation()) {
    return Bad(peer, "roster of generation " + std::to_string(m.generation()) + " with stable generation " +
                         std::to_string(m.stable_generation()));
  }
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
      !std::isfinite(m.samples_per_second()) || !std::isfinite(m.elapsed_seconds()) ||
      !std::isfinite(m.step_seconds()) || m.step_seconds() < 0 || m.recovery_bytes() < 0) {
    return Bad(peer, "progress report out of range");
  }
  return m;
}

Result<wire::Done> DecodeDone(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::Done>(bytes, peer, "done"));
  if (m.rank() > kMaxMemberId) return Bad(peer, "done from rank " + std::to_string(m.rank()));
  return m;
}

Result<wire::QueueCounts> DecodeQueueCounts(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::QueueCounts>(bytes, peer, "queue counts"));
  for (int64_t v : {m.units(), m.units_issued(), m.units_reissued(), m.results_rejected(), m.leases_expired(),
                    m.partial_results(), m.accepted(), m.merged_everywhere(), m.failed_units()}) {
    if (v < 0) return Bad(peer, "queue counts with a negative count");
  }
  return m;
}

wire::QueueCounts QueueCountsToWire(const WorkQueueCounts& c) {
  wire::QueueCounts q;
  q.set_units(c.units);
  q.set_units_issued(c.units_issued);
  q.set_units_reissued(c.units_reissued);
  q.set_results_rejected(c.results_rejected);
  q.set_leases_expired(c.leases_expired);
  q.set_partial_results(c.partial_results);
  q.set_accepted(c.accepted);
  q.set_merged_everywhere(c.merged_everywhere);
  q.set_failed_units(c.failed_units);
  return q;
}

WorkQueueCounts QueueCountsFromWire(const wire::QueueCounts& q) {
  return {q.units(),           q.units_issued(),   q.units_reissued(),     q.results_rejected(), q.leases_expired(),
          q.partial_results(), q.accepted(),       q.merged_everywhere(),  q.failed_units()};
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

Result<wire::Formed> DecodeFormed(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::Formed>(bytes, peer, "formed"));
  if (m.generation() == 0) return Bad(peer, "formed report without a generation");
  return m;
}

Result<wire::Watch> DecodeWatch(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::Watch>(bytes, peer, "watch"));
  if (m.job_id().empty() || !ShortText(m.job_id(), 128)) return Bad(peer, "watch with a bad job id");
  return m;
}

namespace {

bool UnitAttemptOk(uint64_t unit, uint64_t attempt) { return unit < kMaxUnits && attempt >= 1 && attempt <= kMaxAttempts; }

std::string UnitText(uint64_t unit, uint64_t attempt) {
  return "unit " + std::to_string(unit) + " attempt " + std::to_string(attempt);
}

bool AddressOk(const std::string& host, uint32_t port) { return !host.empty() && ShortText(host) && port > 0 && port <= 65535; }

}  // namespace

Result<wire::UnitRequest> DecodeUnitRequest(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::UnitRequest>(bytes, peer, "unit request"));
  if (!ShortText(m.worker())) return Bad(peer, "unit request with an overlong worker name");
  return m;
}

Result<wire::UnitGrant> DecodeUnitGrant(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::UnitGrant>(bytes, peer, "unit grant"));
  if (m.state() != "unit" && m.state() != "wait" && m.state() != "done") {
    return Bad(peer, "unit grant in state \"" + m.state().substr(0, 32) + "\"");
  }
  if (m.shard_addresses_size() > static_cast<int>(kMaxShards)) return Bad(peer, "unit grant with too many shards");
  std::set<uint32_t> seen;
  for (const auto& a : m.shard_addresses()) {
    if (a.shard() >= kMaxShards || !seen.insert(a.shard()).second || !AddressOk(a.host(), a.port())) {
      return Bad(peer, "unit grant with a bad address for shard " + std::to_string(a.shard()));
    }
  }
  if (m.total_steps() < 0) return Bad(peer, "unit grant with negative total steps");
  if (m.state() != "unit") return m;
  if (!UnitAttemptOk(m.unit(), m.attempt())) return Bad(peer, "unit grant for " + UnitText(m.unit(), m.attempt()));
  if (m.start_step() < 0 || m.steps() < 1 || m.start_step() > m.total_steps() - m.steps() || m.lease_ms() < 0) {
    return Bad(peer, "unit grant of steps [" + std::to_string(m.start_step()) + ", +" + std::to_string(m.steps()) +
                         ") of " + std::to_string(m.total_steps()));
  }
  if (m.shards_size() < 1 || m.shards_size() > static_cast<int>(kMaxShards)) return Bad(peer, "unit grant without shards");
  std::set<uint32_t> targets;
  for (uint32_t s : m.shards()) {
    if (!seen.count(s) || !targets.insert(s).second) {
      return Bad(peer, "unit grant names shard " + std::to_string(s) + " twice or without its address");
    }
  }
  return m;
}

Result<wire::UnitRelease> DecodeUnitRelease(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::UnitRelease>(bytes, peer, "unit release"));
  if (!UnitAttemptOk(m.unit(), m.attempt()) || !ShortText(m.reason(), 4096)) {
    return Bad(peer, "unit release for " + UnitText(m.unit(), m.attempt()));
  }
  return m;
}

Result<wire::ShardHello> DecodeShardHello(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ShardHello>(bytes, peer, "shard hello"));
  if (m.job_id().empty() || !ShortText(m.job_id(), 128)) return Bad(peer, "shard hello with a bad job id");
  if (m.shards() < 1 || m.shards() > kMaxShards || m.shard() >= m.shards()) {
    return Bad(peer, "shard hello from shard " + std::to_string(m.shard()) + " of " + std::to_string(m.shards()));
  }
  if (!AddressOk(m.host(), m.port())) return Bad(peer, "shard hello with a bad address");
  return m;
}

Result<wire::ShardWelcome> DecodeShardWelcome(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ShardWelcome>(bytes, peer, "shard welcome"));
  if (!ShortText(m.error(), 4096)) return Bad(peer, "shard welcome with an overlong error");
  return m;
}

Result<wire::ShardCheck> DecodeShardCheck(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ShardCheck>(bytes, peer, "shard check"));
  if (!UnitAttemptOk(m.unit(), m.attempt()) || m.shard() >= kMaxShards || m.steps_done() < 1 ||
      !ShortText(m.reason(), 4096)) {
    return Bad(peer, "shard check of " + UnitText(m.unit(), m.attempt()) + " is malformed");
  }
  return m;
}

Result<wire::ShardVerdict> DecodeShardVerdict(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ShardVerdict>(bytes, peer, "shard verdict"));
  static const std::set<std::string> kWords = {"merge", "rejected", "duplicate", "stale", "pending"};
  if (!UnitAttemptOk(m.unit(), m.attempt()) || !kWords.count(m.verdict()) || !ShortText(m.reason(), 4096)) {
    return Bad(peer, "shard verdict on " + UnitText(m.unit(), m.attempt()) + " is malformed");
  }
  return m;
}

Result<wire::ShardMerged> DecodeShardMerged(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ShardMerged>(bytes, peer, "shard merged"));
  if (!UnitAttemptOk(m.unit(), m.attempt()) || m.shard() >= kMaxShards || m.merge_seq() < 1) {
    return Bad(peer, "shard merge report of " + UnitText(m.unit(), m.attempt()) + " is malformed");
  }
  return m;
}

}  // namespace tenax::coord

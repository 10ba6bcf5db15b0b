#include "tenax/ps/ps_codec.h"

#include <set>

#include "tenax/net/bounded_decode.h"

namespace tenax::ps {
namespace {

constexpr auto& Bad = net::BadMessage;

template <typename Msg>
Result<Msg> Parse(std::string_view bytes, const std::string& peer, const char* what) {
  return net::DecodeBoundedProto<Msg>(bytes, kMaxPsMessageBytes, peer, what);
}

bool ShortText(const std::string& s, size_t max = 256) { return s.size() <= max; }
// ResultKind's values (merge_rule.h): model, delta, gradient sum.
bool KindOk(uint32_t kind) { return kind <= 2; }
constexpr uint64_t kMaxUnits = uint64_t{1} << 40;
constexpr uint64_t kMaxAttempts = 1 << 20;
constexpr uint32_t kMaxShards = 64;

std::string UnitText(uint64_t unit, uint64_t attempt) {
  return "unit " + std::to_string(unit) + " attempt " + std::to_string(attempt);
}

}  // namespace

Result<wire::PsHello> DecodePsHello(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::PsHello>(bytes, peer, "parameter-server hello"));
  if (m.job_id().empty() || !ShortText(m.job_id(), 128)) return Bad(peer, "hello with a bad job id");
  if (!ShortText(m.plan_fingerprint(), 128) || !ShortText(m.worker())) return Bad(peer, "hello with overlong names");
  if (m.param_count() == 0 || m.param_count() > kMaxModelFloats) {
    return Bad(peer, "hello for a model of " + std::to_string(m.param_count()) + " floats");
  }
  if (!KindOk(m.result_kind())) return Bad(peer, "hello with result kind " + std::to_string(m.result_kind()));
  return m;
}

Result<wire::PsWelcome> DecodePsWelcome(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::PsWelcome>(bytes, peer, "parameter-server welcome"));
  if (!ShortText(m.error(), 4096)) return Bad(peer, "welcome with an overlong error");
  if (!m.error().empty()) return m;
  if (m.shards() < 1 || m.shards() > kMaxShards || m.shard() >= m.shards()) {
    return Bad(peer, "welcome from shard " + std::to_string(m.shard()) + " of " + std::to_string(m.shards()));
  }
  if (m.param_count() == 0 || m.param_count() > kMaxModelFloats || m.param_offset() > kMaxModelFloats - m.param_count()) {
    return Bad(peer, "welcome for floats [" + std::to_string(m.param_offset()) + ", +" +
                         std::to_string(m.param_count()) + ")");
  }
  const uint64_t floats = m.param_count() * sizeof(float);
  if (m.model_length() != sizeof(ModelRegionHeader) + floats || m.staging_length() != floats) {
    return Bad(peer, "welcome with regions of " + std::to_string(m.model_length()) + " and " +
                         std::to_string(m.staging_length()) + " bytes for " + std::to_string(m.param_count()) + " floats");
  }
  if (m.model_rkey().empty() || m.staging_rkey().empty() || m.model_rkey().size() > 4096 ||
      m.staging_rkey().size() > 4096 || m.model_address() == 0 || m.staging_address() == 0) {
    return Bad(peer, "welcome with a bad region key or address");
  }
  if (!ShortText(m.rule(), 32)) return Bad(peer, "welcome with a bad rule name");
  return m;
}

Result<wire::ResultReady> DecodeResultReady(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ResultReady>(bytes, peer, "result"));
  if (m.unit() >= kMaxUnits || m.attempt() < 1 || m.attempt() > kMaxAttempts) {
    return Bad(peer, "result of " + UnitText(m.unit(), m.attempt()));
  }
  if (m.unit_steps() < 1 || m.steps_done() < 1 || m.steps_done() > m.unit_steps()) {
    return Bad(peer, "result of " + UnitText(m.unit(), m.attempt()) + " with " + std::to_string(m.steps_done()) +
                         " of " + std::to_string(m.unit_steps()) + " steps");
  }
  if (!KindOk(m.result_kind())) return Bad(peer, "result of kind " + std::to_string(m.result_kind()));
  return m;
}

Result<wire::ResultOutcome> DecodeResultOutcome(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ResultOutcome>(bytes, peer, "result outcome"));
  static const std::set<std::string> kWords = {"merged", "rejected", "duplicate", "stale"};
  if (m.unit() >= kMaxUnits || m.attempt() < 1 || m.attempt() > kMaxAttempts || !kWords.count(m.verdict()) ||
      !ShortText(m.reason(), 4096)) {
    return Bad(peer, "outcome of " + UnitText(m.unit(), m.attempt()) + " is malformed");
  }
  return m;
}

}  // namespace tenax::ps

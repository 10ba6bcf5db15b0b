#include "tenax/sched/probe/sched_codec.h"

#include <cmath>
#include <set>

#include "tenax/net/bounded_decode.h"

namespace tenax::sched {
namespace {

constexpr auto& Bad = net::BadMessage;

template <typename Msg>
Result<Msg> Parse(std::string_view bytes, const std::string& peer, const char* what) {
  return net::DecodeBoundedProto<Msg>(bytes, kMaxSchedMessageBytes, peer, what);
}

bool Name(const std::string& s) { return !s.empty() && s.size() <= 253; }

Status CheckAgent(const wire::ProbeAgent& a, const std::string& peer, const char* what) {
  if (!Name(a.node()) || a.zone().size() > 253 || !Name(a.host())) {
    return Bad(peer, std::string(what) + " with a bad node, zone or host name");
  }
  if (a.port() == 0 || a.port() > 65535) return Bad(peer, std::string(what) + " with port " + std::to_string(a.port()));
  return Status::Ok();
}

Status CheckAgents(const google::protobuf::RepeatedPtrField<wire::ProbeAgent>& agents, const std::string& peer,
                   const char* what) {
  if (agents.size() > kMaxProbeAgents) return Bad(peer, std::string(what) + " of " + std::to_string(agents.size()) + " agents");
  std::set<std::string> names;
  for (const auto& a : agents) {
    TENAX_RETURN_IF_ERROR(CheckAgent(a, peer, what));
    if (!names.insert(a.node()).second) return Bad(peer, std::string(what) + " naming node " + a.node() + " twice");
  }
  return Status::Ok();
}

}  // namespace

Result<wire::ProbeReport> DecodeProbeReport(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ProbeReport>(bytes, peer, "probe report"));
  TENAX_RETURN_IF_ERROR(CheckAgent(m.agent(), peer, "probe report"));
  if (m.samples_size() > kMaxProbeAgents) return Bad(peer, "probe report with too many samples");
  for (const auto& s : m.samples()) {
    if (!Name(s.peer()) || s.peer() == m.agent().node()) return Bad(peer, "probe report with a bad peer name");
    const bool finite = std::isfinite(s.rtt_ms()) && std::isfinite(s.loss()) && std::isfinite(s.throughput_gbps());
    if (!finite || s.rtt_ms() < 0 || s.rtt_ms() > 1e6 || s.loss() < 0 || s.loss() > 1 || s.throughput_gbps() < 0 ||
        s.throughput_gbps() > 1e6) {
      return Bad(peer, "probe report with out-of-range values for " + s.peer());
    }
  }
  return m;
}

Result<wire::ProbeRoster> DecodeProbeRoster(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ProbeRoster>(bytes, peer, "probe roster"));
  TENAX_RETURN_IF_ERROR(CheckAgents(m.agents(), peer, "probe roster"));
  return m;
}

Result<wire::LinkAnswer> DecodeLinkAnswer(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::LinkAnswer>(bytes, peer, "link answer"));
  TENAX_RETURN_IF_ERROR(CheckAgents(m.agents(), peer, "link answer"));
  return m;  // matrix_json is parsed (and checked) by LinkMatrix::FromJson
}

Result<wire::ProbeOffer> DecodeProbeOffer(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ProbeOffer>(bytes, peer, "probe offer"));
  if (m.length() == 0 || m.length() > (uint64_t{1} << 30) || m.rkey().empty() || m.rkey().size() > 4096) {
    return Bad(peer, "probe offer of a bad region (" + std::to_string(m.length()) + " bytes)");
  }
  return m;
}

}  // namespace tenax::sched

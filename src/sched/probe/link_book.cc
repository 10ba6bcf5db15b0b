#include "tenax/sched/probe/link_book.h"

#include <spdlog/spdlog.h>

#include "tenax/sched/probe/sched_codec.h"

namespace tenax::sched {
namespace {

wire::ProbeAgent ToWire(const ProbeAgentInfo& a) {
  wire::ProbeAgent w;
  w.set_node(a.node);
  w.set_zone(a.zone);
  w.set_host(a.host);
  w.set_port(a.port);
  return w;
}

ProbeAgentInfo FromWire(const wire::ProbeAgent& w) {
  return ProbeAgentInfo{w.node(), w.zone(), w.host(), static_cast<uint16_t>(w.port())};
}

}  // namespace

LinkBook::LinkBook(double half_life_seconds) : links_(half_life_seconds) {}

bool LinkBook::Handles(uint32_t kind) const { return kind == kProbeReportKind || kind == kLinkQueryKind; }

std::vector<ProbeAgentInfo> LinkBook::Agents() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ProbeAgentInfo> out;
  for (const auto& [name, a] : agents_) out.push_back(a);
  return out;
}

Status LinkBook::Handle(net::Node& node, const net::ControlMessage& m) {
  auto info = node.Info(m.from);
  const std::string label = info.ok() ? info->address + " (" + info->name + ")" : std::to_string(m.from);
  const double now = std::chrono::duration<double>(SteadyClock::now() - start_).count();
  if (m.kind == kProbeReportKind) {
    TENAX_ASSIGN_OR_RETURN(wire::ProbeReport r, DecodeProbeReport(m.payload, label));
    const ProbeAgentInfo agent = FromWire(r.agent());
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!agents_.count(agent.node)) {
        spdlog::info("probe agent {} (zone '{}') reports from {}:{}", agent.node, agent.zone, agent.host, agent.port);
      }
      agents_[agent.node] = agent;
    }
    for (const auto& s : r.samples()) {
      if (s.reachable()) {
        links_.Observe(agent.node, s.peer(), LinkSample{s.rtt_ms(), s.loss(), s.throughput_gbps()}, now);
      } else {
        spdlog::warn("probe agent {}: {} is unreachable", agent.node, s.peer());
        links_.ObserveUnreachable(agent.node, s.peer(), now);
      }
    }
    wire::ProbeRoster roster;
    for (const ProbeAgentInfo& a : Agents()) *roster.add_agents() = ToWire(a);
    return node.SendControl(m.from, kProbeRosterKind, roster.SerializeAsString(), Deadline::After(std::chrono::seconds(2)));
  }
  wire::LinkAnswer answer;
  answer.set_matrix_json(links_.ToJson());
  for (const ProbeAgentInfo& a : Agents()) *answer.add_agents() = ToWire(a);
  return node.SendControl(m.from, kLinkAnswerKind, answer.SerializeAsString(), Deadline::After(std::chrono::seconds(2)));
}

Result<LinkSnapshot> QueryLinks(net::Node& node, net::PeerId peer, Deadline deadline) {
  TENAX_RETURN_IF_ERROR(node.SendControl(peer, kLinkQueryKind, wire::LinkQuery().SerializeAsString(), deadline));
  TENAX_ASSIGN_OR_RETURN(net::ControlMessage m, node.ReceiveControl(deadline, peer, kLinkAnswerKind));
  TENAX_ASSIGN_OR_RETURN(wire::LinkAnswer a, DecodeLinkAnswer(m.payload, "coordinator"));
  auto links = LinkMatrix::FromJson(a.matrix_json());
  if (!links.ok()) return ProtocolError("coordinator: its link matrix does not parse: " + links.status().message());
  LinkSnapshot snapshot{std::move(links).value(), {}};
  for (const auto& w : a.agents()) snapshot.agents.push_back(FromWire(w));
  return snapshot;
}

Result<LinkSnapshot> FetchLinks(const std::string& host, uint16_t port, const std::string& secret, Deadline deadline) {
  net::NodeOptions no;
  no.name = "links";
  no.secret = secret;
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(net::PeerId peer, node->Connect(host, port, deadline));
  auto snapshot = QueryLinks(*node, peer, deadline);
  node->Disconnect(peer, Deadline::After(std::chrono::milliseconds(200)));
  return snapshot;
}

}  // namespace tenax::sched

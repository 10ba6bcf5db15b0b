#include "tenax/sched/probe/probe_agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "tenax/core/signals.h"
#include "tenax/net/node.h"
#include "tenax/sched/probe/sched_codec.h"

namespace tenax::sched {
namespace {

using namespace std::chrono_literals;

struct Peer {
  wire::ProbeAgent agent;
  std::optional<net::PeerId> id;
  std::optional<net::RemoteRegion> region;
};

class ProbeAgent {
 public:
  explicit ProbeAgent(const ProbeOptions& o) : o_(o) {}
  Status Run();

 private:
  // Answers what other agents and the coordinator sent, until `deadline`.
  void Pump(Deadline deadline);
  void HandleMessage(const net::ControlMessage& m);
  Status EnsureCoordinator();
  Status Report(const std::vector<wire::LinkSampleRecord>& samples);
  wire::LinkSampleRecord Measure(Peer& peer);
  Status Connect(Peer& peer);

  const ProbeOptions& o_;
  std::unique_ptr<net::Node> node_;
  net::MemoryRegion region_;
  uint16_t port_ = 0;
  std::optional<net::PeerId> coordinator_;
  std::map<std::string, Peer> peers_;
  std::optional<wire::ProbeOffer> pending_offer_;  // the answer Connect waits for
  std::optional<net::PeerId> pending_offer_from_;
};

void ProbeAgent::HandleMessage(const net::ControlMessage& m) {
  if (m.kind == kProbeOfferRequestKind) {
    auto d = node_->Share(region_, m.from);
    if (!d.ok()) return;
    wire::ProbeOffer offer;
    offer.set_address(d->address);
    offer.set_length(d->length);
    offer.set_rkey(d->rkey);
    (void)node_->SendControl(m.from, kProbeOfferKind, offer.SerializeAsString(), Deadline::After(1s));
  } else if (m.kind == kProbeOfferKind) {
    auto offer = DecodeProbeOffer(m.payload, std::to_string(m.from));
    if (offer.ok() && pending_offer_from_ == m.from) pending_offer_ = *offer;
  } else if (m.kind == kProbeRosterKind && coordinator_ == m.from) {
    auto roster = DecodeProbeRoster(m.payload, "coordinator");
    if (!roster.ok()) {
      spdlog::warn("[probe {}] {}", o_.node, roster.status().message());
      return;
    }
    for (const auto& a : roster->agents()) {
      if (a.node() == o_.node) continue;
      Peer& p = peers_[a.node()];
      if (p.agent.host() != a.host() || p.agent.port() != a.port()) {  // new, or moved: connect afresh
        p.id.reset();
        p.region.reset();
      }
      p.agent = a;
    }
  }
}

void ProbeAgent::Pump(Deadline deadline) {
  int idle = 0;
  while (true) {
    auto m = node_->ReceiveControl(Deadline::At(SteadyClock::now()));
    if (m.ok()) {
      HandleMessage(*m);
      idle = 0;
      continue;
    }
    node_->Progress();
    while (node_->Accept(Deadline::At(SteadyClock::now())).ok()) {
      idle = 0;
    }
    if (deadline.Expired() || StopRequested()) return;
    // Between its own measurements a probe only serves the others' reads
    // and writes of its region. Spinning on that (the node yields, but
    // does not sleep) cost each probe ~20% of a core: six emulated hosts'
    // probes took 1.2 of this machine's 2 cores from the job they measure.
    // A short sleep once idle adds at most ~0.15 ms to the others' round
    // trips to it, well below what placement and migration tell apart.
    if (++idle > 32) std::this_thread::sleep_for(100us);
  }
}

Status ProbeAgent::EnsureCoordinator() {
  if (coordinator_ && node_->PeerStatus(*coordinator_).ok()) return Status::Ok();
  auto id = node_->Connect(o_.coordinator_host, o_.coordinator_port, Deadline::After(o_.probe_timeout));
  if (!id.ok()) {
    coordinator_.reset();
    return id.status().WithContext("coordinator " + o_.coordinator_host + ":" + std::to_string(o_.coordinator_port));
  }
  coordinator_ = *id;
  return Status::Ok();
}

Status ProbeAgent::Report(const std::vector<wire::LinkSampleRecord>& samples) {
  TENAX_RETURN_IF_ERROR(EnsureCoordinator());
  wire::ProbeReport r;
  r.mutable_agent()->set_node(o_.node);
  r.mutable_agent()->set_zone(o_.zone);
  r.mutable_agent()->set_host(o_.listen_host);
  r.mutable_agent()->set_port(port_);
  for (const auto& s : samples) *r.add_samples() = s;
  return node_->SendControl(*coordinator_, kProbeReportKind, r.SerializeAsString(), Deadline::After(o_.probe_timeout));
}

Status ProbeAgent::Connect(Peer& peer) {
  if (peer.id && peer.region && node_->PeerStatus(*peer.id).ok()) return Status::Ok();
  peer.region.reset();
  const Deadline deadline = Deadline::After(o_.probe_timeout);
  TENAX_ASSIGN_OR_RETURN(net::PeerId id, node_->Connect(peer.agent.host(), static_cast<uint16_t>(peer.agent.port()), deadline));
  peer.id = id;
  pending_offer_.reset();
  pending_offer_from_ = id;
  TENAX_RETURN_IF_ERROR(node_->SendControl(id, kProbeOfferRequestKind, "", deadline));
  while (!pending_offer_ && !deadline.Expired()) {
    auto m = node_->ReceiveControl(deadline);
    if (m.ok()) HandleMessage(*m);
  }
  pending_offer_from_.reset();
  if (!pending_offer_) return DeadlineExceeded("no probe offer from " + peer.agent.node());
  net::RegionDescriptor d{pending_offer_->address(), pending_offer_->length(), pending_offer_->rkey()};
  TENAX_ASSIGN_OR_RETURN(net::RemoteRegion remote, node_->Import(id, d));
  peer.region = std::move(remote);
  return Status::Ok();
}

wire::LinkSampleRecord ProbeAgent::Measure(Peer& peer) {
  wire::LinkSampleRecord s;
  s.set_peer(peer.agent.node());
  s.set_reachable(false);
  s.set_loss(1.0);
  if (Status st = Connect(peer); !st.ok()) {
    spdlog::warn("[probe {}] {} ({}:{}) unreachable: {}", o_.node, peer.agent.node(), peer.agent.host(),
                 peer.agent.port(), st.message());
    peer.id.reset();
    return s;
  }
  const net::RemoteRegion& remote = *peer.region;
  uint8_t ping[64];
  std::vector<double> rtts;
  int unanswered = 0;
  for (int i = 0; i < o_.pings; ++i) {
    const auto t0 = SteadyClock::now();
    net::Op op = node_->Get(ping, std::min<size_t>(sizeof ping, remote.size()), remote, 0);
    if (node_->Wait(op, Deadline::After(o_.probe_timeout)).ok()) {
      rtts.push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count());
    } else {
      ++unanswered;
      if (!node_->PeerStatus(*peer.id).ok()) {
        unanswered += o_.pings - i - 1;
        break;
      }
    }
  }
  if (rtts.empty()) {
    peer.id.reset();
    peer.region.reset();
    return s;
  }
  std::vector<double> sorted = rtts;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const int late = static_cast<int>(std::count_if(rtts.begin(), rtts.end(), [&](double r) { return r > 2 * median + 1.0; }));
  s.set_rtt_ms(median);
  s.set_loss(static_cast<double>(unanswered + late) / o_.pings);
  // Throughput: one write of the whole region, then a flush (completion at the target).
  const size_t bytes = std::min(o_.throughput_bytes, remote.size());
  const auto t0 = SteadyClock::now();
  net::Op put = node_->Put(region_.data(), bytes, remote, 0);
  Status st = node_->Wait(put, Deadline::After(o_.probe_timeout * 10));
  if (st.ok()) st = node_->Flush(*peer.id, Deadline::After(o_.probe_timeout * 10));
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  if (!st.ok() || seconds <= 0) {
    spdlog::warn("[probe {}] throughput to {} not measured: {}", o_.node, peer.agent.node(), st.message());
    s.set_throughput_gbps(0);
  } else {
    s.set_throughput_gbps(static_cast<double>(bytes) * 8.0 / seconds / 1e9);
  }
  s.set_reachable(true);
  return s;
}

Status ProbeAgent::Run() {
  net::NodeOptions no;
  no.name = "probe " + o_.node;
  no.secret = o_.secret;
  no.transports = o_.transports;
  no.sleep_when_idle = false;  // it times round trips: it paces itself (Run's loop)
  TENAX_ASSIGN_OR_RETURN(node_, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(port_, node_->Listen(o_.listen_host, o_.port));
  TENAX_ASSIGN_OR_RETURN(region_, node_->Allocate(std::max<size_t>(o_.throughput_bytes, 4096)));
  spdlog::info("[probe {}] listening on {}:{} (zone '{}'), reporting to {}:{} every {} ms", o_.node, o_.listen_host,
               port_, o_.zone, o_.coordinator_host, o_.coordinator_port, o_.interval.count());
  std::vector<wire::LinkSampleRecord> samples;
  for (int round = 1; o_.rounds == 0 || round <= o_.rounds + 1; ++round) {
    const Deadline next = Deadline::After(o_.interval);
    // Report the last round (the first report has none) and learn the roster.
    if (Status st = Report(samples); !st.ok()) {
      spdlog::warn("[probe {}] report not sent: {}", o_.node, st.message());
    } else {
      Pump(Deadline::After(std::min<std::chrono::milliseconds>(o_.probe_timeout, 200ms)));
    }
    if (round > o_.rounds && o_.rounds > 0) break;  // the last report is sent
    samples.clear();
    for (auto& [name, peer] : peers_) {
      if (StopRequested()) return Cancelled("probe " + o_.node + " stopped by signal " + std::to_string(StopSignal()));
      samples.push_back(Measure(peer));
      Pump(Deadline::At(SteadyClock::now()));
    }
    if (o_.on_round) o_.on_round(round, static_cast<int>(samples.size()));
    spdlog::debug("[probe {}] round {}: {} peers measured", o_.node, round, samples.size());
    Pump(next);
    if (StopRequested()) return Cancelled("probe " + o_.node + " stopped by signal " + std::to_string(StopSignal()));
  }
  // Serve the others' last measurements of us a little longer.
  Pump(Deadline::After(o_.probe_timeout));
  return Status::Ok();
}

}  // namespace

Status ValidateProbeOptions(const ProbeOptions& o) {
  if (o.node.empty()) return InvalidArgument("a probe agent needs a node name (--node)");
  if (o.coordinator_host.empty() || o.coordinator_port == 0) {
    return InvalidArgument("a probe agent needs the coordinator's host:port (--coordinator)");
  }
  if (o.interval < std::chrono::milliseconds(50)) return InvalidArgument("--interval must be at least 0.05 s");
  if (o.pings < 1 || o.pings > 1000) return InvalidArgument("--pings must be 1..1000");
  if (o.throughput_bytes < 4096 || o.throughput_bytes > (size_t{1} << 30)) {
    return InvalidArgument("--throughput-bytes must be 4096..1073741824");
  }
  if (o.rounds < 0) return InvalidArgument("--rounds must be >= 0 (0 = until stopped)");
  return Status::Ok();
}

Status RunProbeAgent(const ProbeOptions& options) {
  TENAX_RETURN_IF_ERROR(ValidateProbeOptions(options));
  ProbeAgent agent(options);
  return agent.Run();
}

}  // namespace tenax::sched

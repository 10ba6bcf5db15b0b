#include "job_topology.h"

#include "tenax/net/link_faults.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <thread>

#include "tenax/core/files.h"
#include "tenax/core/signals.h"
#include "tenax/net/node.h"
#include "tenax/sched/place/placer.h"

namespace tenax {
namespace {

using namespace std::chrono_literals;

nlohmann::json LinkJson(const sched::LinkMetrics& l) {
  return {{"rtt_ms", l.rtt_ms},
          {"loss", l.loss},
          {"throughput_gbps", std::isfinite(l.throughput_gbps) ? l.throughput_gbps : -1.0},
          {"reachable", l.reachable}};
}

// Starts a `tenax probe` on every host, reporting to `coordinator`, each
// logging to logs/probe-<host>.log.
Status StartProbes(const sched::EmulatedNetwork& network, const std::vector<sched::HostSpec>& hosts,
                   const std::string& self, const std::string& coordinator, const std::string& logs,
                   std::vector<std::unique_ptr<ChildProcess>>& probes) {
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::vector<std::string> argv = {self, "probe", "--node", hosts[i].name, "--zone", hosts[i].zone, "--listen",
                                     network.HostAddress(i) + ":0", "--coordinator", coordinator, "--interval",
                                     "1", "--timeout", "0.5", "--pings", "5", "--throughput-kib", "1024"};
    const std::string log_path = logs + "/probe-" + hosts[i].name + ".log";
    TENAX_ASSIGN_OR_RETURN(auto child, ChildProcess::StartLogged(network.OnHost(i, argv), log_path));
    probes.push_back(std::move(child));
  }
  return Status::Ok();
}

struct ProbeProgress {
  size_t pairs = 0;     // host pairs
  size_t measured = 0;  // pairs the link matrix has
  size_t reported = 0;  // probes reporting
};

// Polls the coordinator's link matrix into `snapshot` until every pair is
// measured, `probe_seconds` after every probe reported, 60 s after the
// start, or a stop. Unavailable when a probe exits.
Result<ProbeProgress> PollLinkMatrix(net::Node& node, net::PeerId coord, const std::vector<sched::HostSpec>& hosts,
                                     const std::vector<std::unique_ptr<ChildProcess>>& probes, const std::string& logs,
                                     double probe_seconds, std::optional<sched::LinkSnapshot>& snapshot) {
  const Deadline join = Deadline::After(60s);
  std::optional<Deadline> measure;
  ProbeProgress p;
  p.pairs = hosts.size() * (hosts.size() - 1) / 2;
  while (true) {
    for (size_t i = 0; i < probes.size(); ++i) {
      if (auto code = probes[i]->TryWait()) {
        return Unavailable("the probe on host " + hosts[i].name + " exited with code " + std::to_string(*code) +
                           " (its log: " + logs + "/probe-" + hosts[i].name + ".log)");
      }
    }
    auto s = sched::QueryLinks(node, coord, Deadline::After(5s));
    if (!s.ok()) return s.status().WithContext("the coordinator's link matrix");
    p.measured = 0;
    for (size_t i = 0; i < hosts.size(); ++i) {
      for (size_t j = i + 1; j < hosts.size(); ++j) p.measured += s->links.Link(hosts[i].name, hosts[j].name) ? 1 : 0;
    }
    p.reported = s->agents.size();
    snapshot = std::move(s).value();
    if (!measure && p.reported >= hosts.size()) {
      measure = Deadline::After(std::chrono::milliseconds(static_cast<int64_t>(probe_seconds * 1000)));
    }
    if (p.measured == p.pairs || (measure && measure->Expired()) || join.Expired() || StopRequested()) break;
    std::this_thread::sleep_for(100ms);  // polling the coordinator's matrix as the probes fill it
  }
  return p;
}

// "network_aware": the gang placer on the measured links.
Result<sched::Placement> PlaceByLinks(const TrainConfig& config, const std::vector<sched::NodeState>& nodes,
                                      const sched::LinkView& links, int workers, int servers) {
  sched::GangRequest req;
  req.job = config.cluster.job_id;
  req.workers = workers;
  req.servers = servers;
  req.zone = config.placement.zone;
  sched::PlacerOptions po;
  po.weights = config.placement.weights;
  return sched::PlaceGang(nodes, links, req, po);
}

// The host of each of `slots` slots. "spread": round-robin over zones
// (hosts in their listed order within a zone); "pack": hosts in listed
// order, each filled before the next.
std::vector<size_t> PlaceInListedOrder(const std::vector<sched::HostSpec>& hosts, int slots,
                                       const std::string& policy) {
  std::map<std::string, std::vector<size_t>> by_zone;
  std::vector<std::string> zone_order;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!by_zone.count(hosts[i].zone)) zone_order.push_back(hosts[i].zone);
    by_zone[hosts[i].zone].push_back(i);
  }
  std::vector<int> used(hosts.size(), 0);
  std::map<std::string, size_t> next_in_zone;
  std::vector<size_t> host_of_slot;
  size_t z = 0, h = 0;
  for (int s = 0; s < slots; ++s) {
    size_t host = 0;
    if (policy == "pack") {
      while (used[h] >= hosts[h].slots) ++h;
      host = h;
    } else {
      for (size_t tries = 0;; ++tries, z = (z + 1) % zone_order.size()) {
        const auto& members = by_zone[zone_order[z]];
        size_t& k = next_in_zone[zone_order[z]];
        bool found = false;
        for (size_t m = 0; m < members.size() && !found; ++m) {
          const size_t cand = members[(k + m) % members.size()];
          if (used[cand] < hosts[cand].slots) {
            host = cand;
            k = (k + m + 1) % members.size();
            found = true;
          }
        }
        if (found) break;
      }
      z = (z + 1) % zone_order.size();
    }
    ++used[host];
    host_of_slot.push_back(host);
  }
  return host_of_slot;
}

// "worker 0 on h1@zone-a, server 0 on h2@zone-b" for the log.
std::string PlacementLine(const std::vector<sched::HostSpec>& hosts, const std::vector<size_t>& host_of_slot,
                          const std::vector<std::string>& slot_roles, int workers) {
  std::string line;
  for (size_t s = 0; s < host_of_slot.size(); ++s) {
    const size_t index = s < static_cast<size_t>(workers) ? s : s - workers;
    line += (line.empty() ? "" : ", ") + slot_roles[s] + " " + std::to_string(index) + " on " +
            hosts[host_of_slot[s]].name + "@" + hosts[host_of_slot[s]].zone;
  }
  return line;
}

}  // namespace

Result<std::unique_ptr<sched::EmulatedNetwork>> MakeEmulatedNetwork(
    const TrainConfig& config, const std::function<void(const std::string&)>& notice) {
  TENAX_ASSIGN_OR_RETURN(auto network, sched::EmulatedNetwork::Create(config.topology));
  std::string zones;
  for (const auto& h : config.topology.hosts) zones += (zones.empty() ? "" : ", ") + h.name + "@" + h.zone;
  if (network->namespaces()) {
    notice("emulated topology: " + std::to_string(config.topology.hosts.size()) + " hosts in network namespaces (" +
           zones + "), bandwidth by tc htb, delay and loss at the transport");
  } else {
    notice("emulated topology on loopback (" + zones + "): " + network->fallback_reason() +
           "; bandwidth, delay and loss are all emulated at the transport");
  }
  return network;
}

Result<std::unique_ptr<JobTopology>> JobTopology::Create(const TrainConfig& config, const std::string& out_dir,
                                                         std::unique_ptr<sched::EmulatedNetwork> network) {
  std::unique_ptr<JobTopology> t(new JobTopology(config));
  if (network) {
    t->network_ = std::move(network);
  } else {
    const char* prefix = std::getenv(kTopologyPrefixEnvVar);
    if (prefix == nullptr || *prefix == '\0') return Internal("no emulated network to run on");
    t->network_ = sched::EmulatedNetwork::Attach(config.topology, prefix);
  }
  const std::string links = out_dir + "/emulated_links.json";
  TENAX_RETURN_IF_ERROR(
      WriteFileAtomic(links, config.topology.ToEmulatedLinks(!t->network_->namespaces()).ToJson() + "\n"));
  ::setenv(net::kEmulatedLinksEnvVar, links.c_str(), 1);
  // No link fault yet; the fault plan's link faults rewrite it.
  t->link_faults_file_ = out_dir + "/link_faults.json";
  TENAX_RETURN_IF_ERROR(net::LinkFaultBook{}.WriteTo(t->link_faults_file_));
  ::setenv(net::kLinkFaultsEnvVar, t->link_faults_file_.c_str(), 1);
  return t;
}

JobTopology::~JobTopology() {
  for (auto& p : probes_) p->Signal(SIGTERM);
  for (auto& p : probes_) {
    const auto deadline = SteadyClock::now() + 3s;
    while (!p->TryWait() && SteadyClock::now() < deadline) std::this_thread::sleep_for(10ms);  // reaping, bounded
  }
  probes_.clear();  // SIGKILLs any still running
}

std::vector<std::string> JobTopology::ChildSets() const {
  if (!network_->namespaces()) return {};
  return {"--set", "cluster.transports=tcp"};
}

std::vector<std::string> JobTopology::OnHost(size_t host, const std::vector<std::string>& argv) const {
  std::vector<std::string> a = argv;
  if (config_.worker.command.empty()) {
    a.insert(a.end(), {"--set", "cluster.host=" + network_->HostAddress(host)});
  } else {
    // The user's program (a worker command) learns its address from the
    // environment (tenax.torch.Manager reads TENAX_HOST).
    a.insert(a.begin(), {"env", "TENAX_HOST=" + network_->HostAddress(host)});
  }
  return network_->OnHost(host, a);
}

std::vector<std::string> JobTopology::OnSlot(int slot, const std::vector<std::string>& argv) const {
  return OnHost(host_of_slot_.at(static_cast<size_t>(slot)), argv);
}

std::string JobTopology::HostOfSlot(int slot) const {
  if (slot < 0 || static_cast<size_t>(slot) >= host_of_slot_.size()) return "";
  return HostLabel(host_of_slot_[static_cast<size_t>(slot)]);
}

std::string JobTopology::HostNameOfSlot(int slot) const {
  if (slot < 0 || static_cast<size_t>(slot) >= host_of_slot_.size()) return "";
  return nodes_[host_of_slot_[static_cast<size_t>(slot)]].name;
}

std::map<std::string, std::string> JobTopology::ZoneOfHost() const {
  std::map<std::string, std::string> zones;
  for (const auto& h : config_.topology.hosts) zones[h.name] = h.zone;
  return zones;
}

std::optional<size_t> JobTopology::HostIndexOfSlot(int slot) const {
  if (slot < 0 || static_cast<size_t>(slot) >= host_of_slot_.size()) return std::nullopt;
  return host_of_slot_[static_cast<size_t>(slot)];
}

void JobTopology::ReleaseSlotOn(size_t host) {
  if (host < nodes_.size() && nodes_[host].used > 0) nodes_[host].used -= 1;
}

std::vector<std::string> JobTopology::OnNewHost(const std::vector<std::string>& argv, std::string* host_name,
                                                size_t* host_index) {
  std::vector<int> free_hosts, peers;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].free() > 0) free_hosts.push_back(static_cast<int>(i));
  }
  for (size_t s = 0; s < host_of_slot_.size(); ++s) {
    if (slot_roles_[s] == "worker") peers.push_back(static_cast<int>(host_of_slot_[s]));
  }
  size_t host = host_of_slot_.empty() ? 0 : host_of_slot_[0];
  if (!free_hosts.empty() && snapshot_) {
    auto scored = sched::ScoreNodes(nodes_, free_hosts, peers, snapshot_->links, config_.placement.weights);
    auto best = std::max_element(scored.begin(), scored.end(),
                                 [](const sched::ScoredNode& a, const sched::ScoredNode& b) { return a.score < b.score; });
    host = static_cast<size_t>(best->index);
  }
  nodes_[host].used += 1;
  if (host_index) *host_index = host;
  if (host_name) *host_name = HostLabel(host);
  return OnHost(host, argv);
}

std::vector<std::string> JobTopology::OnChosenHost(size_t host, const std::vector<std::string>& argv) {
  nodes_.at(host).used += 1;
  return OnHost(host, argv);
}

std::string JobTopology::HostLabel(size_t host) const {
  if (host >= nodes_.size()) return "";
  return nodes_[host].name + (nodes_[host].zone.empty() ? "" : " (" + nodes_[host].zone + ")");
}

Status JobTopology::RefreshLinks(const std::string& coordinator_host, uint16_t coordinator_port,
                                 const std::string& secret) {
  // One node and one connection serve every refresh of the run (once a
  // second with placement.migrate); a failed query drops the connection
  // and the next refresh connects again.
  if (!links_node_) {
    net::NodeOptions no;
    no.name = "launcher-migration-links";
    no.secret = secret;
    TENAX_ASSIGN_OR_RETURN(links_node_, net::Node::Create(no));
  }
  if (!links_peer_) {
    TENAX_ASSIGN_OR_RETURN(net::PeerId peer,
                           links_node_->Connect(coordinator_host, coordinator_port, Deadline::After(2s)));
    links_peer_ = peer;
  }
  auto snapshot = sched::QueryLinks(*links_node_, *links_peer_, Deadline::After(2s));
  if (!snapshot.ok()) {
    links_node_->Disconnect(*links_peer_, Deadline::After(200ms));
    links_peer_.reset();
    return snapshot.status();
  }
  snapshot_ = std::move(*snapshot);
  return Status::Ok();
}

std::optional<sched::MigrationPlan> JobTopology::PlanMove(const std::vector<size_t>& member_hosts) const {
  if (!snapshot_) return std::nullopt;
  std::vector<int> members(member_hosts.begin(), member_hosts.end());
  return sched::PlanMigration(nodes_, snapshot_->links, members, config_.placement.migrate_thresholds,
                              config_.placement.weights);
}

Status JobTopology::ProbeAndPlace(const std::string& self, const std::string& coordinator_host,
                                  uint16_t coordinator_port, const std::string& secret, const std::string& logs,
                                  int workers, int servers) {
  const auto& hosts = config_.topology.hosts;
  const std::string coordinator = coordinator_host + ":" + std::to_string(coordinator_port);
  const auto start = SteadyClock::now();
  TENAX_RETURN_IF_ERROR(StartProbes(*network_, hosts, self, coordinator, logs, probes_));
  // Every probe must first report (starting them takes seconds on a loaded
  // machine); then the probes get placement.probe_seconds to measure every
  // pair. Pairs still unmeasured are scored by their zones' defaults.
  net::NodeOptions no;
  no.name = "launcher-links";
  no.secret = secret;
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  // 30 s, not 10: a loaded 2-core machine (ctest -j2 beside another cluster
  // test) once took longer than 10 s to answer this connect.
  TENAX_ASSIGN_OR_RETURN(net::PeerId coord, node->Connect(coordinator_host, coordinator_port, Deadline::After(30s)));
  TENAX_ASSIGN_OR_RETURN(ProbeProgress progress, PollLinkMatrix(*node, coord, hosts, probes_, logs,
                                                                config_.placement.probe_seconds, snapshot_));
  node->Disconnect(coord, Deadline::After(200ms));
  if (StopRequested()) return Cancelled("stopped while probing");
  probe_seconds_ = std::chrono::duration<double>(SteadyClock::now() - start).count();
  if (progress.measured < progress.pairs) {
    spdlog::warn("probes ({} of {} reporting) measured {} of {} host pairs in time; the others are scored by their zones",
                 progress.reported, hosts.size(), progress.measured, progress.pairs);
  }

  for (const auto& h : hosts) nodes_.push_back(sched::NodeState{h.name, h.zone, h.slots, 0, static_cast<int>(nodes_.size())});
  const std::string& policy = config_.placement.policy;
  sched::LinkMatrix empty;
  const sched::LinkView& links = snapshot_ ? static_cast<const sched::LinkView&>(snapshot_->links) : empty;
  if (policy == "network_aware") {
    TENAX_ASSIGN_OR_RETURN(sched::Placement p, PlaceByLinks(config_, nodes_, links, workers, servers));
    for (const auto& s : p.slots) {
      host_of_slot_.push_back(static_cast<size_t>(s.node));
      slot_roles_.push_back(s.role);
    }
    worst_link_ = p.worst_link;
  } else {
    const std::vector<size_t> placed = PlaceInListedOrder(hosts, workers + servers, policy);
    host_of_slot_.insert(host_of_slot_.end(), placed.begin(), placed.end());
    for (int s = 0; s < workers + servers; ++s) slot_roles_.push_back(s < workers ? "worker" : "server");
    std::vector<int> worker_nodes;
    for (int s = 0; s < workers; ++s) worker_nodes.push_back(static_cast<int>(host_of_slot_[s]));
    worst_link_ = sched::WorstLinkAmong(nodes_, worker_nodes, links);
  }
  for (size_t h : host_of_slot_) nodes_[h].used += 1;
  spdlog::info("placement ({}, zone {}): {}", policy, sched::ZoneConstraintName(config_.placement.zone),
               PlacementLine(hosts, host_of_slot_, slot_roles_, workers));
  return Status::Ok();
}

int JobTopology::AutoTcpStreams(std::string* why) const {
  if (why) {
    char text[160];
    std::snprintf(text, sizeof text, "worst worker link: round trip %.2f ms, loss %.4f", worst_link_.rtt_ms,
                  worst_link_.loss);
    *why = text;
  }
  return sched::AutoTcpStreams(worst_link_);
}

sched::AllreduceChoice JobTopology::ChooseAllreduce(int workers, const std::string& setting) {
  std::vector<sched::NodeState> members;
  for (int s = 0; s < workers && static_cast<size_t>(s) < host_of_slot_.size(); ++s) {
    members.push_back(nodes_[host_of_slot_[static_cast<size_t>(s)]]);
  }
  sched::LinkMatrix empty;
  const sched::LinkView& links = snapshot_ ? static_cast<const sched::LinkView&>(snapshot_->links) : empty;
  // The launcher does not build the model: the estimate is for the
  // placer's figure of gradient bytes (sched::GangRequest), which moves
  // the round-trip terms only; the choice rarely depends on it.
  const double bytes = sched::GangRequest{}.gradient_bytes;
  sched::AllreduceChoice c = sched::ChooseAllreduce(members, links, bytes);
  if (setting == "ring" && c.hierarchical) {
    c.hierarchical = false;
    c.reason = "flat ring: train.allreduce = \"ring\" (the cost model preferred hierarchical: " + c.reason + ")";
  } else if (setting == "hierarchical" && !c.hierarchical && c.zone_count > 1 && c.zone_size > 0) {
    c.hierarchical = true;
    c.reason = "hierarchical: train.allreduce = \"hierarchical\" (" + c.reason + ")";
  }
  allreduce_ = c;
  return c;
}

nlohmann::json JobTopology::Summary() const {
  const auto& hosts = config_.topology.hosts;
  nlohmann::json slots = nlohmann::json::array();
  std::set<std::string> zones;
  int worker_index = 0, server_index = 0;
  for (size_t s = 0; s < host_of_slot_.size(); ++s) {
    const auto& h = hosts[host_of_slot_[s]];
    const bool worker = slot_roles_[s] == "worker";
    slots.push_back({{"role", slot_roles_[s]}, {"index", worker ? worker_index++ : server_index++}, {"host", h.name}, {"zone", h.zone}});
    if (worker) zones.insert(h.zone);
  }
  nlohmann::json j{{"mode", network_->namespaces() ? "namespaces" : "loopback"},
                   {"policy", config_.placement.policy},
                   {"zone_constraint", sched::ZoneConstraintName(config_.placement.zone)},
                   {"slots", slots},
                   {"worker_zones", std::vector<std::string>(zones.begin(), zones.end())},
                   {"worst_worker_link", LinkJson(worst_link_)},
                   {"probe_seconds", probe_seconds_}};
  if (!network_->namespaces()) j["fallback_reason"] = network_->fallback_reason();
  if (snapshot_) j["links"] = nlohmann::json::parse(snapshot_->links.ToJson(), nullptr, false);
  if (allreduce_) {
    j["allreduce"] = {{"algorithm", allreduce_->hierarchical ? "hierarchical" : "ring"},
                      {"reason", allreduce_->reason},
                      {"estimated_ring_seconds", allreduce_->ring_seconds},
                      {"estimated_hierarchical_seconds", allreduce_->hierarchical_seconds},
                      {"worker_zones_by_rank", allreduce_->zones}};
  }
  return j;
}

}  // namespace tenax

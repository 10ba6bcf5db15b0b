// The launcher's side of an emulated topology (docs/placement.md): builds
// the hosts (sched::EmulatedNetwork), runs a `tenax probe` on each, places
// the job's processes on hosts from the probes' link matrix (or by the
// job's "spread"/"pack" policy), and wraps each child's command line so it
// runs on its host. Reports what it did for summary.json.
//
// Threading: the launcher's thread. Lifetime: the namespaces and probes go
// when this object does (probes get SIGTERM, then SIGKILL).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenax/core/process_supervisor.h"
#include "tenax/core/status.h"
#include "tenax/core/subprocess.h"
#include "tenax/sched/emulate/emulated_network.h"
#include "tenax/sched/place/allreduce_choice.h"
#include "tenax/sched/probe/link_book.h"
#include "tenax/job/train_config.h"
#include "tenax/net/node.h"

namespace tenax {

inline constexpr char kTopologyPrefixEnvVar[] = "TENAX_TOPOLOGY_PREFIX";

// Makes the emulated hosts of `config` and says so through `notice`.
Result<std::unique_ptr<sched::EmulatedNetwork>> MakeEmulatedNetwork(const TrainConfig& config,
                                                                    const std::function<void(const std::string&)>& notice);

class JobTopology {
 public:
  // Takes the hosts: `network` as made by the caller (loopback), or, in the
  // launcher re-run inside the switch namespace ($TENAX_TOPOLOGY_PREFIX),
  // the namespaces its parent made. Writes out_dir/emulated_links.json and
  // points $TENAX_EMULATED_LINKS at it (children inherit it).
  static Result<std::unique_ptr<JobTopology>> Create(const TrainConfig& config, const std::string& out_dir,
                                                     std::unique_ptr<sched::EmulatedNetwork> network);
  ~JobTopology();

  // Where the coordinator listens (and everyone reaches it).
  std::string ControlHost() const { return network_->ControlAddress(); }
  // --set overrides every child gets (TCP between hosts in namespaces mode).
  std::vector<std::string> ChildSets() const;
  // The hosts are network namespaces (their processes talk over TCP), not
  // names on loopback.
  bool namespaces() const { return network_->namespaces(); }

  // Starts one probe per host, waits until every pair of hosts is measured
  // (at most placement.probe_seconds), then places `slots` processes
  // (workers first, then `servers` parameter servers).
  Status ProbeAndPlace(const std::string& self, const std::string& coordinator_host, uint16_t coordinator_port,
                       const std::string& secret, const std::string& logs, int workers, int servers);

  // argv of process `slot` (as placed), wrapped to run on its host.
  std::vector<std::string> OnSlot(int slot, const std::vector<std::string>& argv) const;
  // argv of a process started later (a joiner): the host scored best
  // against the placed workers among hosts with a free slot.
  // `host_name`, if given, gets the host's name and zone; `host_index`, the
  // host (for ReleaseSlotOn).
  std::vector<std::string> OnNewHost(const std::vector<std::string>& argv, std::string* host_name = nullptr,
                                     size_t* host_index = nullptr);
  // argv of a process started on `host` (a migration's newcomer, the host
  // PlanMove chose): books a slot there (ReleaseSlotOn frees it).
  std::vector<std::string> OnChosenHost(size_t host, const std::vector<std::string>& argv);
  // Live migration (placement.migrate): the coordinator's link matrix read
  // again (the probes measure all along). Errors leave the last one.
  Status RefreshLinks(const std::string& coordinator_host, uint16_t coordinator_port, const std::string& secret);
  // sched::PlanMigration over the hosts (`member_hosts`: the host of each
  // live member) and the latest matrix; nullopt while no member's links
  // break placement.migrate's thresholds.
  std::optional<sched::MigrationPlan> PlanMove(const std::vector<size_t>& member_hosts) const;
  // "a2 (zone-a)".
  std::string HostLabel(size_t host) const;
  // The host process `slot` was placed on (nullopt if none).
  std::optional<size_t> HostIndexOfSlot(int slot) const;
  // A process on `host` exited (an elastic job's worker lost or gone): its
  // slot is free for the next joiner, which then lands where the lost one
  // was when nothing scores better (and an elastic job's zones stay even).
  void ReleaseSlotOn(size_t host);
  // "h2 (zone-b)": the host process `slot` was placed on ("" if none).
  std::string HostOfSlot(int slot) const;
  // "h2": its name alone ("" if none).
  std::string HostNameOfSlot(int slot) const;
  // Every host's zone, by host name.
  std::map<std::string, std::string> ZoneOfHost() const;
  // The link-fault file every child follows (net/link_faults.h): written
  // empty by Create, rewritten by the fault plan's link faults.
  const std::string& link_faults_file() const { return link_faults_file_; }

  // The allreduce of a fixed sync job's first `workers` slots (after
  // ProbeAndPlace), by train.allreduce: "auto" asks sched::ChooseAllreduce
  // over the placed workers and the probes' links; "ring" keeps the flat
  // ring; "hierarchical" takes the hierarchical one whenever the zones have
  // equal sizes. Kept for Summary().
  sched::AllreduceChoice ChooseAllreduce(int workers, const std::string& setting);

  // net.tcp_streams = "auto" after ProbeAndPlace: data connections per peer
  // from the worst link among the placed workers. One TCP flow fills a
  // short clean link; on a long or lossy one its window (the bandwidth-delay
  // product, cut at every loss) holds it below the link's rate, and several
  // flows side by side add up (PCCL's reason for its streams). So 1 stream
  // when that link's round trip is under 2 ms with no loss measured, else
  // 4. `why` gets the link's numbers.
  int AutoTcpStreams(std::string* why) const;

  nlohmann::json Summary() const;

 private:
  explicit JobTopology(const TrainConfig& config) : config_(config) {}
  std::vector<std::string> OnHost(size_t host, const std::vector<std::string>& argv) const;

  const TrainConfig& config_;
  std::unique_ptr<sched::EmulatedNetwork> network_;
  std::vector<std::unique_ptr<ChildProcess>> probes_;
  std::optional<sched::LinkSnapshot> snapshot_;
  std::unique_ptr<net::Node> links_node_;  // RefreshLinks' node and its connection to the coordinator
  std::optional<net::PeerId> links_peer_;
  std::vector<sched::NodeState> nodes_;
  std::vector<size_t> host_of_slot_;
  std::vector<std::string> slot_roles_;
  double probe_seconds_ = 0;
  sched::LinkMetrics worst_link_;
  std::optional<sched::AllreduceChoice> allreduce_;
  std::string link_faults_file_;
};

}  // namespace tenax

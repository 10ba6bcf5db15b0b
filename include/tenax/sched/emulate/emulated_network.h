// The hosts of an emulated topology on this machine (layer sched,
// docs/placement.md).
//
// Namespaces mode (root, `ip netns` works): one network namespace per host
// and one "switch" namespace holding a bridge; each host has a veth to the
// bridge with an address 10.77.0.<i+1>/24, and the switch has 10.77.0.254
// (the launcher and the coordinator live there). Addresses exist only
// inside these namespaces; nothing in the machine's own namespace changes.
// Each host's egress gets an htb qdisc: one class at the same-zone rate,
// one at the cross-zone rate, with u32 filters on the other zones' host
// addresses. Delay and loss are not the kernel's (no netem here): the
// transport seam adds them (net/emulated_links.h).
//
// Loopback mode (no root or no namespaces): every host is 127.0.0.1 and the
// transport seam carries bandwidth too.
//
// The launcher runs inside the switch namespace: `tenax run` makes the
// network, then runs itself again there (TENAX_TOPOLOGY_PREFIX set), so
// that its own node, the coordinator and the probes' link queries see the
// emulated network.
//
// The destructor removes every namespace it made (and with them the veths
// and qdiscs). Namespaces left by a crashed run (named tnx<pid>-..., pid
// gone) are removed by the next Create.
//
// Threading: not thread-safe; one owner.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/sched/emulate/topology.h"

namespace tenax::sched {

class EmulatedNetwork {
 public:
  // mode "auto" falls back to loopback (and `fallback_reason` says why);
  // "namespaces" fails (Unavailable, with the command's output) instead.
  static Result<std::unique_ptr<EmulatedNetwork>> Create(const TopologySpec& spec);
  // The network another process made (and owns) under `prefix`: for the
  // launcher re-run inside its control namespace. Removes nothing.
  static std::unique_ptr<EmulatedNetwork> Attach(const TopologySpec& spec, const std::string& prefix);
  ~EmulatedNetwork();
  EmulatedNetwork(const EmulatedNetwork&) = delete;
  EmulatedNetwork& operator=(const EmulatedNetwork&) = delete;

  bool namespaces() const { return namespaces_; }
  const std::string& fallback_reason() const { return fallback_reason_; }
  const TopologySpec& spec() const { return spec_; }
  // The address host `i` (index into spec().hosts) listens on.
  std::string HostAddress(size_t i) const;
  // Where the launcher and the coordinator are reached from every host.
  std::string ControlAddress() const;
  // argv run on host `i`: in its namespace, with TENAX_EMULATED_HOST set.
  std::vector<std::string> OnHost(size_t i, const std::vector<std::string>& argv) const;
  // argv run in the switch namespace, where the launcher and coordinator
  // live (`ip netns exec` also mounts that namespace's /sys, which UCX reads
  // to find its devices: a bare setns would not). Namespaces mode only.
  std::vector<std::string> InControlNamespace(const std::vector<std::string>& argv) const;
  const std::string& prefix() const { return prefix_; }
  // Removes everything now (the destructor does it too); idempotent.
  void Remove();

 private:
  explicit EmulatedNetwork(TopologySpec spec) : spec_(std::move(spec)) {}
  Status Build();
  std::string HostNamespace(size_t i) const;

  TopologySpec spec_;
  bool namespaces_ = false;
  std::string fallback_reason_;
  std::string prefix_;                   // "tnx<pid>"
  std::vector<std::string> created_;     // namespaces to delete
};

}  // namespace tenax::sched

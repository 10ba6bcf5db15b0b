#include "tenax/sched/emulate/emulated_network.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tenax/core/subprocess.h"
#include "tenax/net/emulated_links.h"

namespace tenax::sched {
namespace {

constexpr char kSubnet[] = "10.77.0.";
constexpr char kSwitchSuffix[] = "-sw";

// Runs a command; its output (stdout and stderr) goes into the error.
Status Run(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  auto out = RunAndCapture({"sh", "-c", line + " 2>&1"});
  if (!out.ok()) return Unavailable("'" + line + "': " + out.status().message());
  if (out->exit_code != 0) {
    std::string text = out->stdout_text;
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return Unavailable("'" + line + "' failed (exit " + std::to_string(out->exit_code) + "): " + text);
  }
  return Status::Ok();
}

std::string Rate(double gbps) {
  // htb wants a finite rate: "unlimited" is 100 Gbit/s, far above loopback.
  const double kbit = gbps > 0 ? gbps * 1e6 : 100e6;
  return std::to_string(static_cast<int64_t>(kbit)) + "kbit";
}

// Namespaces of earlier runs whose process is gone ("tnx<pid>-...").
void RemoveStaleNamespaces() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("tnx", 0) != 0) continue;
    const size_t dash = name.find('-');
    if (dash == std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atoi(name.substr(3, dash - 3).c_str()));
    if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH)) {
      spdlog::info("removing network namespace {} left by an earlier run (pid {} is gone)", name, pid);
      (void)Run({"ip", "netns", "del", name});
    }
  }
}

}  // namespace

Result<std::unique_ptr<EmulatedNetwork>> EmulatedNetwork::Create(const TopologySpec& spec) {
  if (!spec.enabled()) return InvalidArgument("no emulated topology: topology.hosts is empty");
  std::unique_ptr<EmulatedNetwork> n(new EmulatedNetwork(spec));
  n->prefix_ = "tnx" + std::to_string(::getpid());
  if (spec.mode == "loopback") {
    n->fallback_reason_ = "topology.mode = \"loopback\"";
    return n;
  }
  Status built = ::geteuid() == 0 ? n->Build() : Unavailable("network namespaces need root (this is uid " +
                                                              std::to_string(::geteuid()) + ")");
  if (!built.ok()) {
    n->Remove();
    if (spec.mode == "namespaces") return built;
    n->fallback_reason_ = built.message();
    return n;
  }
  n->namespaces_ = true;
  return n;
}

Status EmulatedNetwork::Build() {
  RemoveStaleNamespaces();
  const std::string sw = prefix_ + kSwitchSuffix;
  TENAX_RETURN_IF_ERROR(Run({"ip", "netns", "add", sw}));
  created_.push_back(sw);
  TENAX_RETURN_IF_ERROR(Run({"ip", "-n", sw, "link", "set", "lo", "up"}));
  TENAX_RETURN_IF_ERROR(Run({"ip", "-n", sw, "link", "add", "br0", "type", "bridge"}));
  TENAX_RETURN_IF_ERROR(Run({"ip", "-n", sw, "addr", "add", ControlAddress() + "/24", "dev", "br0"}));
  TENAX_RETURN_IF_ERROR(Run({"ip", "-n", sw, "link", "set", "br0", "up"}));
  for (size_t i = 0; i < spec_.hosts.size(); ++i) {
    const std::string ns = HostNamespace(i);
    const std::string port = "v" + std::to_string(i);
    TENAX_RETURN_IF_ERROR(Run({"ip", "netns", "add", ns}));
    created_.push_back(ns);
    TENAX_RETURN_IF_ERROR(Run({"ip", "-n", ns, "link", "set", "lo", "up"}));
    TENAX_RETURN_IF_ERROR(Run({"ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", sw}));
    TENAX_RETURN_IF_ERROR(Run({"ip", "-n", sw, "link", "set", port, "master", "br0"}));
    TENAX_RETURN_IF_ERROR(Run({"ip", "-n", sw, "link", "set", port, "up"}));
    TENAX_RETURN_IF_ERROR(Run({"ip", "-n", ns, "addr", "add", HostAddress(i) + "/24", "dev", "eth0"}));
    TENAX_RETURN_IF_ERROR(Run({"ip", "-n", ns, "link", "set", "eth0", "up"}));
    // Egress shaping by destination zone: class 1:10 same zone (default),
    // 1:20 other zones (and the switch, i.e. the coordinator: control only).
    TENAX_RETURN_IF_ERROR(Run({"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:",
                               "htb", "default", "10"}));
    TENAX_RETURN_IF_ERROR(Run({"ip", "netns", "exec", ns, "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid",
                               "1:10", "htb", "rate", Rate(spec_.same_zone.bandwidth_gbps)}));
    TENAX_RETURN_IF_ERROR(Run({"ip", "netns", "exec", ns, "tc", "class", "add", "dev", "eth0", "parent", "1:", "classid",
                               "1:20", "htb", "rate", Rate(spec_.cross_zone.bandwidth_gbps)}));
    for (size_t j = 0; j < spec_.hosts.size(); ++j) {
      if (spec_.hosts[j].zone == spec_.hosts[i].zone) continue;
      TENAX_RETURN_IF_ERROR(Run({"ip", "netns", "exec", ns, "tc", "filter", "add", "dev", "eth0", "parent", "1:",
                                 "protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", HostAddress(j) + "/32",
                                 "flowid", "1:20"}));
    }
  }
  spdlog::info("emulated topology: {} hosts in namespaces {}-h*, switch {} ({})", spec_.hosts.size(), prefix_, sw,
               ControlAddress());
  return Status::Ok();
}

EmulatedNetwork::~EmulatedNetwork() { Remove(); }

void EmulatedNetwork::Remove() {
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    if (Status st = Run({"ip", "netns", "del", *it}); !st.ok()) spdlog::warn("could not remove {}: {}", *it, st.message());
  }
  created_.clear();
}

std::string EmulatedNetwork::HostNamespace(size_t i) const { return prefix_ + "-h" + std::to_string(i); }

std::string EmulatedNetwork::HostAddress(size_t i) const {
  return namespaces_ || !created_.empty() ? kSubnet + std::to_string(i + 1) : std::string("127.0.0.1");
}

std::string EmulatedNetwork::ControlAddress() const {
  return namespaces_ || !created_.empty() ? std::string(kSubnet) + "254" : "127.0.0.1";
}

std::vector<std::string> EmulatedNetwork::OnHost(size_t i, const std::vector<std::string>& argv) const {
  std::vector<std::string> out;
  if (namespaces_) out = {"ip", "netns", "exec", HostNamespace(i)};
  out.push_back("env");
  out.push_back(std::string(net::kEmulatedHostEnvVar) + "=" + spec_.hosts[i].name);
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::string> EmulatedNetwork::InControlNamespace(const std::vector<std::string>& argv) const {
  std::vector<std::string> out = {"ip", "netns", "exec", prefix_ + kSwitchSuffix};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::unique_ptr<EmulatedNetwork> EmulatedNetwork::Attach(const TopologySpec& spec, const std::string& prefix) {
  std::unique_ptr<EmulatedNetwork> n(new EmulatedNetwork(spec));
  n->prefix_ = prefix;
  n->namespaces_ = true;
  return n;
}

}  // namespace tenax::sched

// tenax probe --node NAME --coordinator HOST:PORT [--zone Z] [--listen HOST:PORT] ...
// tenax probe --links --coordinator HOST:PORT
// A network probe agent (sched/probe/probe_agent.h), or a print of the
// coordinator's link matrix (sched/probe/link_book.h).
#include <cstdio>

#include "command.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"
#include "tenax/sched/probe/link_book.h"
#include "tenax/sched/probe/probe_agent.h"

namespace tenax::cli {
namespace {

struct ProbeArgs {
  std::string node, zone, listen = "127.0.0.1:0", coordinator, transports = "tcp", log_level = "info";
  double interval_seconds = 2.0, timeout_seconds = 1.0;
  int pings = 10, rounds = 0;
  int64_t throughput_kib = 1024;
  bool links = false;
};

Status RunProbe(const ProbeArgs& a) {
  TENAX_ASSIGN_OR_RETURN(net::HostPort coord, net::ParseHostPort(a.coordinator));
  if (coord.port == 0) return InvalidArgument("--coordinator needs a port: HOST:PORT");
  TENAX_ASSIGN_OR_RETURN(std::string secret, net::ResolveSecret(""));
  InitLogging(a.links ? "links" : "probe " + a.node, a.log_level);
  if (a.links) {
    TENAX_ASSIGN_OR_RETURN(sched::LinkSnapshot s,
                           sched::FetchLinks(coord.host, coord.port, secret, Deadline::After(std::chrono::seconds(10))));
    std::printf("%s\n", s.links.ToJson().c_str());
    return Status::Ok();
  }
  TENAX_ASSIGN_OR_RETURN(net::HostPort listen, net::ParseHostPort(a.listen));
  InstallStopHandlers();
  sched::ProbeOptions o;
  o.node = a.node;
  o.zone = a.zone;
  o.listen_host = listen.host;
  o.port = listen.port;
  o.coordinator_host = coord.host;
  o.coordinator_port = coord.port;
  o.secret = secret;
  o.transports = a.transports;
  o.interval = std::chrono::milliseconds(static_cast<int64_t>(a.interval_seconds * 1000));
  o.probe_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_seconds * 1000));
  o.pings = a.pings;
  o.rounds = a.rounds;
  o.throughput_bytes = static_cast<size_t>(a.throughput_kib) << 10;
  o.on_round = [&a](int round, int peers) {
    // One line per round on stdout for whoever started us (tests, the launcher's log).
    std::printf("probe %s: round %d measured %d peers\n", a.node.c_str(), round, peers);
    std::fflush(stdout);
  };
  return sched::RunProbeAgent(o);
}

}  // namespace

void AddProbeCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<ProbeArgs>();
  CLI::App* cmd = root.add_subcommand(
      "probe", "Measure delay, loss and throughput to the other nodes' probes and report them to the coordinator");
  cmd->add_option("--coordinator", a->coordinator, "The coordinator that keeps the link matrix")
      ->required()
      ->type_name("HOST:PORT");
  cmd->add_flag("--links", a->links, "Print the coordinator's link matrix (JSON) and exit; no probing");
  cmd->add_option("--node", a->node, "This node's name (unique among probes)");
  cmd->add_option("--zone", a->zone, "This node's zone (\"\" = unknown)");
  cmd->add_option("--listen", a->listen, "Address the other probes reach this one on (port 0 = any free port)")
      ->capture_default_str();
  cmd->add_option("--interval", a->interval_seconds, "Seconds between rounds")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  cmd->add_option("--timeout", a->timeout_seconds, "Seconds a connect or a probe may take before it counts as lost")
      ->check(CLI::Range(0.01, 60.0))
      ->capture_default_str();
  cmd->add_option("--pings", a->pings, "Delay probes per peer and round")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--throughput-kib", a->throughput_kib, "KiB written per peer and round to measure throughput")
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--rounds", a->rounds, "Stop after this many rounds (0 = until SIGTERM)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--transports", a->transports, "UCX transports to measure over (\"tcp\": the network path)")
      ->capture_default_str();
  cmd->add_option("--log-level", a->log_level, "trace, debug, info, warn or error")->capture_default_str();
  cmd->footer("The cluster secret comes from $TENAX_SECRET (at least 16 bytes). See docs/placement.md.");
  cmd->callback([a, &exit_code] {
    if (!a->links && a->node.empty()) {
      exit_code = ReportError("probe", InvalidArgument("--node is required (or --links to print the matrix)"));
      return;
    }
    Status st = RunProbe(*a);
    exit_code = st.ok() ? 0 : ReportError("probe", st);
  });
}

}  // namespace tenax::cli

// tenax sched extender --listen HOST:PORT [--state FILE] [--url-prefix P]
//                      [--weights-throughput X --weights-delay Y --weights-loss Z]
// The Kubernetes scheduler extender; the role is sched/k8s/extender_server.h.
#include <cstdio>
#include <memory>
#include <thread>

#include "command.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"
#include "tenax/sched/k8s/extender_server.h"
#include "tenax/sched/k8s/coordinator_state_source.h"
#include "tenax/sched/k8s/file_state_source.h"

namespace tenax::cli {
namespace {

struct ExtenderArgs {
  std::string listen = "127.0.0.1:8888";
  std::string state_path;
  std::string coordinator;  // HOST:PORT of a coordinator with probes reporting to it
  double refresh_seconds = 5;
  std::string url_prefix = "/tenax";
  sched::ScoreWeights weights;
  int64_t max_body_mib = 16;
  std::string log_level = "info";
};

Status RunExtender(const ExtenderArgs& a) {
  TENAX_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(a.listen));
  TENAX_RETURN_IF_ERROR(sched::ValidateWeights(a.weights));
  InitLogging("sched-extender", a.log_level);
  InstallStopHandlers();

  std::unique_ptr<sched::ClusterStateSource> state;
  if (a.state_path.empty()) {
    spdlog::info("no --state file: no links measured, no jobs placed; zones come from node labels only");
    state = std::make_unique<sched::StaticStateSource>(sched::EmptySnapshot());
  } else {
    TENAX_ASSIGN_OR_RETURN(state, sched::FileStateSource::Open(a.state_path));
  }
  if (!a.coordinator.empty()) {
    // Links and zones from the coordinator's probes; jobs (and any zones it
    // names) still from --state.
    TENAX_ASSIGN_OR_RETURN(net::HostPort coord, net::ParseHostPort(a.coordinator));
    if (coord.port == 0) return InvalidArgument("--coordinator needs a port: HOST:PORT");
    TENAX_ASSIGN_OR_RETURN(std::string secret, net::ResolveSecret(""));
    state = std::make_unique<sched::CoordinatorStateSource>(
        coord.host, coord.port, secret, std::chrono::milliseconds(static_cast<int64_t>(a.refresh_seconds * 1000)),
        std::move(state));
  }

  sched::ExtenderServerOptions o;
  o.host = hp.host;
  o.port = hp.port;
  o.url_prefix = a.url_prefix;
  o.extender.weights = a.weights;
  o.extender.max_body_bytes = static_cast<size_t>(a.max_body_mib) << 20;
  o.state = state.get();
  TENAX_ASSIGN_OR_RETURN(std::unique_ptr<sched::ExtenderServer> server, sched::ExtenderServer::Start(o));
  const std::string prefix = server->url_prefix();
  spdlog::info(
      "serving the kube-scheduler extender on {}:{}: POST {}/filter, POST {}/prioritize, GET /healthz "
      "(weights: throughput {}, delay {}, loss {})",
      hp.host, server->port(), prefix, prefix, a.weights.throughput, a.weights.delay, a.weights.loss);
  // One line on stdout for whoever started us (tests, scripts).
  std::printf("extender listening on %s:%u\n", hp.host.c_str(), server->port());
  std::fflush(stdout);

  // The handler only sets a flag (core/signals.h); a short nap keeps the
  // stop prompt without a second thread.
  while (!StopRequested()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const int sig = StopSignal();
  server->Stop();
  const sched::ExtenderCounters c = server->counters();
  spdlog::info("stopped by signal {}: answered {} filter and {} prioritize requests, refused {}", sig, c.filter,
               c.prioritize, c.refused);
  return Status::Ok();
}

}  // namespace

void AddSchedCommand(CLI::App& root, int& exit_code) {
  CLI::App* sched = root.add_subcommand("sched", "Network-aware placement: the Kubernetes scheduler extender");
  sched->require_subcommand(1);

  auto a = std::make_shared<ExtenderArgs>();
  CLI::App* cmd = sched->add_subcommand(
      "extender",
      "Serve kube-scheduler's extender protocol (k8s.io/kube-scheduler/extender/v1): filter and prioritize "
      "nodes for tenax pods by zone and measured links");
  cmd->add_option("--listen", a->listen, "Address to serve HTTP on (port 0 = any free port)")
      ->type_name("HOST:PORT")
      ->capture_default_str();
  cmd->add_option("--state", a->state_path,
                  "Cluster state JSON {\"links\": [...], \"jobs\": {job: [nodes]}, \"zones\": {node: zone}}, "
                  "re-read when it changes (default: none; zones from node labels, links unmeasured)")
      ->type_name("FILE");
  cmd->add_option("--coordinator", a->coordinator,
                  "Read the link matrix (and probe zones) from this coordinator's probes, refreshed in the "
                  "background; needs $TENAX_SECRET")
      ->type_name("HOST:PORT");
  cmd->add_option("--refresh-seconds", a->refresh_seconds, "How often to re-read the coordinator's link matrix")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  cmd->add_option("--url-prefix", a->url_prefix,
                  "Path before the verbs: POST <prefix>/filter and <prefix>/prioritize (kube-scheduler's urlPrefix "
                  "ends with it)")
      ->capture_default_str();
  cmd->add_option("--weights-throughput", a->weights.throughput, "Score weight of a node's worst-link throughput")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--weights-delay", a->weights.delay, "Score weight of its worst round-trip delay")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--weights-loss", a->weights.loss, "Score weight of its worst loss")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--max-body-mib", a->max_body_mib, "Largest request body accepted (larger: HTTP 413)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}))
      ->capture_default_str();
  cmd->add_option("--log-level", a->log_level, "trace, debug, info, warn or error")->capture_default_str();
  cmd->footer(
      "Pods are tenax's when they carry the label tenax.dev/job; others pass every filter and score 0.\n"
      "Annotations: tenax.dev/zone-constraint = hard | soft (default soft), tenax.dev/storage-nodes = a,b,c.\n"
      "Node zones: label topology.kubernetes.io/zone. Register it in KubeSchedulerConfiguration.extenders with\n"
      "urlPrefix http://HOST:PORT/tenax, filterVerb filter, prioritizeVerb prioritize (docs/placement.md).\n"
      "Once listening it prints 'extender listening on HOST:PORT'. SIGTERM or SIGINT stops it (exit 0).");
  cmd->callback([a, &exit_code] {
    Status st = RunExtender(*a);
    exit_code = st.ok() ? 0 : ReportError("sched extender", st);
  });
}

}  // namespace tenax::cli

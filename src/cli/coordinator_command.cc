// tenax coordinator --job FILE --state DB [--port N] [--port-file F]
//                   [--metrics-listen H:P [--metrics-port-file F]] [--set k=v]
#include "command.h"
#include "tenax/coord/coordinator.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"
#include "tenax/sched/probe/link_book.h"
#include "tenax/roles/sync_job.h"

namespace tenax::cli {
namespace {

struct CoordinatorArgs {
  std::string job_path;
  std::string state_path;
  std::string port_file;
  std::string metrics_listen;
  std::string metrics_port_file;
  int port = -1;
  std::vector<std::string> overrides;
};

int RunCoordinatorCommand(const CoordinatorArgs& a) {
  if (!a.metrics_listen.empty()) {
    if (auto m = net::ParseHostPort(a.metrics_listen); !m.ok()) {
      return ReportError("coordinator", InvalidArgument("--metrics-listen: " + m.status().message() +
                                                        " (e.g. 127.0.0.1:9400, or port 0 for any free port)"));
    }
  } else if (!a.metrics_port_file.empty()) {
    return ReportError("coordinator", InvalidArgument("--metrics-port-file needs --metrics-listen HOST:PORT"));
  }
  auto job = LoadSyncJob(a.job_path, a.overrides);
  if (!job.ok()) return ReportError("coordinator", job.status());
  const coord::ClusterConfig& k = job->config.cluster;
  InitLogging("coordinator", job->config.log_level);
  InstallStopHandlers();
  auto hp = net::ParseHostPort(k.coordinator);
  if (!hp.ok()) return ReportError("coordinator", hp.status());
  auto secret = net::ResolveSecret(k.secret);
  if (!secret.ok()) return ReportError("coordinator", secret.status());
  coord::CoordinatorOptions o;
  o.job_id = k.job_id;
  o.config_toml = job->toml;
  o.world = static_cast<int>(RankCount(job->config));
  o.state_path = a.state_path.empty() ? k.job_id + ".coordinator.db" : a.state_path;
  o.listen_host = hp->host;
  o.port = a.port >= 0 ? static_cast<uint16_t>(a.port) : hp->port;
  o.port_file = a.port_file;
  o.metrics_listen = a.metrics_listen;
  o.metrics_port_file = a.metrics_port_file;
  o.secret = *secret;
  o.join_timeout = k.join_timeout();
  o.peer_timeout = k.peer_timeout();
  o.elastic = k.elastic;
  o.min_workers = static_cast<int>(k.min_workers);
  o.max_workers = static_cast<int>(k.max_workers);
  if (job->config.mode == "async") {
    auto total = AsyncTotalSteps(job->config);
    if (!total.ok()) return ReportError("coordinator", total.status());
    const AsyncConfig& x = job->config.async;
    o.async = true;
    // Workers come and go: the job runs from its first joiner on (world 1)
    // and admits up to cluster.workers at a time (more wait as spares).
    o.world = 1;
    o.max_workers = static_cast<int>(k.workers);
    o.total_steps = *total;
    o.unit_steps = x.unit_steps;
    o.shards = static_cast<int>(x.servers);
    o.lease = std::chrono::milliseconds(static_cast<int64_t>(x.lease_seconds * 1000));
    o.max_attempts = static_cast<int>(x.max_attempts);
  }
  // Network probes (`tenax probe`) report here; placement and the
  // Kubernetes extender read the matrix back (docs/placement.md).
  o.services.push_back(std::make_shared<sched::LinkBook>());
  Status st = coord::RunCoordinator(o);
  return st.ok() ? 0 : ReportError("coordinator", st);
}

}  // namespace

void AddCoordinatorCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<CoordinatorArgs>();
  CLI::App* cmd =
      root.add_subcommand("coordinator", "Serve one job's membership, ranks and rendezvous (state in SQLite)");
  cmd->add_option("--job", a->job_path, "Job file (TOML, mode = \"sync\", \"async\" or \"coded\")")->required()->type_name("FILE");
  cmd->add_option("--state", a->state_path,
                  "SQLite state file; a restart with the same file resumes the job "
                  "(default: <job_id>.coordinator.db)")
      ->type_name("FILE");
  cmd->add_option("--port", a->port, "Listen port (default: from cluster.coordinator; 0 = any)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--port-file", a->port_file, "Write the bound port here once listening")->type_name("FILE");
  cmd->add_option("--metrics-listen", a->metrics_listen,
                  "Serve Prometheus metrics at http://HOST:PORT/metrics (port 0 = any free port; "
                  "docs/metrics.md)")
      ->type_name("HOST:PORT");
  cmd->add_option("--metrics-port-file", a->metrics_port_file, "Write the metrics port here once listening")
      ->type_name("FILE");
  cmd->add_option("--set", a->overrides, "Override a job key (repeatable)")->type_name("KEY=VALUE");
  cmd->footer("Exit status: 0 job finished, 2 bad input, 3 a worker failed or a deadline passed, 130 stopped.");
  cmd->callback([a, &exit_code] { exit_code = RunCoordinatorCommand(*a); });
}

}  // namespace tenax::cli

#include "tenax/roles/coordinator_role.h"

#include <cstdlib>
#include <string>

#include "tenax/coord/coordinator.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"
#include "tenax/roles/sync_job.h"
#include "tenax/sched/probe/link_book.h"

namespace tenax {

Status RunCoordinatorRole(const CoordinatorRoleOptions& a) {
  if (!a.metrics_listen.empty()) {
    if (auto m = net::ParseHostPort(a.metrics_listen); !m.ok()) {
      return InvalidArgument("--metrics-listen: " + m.status().message() +
                             " (e.g. 127.0.0.1:9400, or port 0 for any free port)");
    }
  } else if (!a.metrics_port_file.empty()) {
    return InvalidArgument("--metrics-port-file needs --metrics-listen HOST:PORT");
  }
  TENAX_ASSIGN_OR_RETURN(SyncJob job, LoadSyncJob(a.job_path, a.overrides));
  const coord::ClusterConfig& k = job.config.cluster;
  InitLogging("coordinator", job.config.log_level);
  InstallStopHandlers();
  TENAX_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(k.coordinator));
  TENAX_ASSIGN_OR_RETURN(std::string secret, net::ResolveSecret(k.secret));
  coord::CoordinatorOptions o;
  o.job_id = k.job_id;
  o.config_toml = job.toml;
  o.world = static_cast<int>(RankCount(job.config));
  o.state_path = a.state_path.empty() ? k.job_id + ".coordinator.db" : a.state_path;
  o.listen_host = hp.host;
  o.port = a.port >= 0 ? static_cast<uint16_t>(a.port) : hp.port;
  o.port_file = a.port_file;
  o.metrics_listen = a.metrics_listen;
  o.metrics_port_file = a.metrics_port_file;
  o.secret = secret;
  o.join_timeout = k.join_timeout();
  o.peer_timeout = k.peer_timeout();
  o.elastic = k.elastic;
  o.min_workers = static_cast<int>(k.min_workers);
  o.spares = static_cast<int>(k.spares);
  if (const char* v = std::getenv("TENAX_TEST_SIGKILL_ON_DONE")) o.sigkill_on_first_done = std::string(v) == "1";
  o.max_workers = static_cast<int>(k.max_workers);
  if (job.config.mode == "async") {
    TENAX_ASSIGN_OR_RETURN(int64_t total, AsyncTotalSteps(job.config));
    const AsyncConfig& x = job.config.async;
    o.async = true;
    // Workers come and go: the job runs from its first joiner on (world 1)
    // and admits up to cluster.workers at a time (more wait as spares).
    o.world = 1;
    o.max_workers = static_cast<int>(k.workers);
    o.total_steps = total;
    o.unit_steps = x.unit_steps;
    o.shards = static_cast<int>(x.servers);
    o.lease = std::chrono::milliseconds(static_cast<int64_t>(x.lease_seconds * 1000));
    o.max_attempts = static_cast<int>(x.max_attempts);
  }
  // Network probes (`tenax probe`) report here; placement and the
  // Kubernetes extender read the matrix back (docs/placement.md).
  o.services.push_back(std::make_shared<sched::LinkBook>(job.config.placement.link_half_life_seconds));
  return coord::RunCoordinator(o);
}

}  // namespace tenax

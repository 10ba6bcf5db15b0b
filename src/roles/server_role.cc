#include "tenax/roles/server_role.h"

#include <cstdlib>

#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"
#include "tenax/roles/sync_job.h"
#include "tenax/train/exchange/async_exchange.h"
#include "tenax/train/sync_trainer.h"

namespace tenax {

Result<ps::ServerOutcome> RunServerRole(const ServerRoleOptions& a) {
  TENAX_ASSIGN_OR_RETURN(SyncJob job, LoadSyncJob(a.job_path, a.overrides));
  if (job.config.mode != "async") {
    return InvalidArgument(a.job_path + ": mode is \"" + job.config.mode + "\"; parameter servers serve mode = \"async\"");
  }
  const coord::ClusterConfig& k = job.config.cluster;
  if (a.shard >= job.config.async.servers) {
    return InvalidArgument("--shard " + std::to_string(a.shard) + " but the job has async.servers = " +
                           std::to_string(job.config.async.servers));
  }
  TENAX_ASSIGN_OR_RETURN(net::HostPort hp, ResolveCoordinator(a.coordinator, job.config));
  TENAX_ASSIGN_OR_RETURN(std::string secret, net::ResolveSecret(k.secret));
  InitLogging("server-" + std::to_string(a.shard), job.config.log_level);
  InstallStopHandlers();
  ps::ServerOptions o;
  o.job_id = k.job_id;
  o.shard = static_cast<uint32_t>(a.shard);
  o.shards = static_cast<uint32_t>(job.config.async.servers);
  o.coordinator_host = hp.host;
  o.coordinator_port = hp.port;
  o.listen_host = k.host;
  o.secret = secret;
  o.transports = k.transports;
  o.tcp_streams = k.resolved_tcp_streams();
  o.checkpoint_dir = a.checkpoint_dir.empty() ? "runs/" + k.job_id + "/server-" + std::to_string(a.shard)
                                              : a.checkpoint_dir;
  o.merge = MergeParamsOf(job.config);
  o.validator = ValidatorOptionsOf(job.config);
  o.checkpoint_every = job.config.async.checkpoint_every;
  o.average_tail = job.config.async.average_tail;
  if (const char* v = std::getenv("TENAX_TEST_SIGKILL_AFTER_CHECKPOINT")) {
    o.sigkill_after_checkpoint_of = std::strtoull(v, nullptr, 10);
  }
  o.join_timeout = k.join_timeout();
  o.peer_timeout = k.peer_timeout();
  const TrainConfig config = job.config;
  o.initial_model = [config] { return InitialFlatModel(config); };
  return ps::RunServer(o);
}

}  // namespace tenax

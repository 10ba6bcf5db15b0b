// tenax server --job FILE --shard S --checkpoints DIR [--coordinator HOST:PORT] [--set k=v]
// One parameter-server shard of an asynchronous job; the role is
// ps/parameter_server.h. The initial model is built here (train) so that
// the ps layer stays free of libtorch.
#include <cstdlib>

#include "command.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"
#include "tenax/ps/parameter_server.h"
#include "tenax/train/exchange/async_exchange.h"
#include "tenax/roles/sync_job.h"
#include "tenax/train/sync_trainer.h"

namespace tenax::cli {
namespace {

struct ServerArgs {
  std::string job_path;
  std::string coordinator;
  std::string checkpoint_dir;
  int shard = 0;
  std::vector<std::string> overrides;
};

Status RunServerCommand(const ServerArgs& a) {
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
  o.checkpoint_dir = a.checkpoint_dir.empty() ? "runs/" + k.job_id + "/server-" + std::to_string(a.shard)
                                              : a.checkpoint_dir;
  o.merge = MergeParamsOf(job.config);
  o.validator = ValidatorOptionsOf(job.config);
  o.checkpoint_every = job.config.async.checkpoint_every;
  o.join_timeout = k.join_timeout();
  o.peer_timeout = k.peer_timeout();
  const TrainConfig config = job.config;
  o.initial_model = [config] { return InitialFlatModel(config); };
  TENAX_ASSIGN_OR_RETURN(ps::ServerOutcome out, ps::RunServer(o));
  std::printf("shard %d: version %llu, %llu merges, %llu results rejected\n", a.shard,
              static_cast<unsigned long long>(out.version), static_cast<unsigned long long>(out.merges),
              static_cast<unsigned long long>(out.rejected));
  return Status::Ok();
}

}  // namespace

void AddServerCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<ServerArgs>();
  CLI::App* cmd = root.add_subcommand("server", "One parameter-server shard of an asynchronous job (started by 'tenax run')");
  cmd->add_option("--job", a->job_path, "Job file (TOML, mode = \"async\")")->required()->type_name("FILE");
  cmd->add_option("--shard", a->shard, "Which shard of async.servers this process serves")->check(CLI::Range(0, 63));
  cmd->add_option("--checkpoints", a->checkpoint_dir,
                  "Checkpoint directory; a restart on it continues from its newest intact checkpoint "
                  "(default: runs/<job_id>/server-<shard>)")
      ->type_name("DIR");
  cmd->add_option("--coordinator", a->coordinator,
                  "Coordinator address (default: $TENAX_COORDINATOR, then cluster.coordinator)")
      ->type_name("HOST:PORT");
  cmd->add_option("--set", a->overrides, "Override a job key (repeatable)")->type_name("KEY=VALUE");
  cmd->footer("Exit status: 0 job done, 2 bad input or refused, 3 the job failed or a deadline passed, 130 stopped.");
  cmd->callback([a, &exit_code] {
    Status st = RunServerCommand(*a);
    exit_code = st.ok() ? 0 : ReportError("server", st);
  });
}

}  // namespace tenax::cli

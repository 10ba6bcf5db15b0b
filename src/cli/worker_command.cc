// tenax worker --job FILE [--coordinator HOST:PORT] [--rank N] [--out DIR]
// One rank of a synchronous job. Under mpirun, the rank comes from Open
// MPI's environment (OMPI_COMM_WORLD_RANK) and the world size is checked
// against cluster.workers.
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "command.h"
#include "job_file.h"
#include "progress_bar.h"
#include "tenax/coord/coord_codec.h"
#include "tenax/coord/coordinator_client.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/net/auth.h"
#include "tenax/train/sync_trainer.h"

namespace tenax::cli {
namespace {

struct WorkerArgs {
  std::string job_path;
  std::string coordinator;
  int rank = -1;
  std::string out_dir;
  std::vector<std::string> overrides;
};

std::optional<int> EnvInt(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1 << 20) return std::nullopt;
  return static_cast<int>(x);
}

Status RunWorker(const WorkerArgs& a) {
  TENAX_ASSIGN_OR_RETURN(Job local, LoadSyncJob(a.job_path, a.overrides));
  const ClusterConfig& k = local.config.cluster;
  int rank = a.rank;
  if (rank < 0) rank = EnvInt("OMPI_COMM_WORLD_RANK").value_or(EnvInt("PMIX_RANK").value_or(-1));
  if (auto size = EnvInt("OMPI_COMM_WORLD_SIZE"); size && *size != k.workers) {
    return InvalidArgument("mpirun started " + std::to_string(*size) + " processes but the job has cluster.workers = " +
                           std::to_string(k.workers));
  }
  if (rank >= k.workers) {
    return InvalidArgument("rank " + std::to_string(rank) + " but the job has " + std::to_string(k.workers) + " workers");
  }
  std::string coordinator = a.coordinator;
  if (coordinator.empty() && std::getenv("TENAX_COORDINATOR")) coordinator = std::getenv("TENAX_COORDINATOR");
  if (coordinator.empty()) coordinator = k.coordinator;
  TENAX_ASSIGN_OR_RETURN(auto hp, ParseHostPort(coordinator));
  if (hp.second == 0) {
    return InvalidArgument("coordinator address " + coordinator +
                           " has no port: set cluster.coordinator, --coordinator or $TENAX_COORDINATOR");
  }
  TENAX_ASSIGN_OR_RETURN(std::string secret, net::ResolveSecret(k.secret));

  const std::string label = rank >= 0 ? "worker-" + std::to_string(rank) : "worker";
  InitLogging(label, local.config.log_level);
  InstallStopHandlers();
  net::NodeOptions no;
  no.name = label + "@" + k.host;
  no.secret = secret;
  no.transports = k.transports;
  no.peer_timeout = Millis(k.peer_timeout_seconds);
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(uint16_t port, node->Listen(k.host, 0));

  const Deadline join_deadline = Deadline::After(Millis(k.join_timeout_seconds));
  wire::JoinRequest req;
  req.set_job_id(k.job_id);
  req.set_name(k.host + "/" + std::to_string(::getpid()));
  req.set_host(k.host);
  req.set_port(port);
  req.set_requested_rank(rank);
  req.set_pid(static_cast<uint64_t>(::getpid()));
  TENAX_ASSIGN_OR_RETURN(auto client, coord::CoordinatorClient::Join(*node, hp.first, hp.second, req, join_deadline));
  rank = client->info().rank;
  // The coordinator's copy of the job is authoritative.
  TENAX_ASSIGN_OR_RETURN(Job job, ParseSyncJob(client->info().config_toml, "job config from the coordinator"));
  spdlog::info("rank {} of {} in job {} (coordinator {})", rank, client->info().world, k.job_id, coordinator);
  TENAX_ASSIGN_OR_RETURN(wire::Roster roster, client->WaitRoster(join_deadline));
  std::vector<comm::GroupMember> members(static_cast<size_t>(roster.members_size()));
  for (const auto& m : roster.members()) {
    members[m.rank()] = {m.host(), static_cast<uint16_t>(m.port()), m.name()};
  }
  TENAX_ASSIGN_OR_RETURN(auto group,
                         comm::Group::Connect(*node, k.job_id, roster.generation(), rank, members, join_deadline));

  SyncRunOptions opts;
  opts.step_timeout_seconds = job.config.cluster.step_timeout_seconds;
  opts.interrupt = [&]() -> Status {
    if (StopRequested()) return Cancelled("stopped by signal " + std::to_string(StopSignal()));
    return client->CheckFailure();
  };
  ProgressRenderer renderer(false);
  auto last_report = SteadyClock::now() - std::chrono::seconds(1);
  opts.run.on_progress = [&](const TrainProgress& p) {
    if (p.log_point) renderer(p);
    const auto now = SteadyClock::now();
    if (!p.log_point && !p.test_accuracy && p.global_step != p.total_steps && now - last_report < std::chrono::milliseconds(250)) return;
    last_report = now;
    wire::Progress w;
    w.set_rank(static_cast<uint32_t>(rank));
    w.set_step(p.global_step);
    w.set_total_steps(p.total_steps);
    w.set_epoch(p.epoch);
    w.set_epochs(p.epochs);
    w.set_loss(p.loss);
    w.set_samples_per_second(p.samples_per_second);
    w.set_elapsed_seconds(p.elapsed_seconds);
    w.set_test_accuracy(p.test_accuracy.value_or(-1.0));
    client->ReportProgress(w);
  };
  const std::string out_dir = a.out_dir.empty() ? "runs/" + k.job_id : a.out_dir;
  auto outcome = TrainSync(job.config, job.doc, out_dir, *group, opts);
  if (!outcome.ok()) {
    client->ReportFailure(outcome.status().message());
    return Status(outcome.status().code(), "rank " + std::to_string(rank) + ": " + outcome.status().message());
  }
  // Nobody leaves while others may still address it.
  TENAX_RETURN_IF_ERROR(group->Barrier(Deadline::After(Millis(job.config.cluster.step_timeout_seconds))));
  TENAX_RETURN_IF_ERROR(client->ReportDone(rank == 0 ? outcome->summary.dump() : "", join_deadline.Earlier(Deadline::After(std::chrono::seconds(30)))));
  if (rank == 0) {
    std::printf("final test accuracy %.4f, %d workers, %.0f samples/s; outputs in %s\n", outcome->final_test_accuracy,
                group->world(), outcome->samples_per_second, out_dir.c_str());
  }
  return Status::Ok();
}

}  // namespace

void AddWorkerCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<WorkerArgs>();
  CLI::App* cmd = root.add_subcommand("worker", "One rank of a synchronous job (started by 'tenax run' or mpirun)");
  cmd->add_option("--job", a->job_path, "Job file (TOML, mode = \"sync\")")->required()->type_name("FILE");
  cmd->add_option("--coordinator", a->coordinator,
                  "Coordinator address (default: $TENAX_COORDINATOR, then cluster.coordinator)")
      ->type_name("HOST:PORT");
  cmd->add_option("--rank", a->rank, "Ask for this rank (default: $OMPI_COMM_WORLD_RANK, else any)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--out", a->out_dir, "Output directory of rank 0 (default: runs/<job_id>)")->type_name("DIR");
  cmd->add_option("--set", a->overrides, "Override a job key (repeatable)")->type_name("KEY=VALUE");
  cmd->footer("Exit status: 0 done, 2 bad input or refused, 3 another rank or the network failed, 130 stopped.");
  cmd->callback([a, &exit_code] {
    Status st = RunWorker(*a);
    exit_code = st.ok() ? 0 : ReportError("worker", st);
  });
}

}  // namespace tenax::cli

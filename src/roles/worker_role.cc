#include "tenax/roles/worker_role.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <cstdlib>
#include <optional>
#include <utility>

#include "tenax/comm/group.h"
#include "tenax/coord/coord_codec.h"
#include "tenax/coord/coordinator_client.h"
#include "tenax/core/log.h"
#include "tenax/core/metrics.h"
#include "tenax/core/signals.h"
#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"
#include "tenax/net/node.h"
#include "tenax/train/input/store_source.h"
#include "tenax/roles/sync_job.h"
#include "tenax/train/sync_trainer.h"
#include "tenax/train/exchange/coordinator_membership.h"

namespace tenax {
namespace {

std::optional<int> EnvInt(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1 << 20) return std::nullopt;
  return static_cast<int>(x);
}

// The rank to ask for: the option, else the one mpirun gave this process.
Result<int> RequestedRank(int configured, int64_t workers) {
  int rank = configured;
  if (rank < 0) rank = EnvInt("OMPI_COMM_WORLD_RANK").value_or(EnvInt("PMIX_RANK").value_or(-1));
  if (auto size = EnvInt("OMPI_COMM_WORLD_SIZE"); size && *size != workers) {
    return InvalidArgument("mpirun started " + std::to_string(*size) +
                           " processes but the job has " + std::to_string(workers) +
                           " ranks (cluster.workers, plus the decoder in mode \"coded\")");
  }
  if (rank >= workers) {
    return InvalidArgument("rank " + std::to_string(rank) + " but the job has " + std::to_string(workers) + " ranks");
  }
  return rank;
}

wire::Progress ToWire(int rank, const TrainProgress& p) {
  wire::Progress w;
  w.set_rank(static_cast<uint32_t>(rank));
  w.set_step(p.global_step);
  w.set_total_steps(p.total_steps);
  w.set_epoch(p.epoch);
  w.set_epochs(p.epochs);
  w.set_steps_per_epoch(p.steps_per_epoch);
  w.set_loss(p.loss);
  w.set_samples_per_second(p.samples_per_second);
  w.set_elapsed_seconds(p.elapsed_seconds);
  w.set_test_accuracy(p.test_accuracy.value_or(-1.0));
  w.set_step_seconds(p.step_seconds);
  w.set_recovery_bytes(p.recovery_bytes);
  return w;
}

// What a worker that comes and goes (async, elastic) does with its
// training's result: a stop it acted on is a leave (outcome.left); a
// failure is reported to the coordinator and returned naming the rank;
// otherwise the replica that wrote the outputs (the writer) reports the
// summary, the others an empty Done, and the writer is rank 0.
Result<WorkerOutcome> FinishTraining(Result<TrainOutcome> trained, bool left, coord::CoordinatorClient& client,
                                     int rank, WorkerOutcome outcome) {
  if (!trained.ok() && trained.status().code() == StatusCode::kCancelled && left) {
    spdlog::info("rank {}: {}", rank, trained.status().message());
    outcome.left = true;
    return outcome;
  }
  if (!trained.ok()) {
    client.ReportFailure(trained.status().message());
    return Status(trained.status().code(), "rank " + std::to_string(rank) + ": " + trained.status().message());
  }
  outcome.train = std::move(*trained);
  const bool writer = outcome.train.summary.contains("model_path");
  TENAX_RETURN_IF_ERROR(
      client.ReportDone(writer ? outcome.train.summary.dump() : "", Deadline::After(std::chrono::seconds(30))));
  outcome.rank = writer ? 0 : rank;
  return outcome;
}

// An async job's worker: units until every unit is done (or a notice).
Result<WorkerOutcome> RunAsyncWorker(const SyncJob& job, net::Node& node, coord::CoordinatorClient& client,
                                     PreparedTraining prepared, int rank, const TrainRunOptions& run,
                                     int64_t poison_unit, WorkerOutcome outcome) {
  const coord::ClusterConfig& k = job.config.cluster;
  TENAX_ASSIGN_OR_RETURN(int64_t total, AsyncTotalSteps(job.config));
  TENAX_ASSIGN_OR_RETURN(auto rule, ps::MakeMergeRule(MergeParamsOf(job.config)));
  AsyncExchangeOptions xo;
  xo.job_id = k.job_id;
  xo.worker = "worker " + std::to_string(rank) + " (" + k.host + "/" + std::to_string(::getpid()) + ")";
  xo.kind = rule->expects();
  xo.total_steps = total;
  xo.average_tail = job.config.async.average_tail;
  xo.grant_timeout = k.join_timeout() + 2 * k.peer_timeout();
  xo.result_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(k.step_timeout());
  xo.poison_unit = poison_unit;
  outcome.world = 1;
  auto trained = TrainAsync(job.config, job.doc, outcome.out_dir, node, client, std::move(prepared), xo, run);
  const bool stopped = StopRequested();
  return FinishTraining(std::move(trained), stopped, client, rank, std::move(outcome));
}

// A coded job's decoder (the last rank): decodes every step, reports the
// job's progress as the steps it decoded, then leaves with the others.
Result<WorkerOutcome> RunCodedDecoder(const SyncJob& job, coord::CoordinatorClient& client, comm::Group& group, int rank,
                                      const ProgressFn& on_progress, WorkerOutcome outcome) {
  const auto start = SteadyClock::now();
  auto last_report = start - std::chrono::seconds(1);
  auto decoded = DecodeCoded(job.config, outcome.out_dir, group, [&](int64_t step, int64_t total) {
    const auto now = SteadyClock::now();
    if (step != total && now - last_report < std::chrono::milliseconds(250)) return;
    last_report = now;
    TrainProgress p;
    p.global_step = step;
    p.total_steps = total;
    p.epochs = std::max<int64_t>(1, job.config.epochs);
    p.steps_per_epoch = std::max<int64_t>(1, total / p.epochs);
    p.epoch = std::min(p.epochs, step / p.steps_per_epoch + 1);
    p.step_in_epoch = step - (p.epoch - 1) * p.steps_per_epoch;
    p.elapsed_seconds = std::chrono::duration<double>(now - start).count();
    if (on_progress) on_progress(p);
  });
  if (!decoded.ok()) {
    client.ReportFailure(decoded.status().message());
    return Status(decoded.status().code(), "decoder (rank " + std::to_string(rank) + "): " + decoded.status().message());
  }
  outcome.train.summary = *decoded;
  TENAX_RETURN_IF_ERROR(group.Barrier(Deadline::After(job.config.cluster.step_timeout())));
  TENAX_RETURN_IF_ERROR(client.ReportDone("", Deadline::After(std::chrono::seconds(30))));
  return outcome;
}

// Reports this rank's progress to the coordinator at most every 250 ms (and
// at every log point, evaluation and the last step), with the mean step
// time since the last report; `user` sees every step.
ProgressFn ProgressReporter(coord::CoordinatorClient& client, int rank, ProgressFn user) {
  struct Interval {
    SteadyClock::time_point last_report = SteadyClock::now() - std::chrono::seconds(1);
    double seconds = 0;  // step times since the last report: it carries their mean
    int64_t steps = 0;
  };
  auto interval = std::make_shared<Interval>();
  return [&client, rank, user = std::move(user), interval](const TrainProgress& p) {
    if (user) user(p);
    interval->seconds += p.step_seconds;
    ++interval->steps;
    const auto now = SteadyClock::now();
    if (!p.log_point && !p.test_accuracy && p.global_step != p.total_steps &&
        now - interval->last_report < std::chrono::milliseconds(250)) {
      return;
    }
    interval->last_report = now;
    wire::Progress w = ToWire(rank, p);
    w.set_step_seconds(interval->seconds / static_cast<double>(interval->steps));
    w.set_recovery_bytes(StoreRecoveryBytesMoved());  // 0 unless this process ran a store recovery
    interval->seconds = 0;
    interval->steps = 0;
    client.ReportProgress(w);
  };
}

// The wait for the generation that admits this worker, in 250 ms slices
// so that a stop signal ends it (the launcher stops joiners and spares the
// job no longer needs): until `deadline` (a member or joiner), or for as
// long as the job runs (a warm spare, `spare`). Cancelled when stopped;
// the coordinator client's failure (the job failed, or this worker was
// refused on a restarted coordinator) otherwise, or PeerLost once the
// coordinator stayed unreachable for `unreachable_limit` (a restart takes
// far less; a spare must not outlive its job).
Result<wire::Roster> WaitForAdmission(coord::CoordinatorClient& client, int rank, bool spare, Deadline deadline,
                                      std::chrono::milliseconds unreachable_limit) {
  if (spare) {
    spdlog::info("rank {}: waiting as a spare until a member is lost", rank);
    // Under `tenax run`: the launcher learns that this spare is warm (its
    // model, data and coordinator connection ready), which a live migration
    // waits for before the member it replaces leaves (docs/placement.md).
    if (const char* metrics = std::getenv(kRunMetricsEnvVar); metrics && *metrics) {
      auto writer = JsonLinesWriter::Append(metrics);
      Status st = writer.ok() ? writer->Write({{"event", "spare_waiting"}, {"rank", rank}, {"pid", ::getpid()}})
                              : writer.status();
      if (!st.ok()) spdlog::warn("rank {}: could not tell the launcher this spare is ready: {}", rank, st.message());
    }
  }
  const auto since = SteadyClock::now();
  std::optional<SteadyClock::time_point> unreachable_since;
  while (true) {
    if (StopRequested()) {
      const double waited = std::chrono::duration<double>(SteadyClock::now() - since).count();
      if (spare) {
        spdlog::info("rank {}: stopped by signal {} while waiting as a spare ({:.1f} s); the job did not need it", rank,
                     StopSignal(), waited);
      }
      return Cancelled("stopped by signal " + std::to_string(StopSignal()) + " after waiting " +
                       std::to_string(static_cast<int>(waited)) + " s for a generation that admits this worker");
    }
    if (client.Connected()) {
      unreachable_since.reset();
    } else if (!unreachable_since) {
      unreachable_since = SteadyClock::now();
    } else if (spare && SteadyClock::now() - *unreachable_since > unreachable_limit) {
      return PeerLost("the coordinator was unreachable for " + std::to_string(unreachable_limit.count() / 1000) +
                      " s (cluster.join_timeout_seconds) while this spare waited");
    }
    const Deadline slice = Deadline::After(std::chrono::milliseconds(250));
    auto roster = client.WaitRoster(spare ? slice : slice.Earlier(deadline));
    if (roster.ok()) {
      if (spare) {
        spdlog::info("rank {}: admitted in generation {} after {:.3f} s as a spare", rank, roster->generation(),
                     std::chrono::duration<double>(SteadyClock::now() - since).count());
      }
      return roster;
    }
    if (roster.status().code() != StatusCode::kDeadlineExceeded || (!spare && deadline.Expired())) {
      return roster.status();
    }
  }
}

// An elastic job's member: its first generation (every pair connects) or a
// join of a running job, then the elastic loop until the job ends, a notice
// makes it leave (outcome.left) or it fails.
Result<WorkerOutcome> RunElasticWorker(const SyncJob& job, const coord::ClusterConfig& k, net::Node& node,
                                       coord::CoordinatorClient& client, const wire::Roster& roster, int rank,
                                       Deadline join_deadline, PreparedTraining prepared, SyncRunOptions opts,
                                       WorkerOutcome outcome, bool admitted_spare,
                                       const WorkerOptions::InjectedFaults& injected) {
  CoordinatorMembership membership(client, k.job_id, rank);
  TENAX_ASSIGN_OR_RETURN(MembershipView view, ViewOf(roster, rank, false));
  // The first generation connects every pair; a joiner of a running job
  // dials the members (the roster's joining flags say who dials whom).
  // A spare admitted into a running job joins it (even one that waited
  // since before the first generation: its join reply then said generation
  // 0). One that takes the place of a member lost before the job formed is
  // in the job's first generation, generation 1 (the coordinator admits a
  // spare there only then): nobody trained, and it enters with its initial
  // model as the others do. Not "no stable generation yet": a generation
  // after a first one that some member never reported formed may follow
  // steps already trained, and its joiners must take the live state.
  const bool all_new = admitted_spare ? roster.generation() == 1 : client.info().generation == 0;
  opts.joined_running_job = !all_new;
  if (all_new && injected.sigstop_before_connect) {
    spdlog::warn("injected fault: stopping this member (SIGSTOP) before it connects to generation {}", view.generation);
    ::raise(SIGSTOP);
  }
  // Members stop waiting for a generation once a newer one is out (the
  // coordinator dropped a member that will never come).
  auto group = all_new ? comm::Group::Connect(node, k.job_id, view.generation, view.rank, view.members, join_deadline,
                                              SupersededInterrupt(membership, view.generation))
                       : comm::Group::Join(node, k.job_id, view.generation, view.rank, view.members, join_deadline,
                                           SupersededInterrupt(membership, view.generation));
  // A joiner's generation may be superseded while it dials (a member left
  // a moment after it joined, and the members went on to the next one):
  // it then joins the newest one, as members do at a step boundary.
  while (!all_new && !group.ok() && !join_deadline.Expired()) {
    auto next = membership.Next(view.generation, Deadline::After(std::chrono::seconds(10)).Earlier(join_deadline));
    if (!next.ok()) break;  // no newer generation: the join's own error is the one to report
    spdlog::warn("rank {}: joining generation {} failed ({}); joining generation {}", rank, view.generation,
                 group.status().message(), next->generation);
    view = std::move(*next);
    group = comm::Group::Join(node, k.job_id, view.generation, view.rank, view.members, join_deadline,
                              SupersededInterrupt(membership, view.generation));
  }
  // A member lost while the first generation connects (SIGKILLed, or
  // dropped by the coordinator while the others wait for it) costs only
  // that member: the others have nothing to keep but their initial
  // models, so they join the next generation at the first step boundary,
  // as after a failed first allreduce set-up (elastic_exchange.cc). A
  // dialled member that is gone answers Unavailable.
  if (all_new && !group.ok() &&
      (RepairedByNewMembership(group.status()) || group.status().code() == StatusCode::kUnavailable)) {
    opts.first_generation_unformed = group.status();
    group = comm::Group::FromPeers(node, view.rank, std::vector<net::PeerId>(view.members.size(), 0), view.members,
                                   view.generation);
  }
  if (!group.ok()) {
    // A joiner's failure is not the job's: the coordinator removes a
    // member whose connection ends, and the others go on.
    if (all_new) client.ReportFailure(group.status().message());
    return Status(group.status().code(), "rank " + std::to_string(rank) + ": " + group.status().message());
  }
  outcome.world = (*group)->world();
  opts.interrupt = nullptr;  // the elastic exchange handles stops and losses itself
  auto trained = TrainElastic(job.config, job.doc, outcome.out_dir, std::move(*group), membership,
                              std::move(prepared), opts);
  if (trained.ok()) outcome.world = static_cast<int>(trained->summary.value("workers", int64_t{0}));
  return FinishTraining(std::move(trained), membership.leaving(), client, rank, std::move(outcome));
}

// A member of a fixed membership (sync, coded; the coded job's decoder too):
// every pair connects, the job trains to its end, and nobody leaves while
// others may still address it.
Result<WorkerOutcome> RunFixedWorker(const SyncJob& job, const coord::ClusterConfig& k, net::Node& node,
                                     coord::CoordinatorClient& client, const wire::Roster& roster, int rank,
                                     Deadline join_deadline, const SyncRunOptions& opts, WorkerOutcome outcome) {
  std::vector<comm::GroupMember> members(static_cast<size_t>(roster.members_size()));
  for (const auto& m : roster.members()) {
    members[m.rank()] = {m.host(), static_cast<uint16_t>(m.port()), m.name(), m.member_id(), true};
  }
  TENAX_ASSIGN_OR_RETURN(auto group,
                         comm::Group::Connect(node, k.job_id, roster.generation(), rank, members, join_deadline));
  outcome.world = group->world();
  const bool coded = job.config.mode == "coded";
  if (coded && rank == k.workers) {
    return RunCodedDecoder(job, client, *group, rank, opts.run.on_progress, std::move(outcome));
  }
  auto trained = coded ? TrainCoded(job.config, job.doc, outcome.out_dir, *group, opts)
                       : TrainSync(job.config, job.doc, outcome.out_dir, *group, opts);
  if (!trained.ok()) {
    client.ReportFailure(trained.status().message());
    return Status(trained.status().code(), "rank " + std::to_string(rank) + ": " + trained.status().message());
  }
  outcome.train = std::move(*trained);

  // Nobody leaves while others may still address it.
  TENAX_RETURN_IF_ERROR(group->Barrier(Deadline::After(job.config.cluster.step_timeout())));
  // A deadline of its own: the join deadline has long passed in a job that
  // trained for longer (ReportDone waits for the coordinator's
  // acknowledgement, and would give up at once).
  TENAX_RETURN_IF_ERROR(client.ReportDone(rank == 0 ? outcome.train.summary.dump() : "",
                                          Deadline::After(std::chrono::seconds(30))));
  return outcome;
}

}  // namespace

Result<WorkerOutcome> RunWorker(const WorkerOptions& options) {
  TENAX_ASSIGN_OR_RETURN(SyncJob local, LoadSyncJob(options.job_path, options.overrides));
  const coord::ClusterConfig& k = local.config.cluster;
  TENAX_ASSIGN_OR_RETURN(int rank, RequestedRank(options.rank, RankCount(local.config)));
  // Async workers come and go: the coordinator gives each a new id.
  if (local.config.mode == "async") rank = -1;
  TENAX_ASSIGN_OR_RETURN(net::HostPort hp, ResolveCoordinator(options.coordinator, local.config));
  TENAX_ASSIGN_OR_RETURN(std::string secret, net::ResolveSecret(k.secret));

  const std::string label = rank >= 0 ? "worker-" + std::to_string(rank) : "worker";
  InitLogging(label, local.config.log_level);
  InstallStopHandlers();
  net::NodeOptions no;
  no.name = label + "@" + k.host;
  no.secret = secret;
  no.transports = k.transports;
  no.tcp_streams = k.resolved_tcp_streams();
  no.peer_timeout = k.peer_timeout();
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(uint16_t port, node->Listen(k.host, 0));

  // Elastic jobs prepare before joining: the coordinator checks the
  // model's plan fingerprint of every joiner.
  std::optional<PreparedTraining> prepared;
  const bool async = local.config.mode == "async";
  if (k.elastic || async) {
    TENAX_ASSIGN_OR_RETURN(PreparedTraining p, PrepareTraining(local.config));
    prepared = std::move(p);
  }

  // Join and rendezvous.
  Deadline join_deadline = Deadline::After(k.join_timeout());
  wire::JoinRequest req;
  req.set_job_id(k.job_id);
  req.set_name(k.host + "/" + std::to_string(::getpid()));
  req.set_host(k.host);
  req.set_port(port);
  req.set_requested_rank(rank);
  req.set_pid(static_cast<uint64_t>(::getpid()));
  if (prepared) req.set_plan_fingerprint(prepared->fingerprint);
  req.set_spare(options.spare && k.elastic);  // started with the job, it still waits
  const int requested_rank = rank;
  TENAX_ASSIGN_OR_RETURN(auto client, coord::CoordinatorClient::Join(*node, hp.host, hp.port, req, join_deadline));
  rank = client->info().rank;
  // The coordinator's copy of the job is authoritative.
  TENAX_ASSIGN_OR_RETURN(SyncJob job, ParseSyncJob(client->info().config_toml, "job config from the coordinator"));
  spdlog::info("rank {} of {} in job {} (coordinator {}:{})", rank, client->info().world, k.job_id, hp.host, hp.port);
  // Async workers do not wait for the others: they ask for work at once.
  wire::Roster roster;
  if (!async) {
    const bool spare = options.spare && k.elastic;
    auto admitted = WaitForAdmission(*client, rank, spare, join_deadline, k.join_timeout());
    if (spare && !admitted.ok() && admitted.status().code() == StatusCode::kCancelled) {
      WorkerOutcome unused;
      unused.rank = rank;
      unused.unused_spare = true;
      return unused;
    }
    TENAX_ASSIGN_OR_RETURN(roster, std::move(admitted));
    if (spare) join_deadline = Deadline::After(k.join_timeout());  // admitted: joining gets the usual time from now
  }

  // Train, reporting progress at most every 250 ms (and at every log
  // point, evaluation and the last step) and aborting on the verdict.
  SyncRunOptions opts;
  opts.step_timeout_seconds = job.config.cluster.step_timeout_seconds;
  opts.straggler_id = requested_rank;  // [stragglers] names the launcher's workers; joiners (-1) are not slowed
  opts.allreduce_zones = options.allreduce_zones;
  opts.hierarchical_allreduce = options.hierarchical_allreduce;
  if (options.injected.sigstop_as_donor) {
    opts.before_state_offer = [] {
      spdlog::warn("injected fault: stopping this donor (SIGSTOP) before it offers its state");
      ::raise(SIGSTOP);
    };
  }
  if (options.injected.sigstop_before_allreduce || options.injected.sigstop_before_first_allreduce) {
    opts.before_allreduce_offer = [first = options.injected.sigstop_before_first_allreduce,
                                   stopped = false](bool first_generation) mutable {
      // The first generation's, or the first re-formed generation's, only.
      if (first_generation != first || std::exchange(stopped, true)) return;
      spdlog::warn("injected fault: stopping this member (SIGSTOP) before it offers its part of the allreduce");
      ::raise(SIGSTOP);
    };
  }
  opts.interrupt = [&]() -> Status {
    if (StopRequested()) return Cancelled("stopped by signal " + std::to_string(StopSignal()));
    return client->CheckFailure();
  };
  opts.run.on_progress = ProgressReporter(*client, rank, options.on_progress);
  WorkerOutcome outcome;
  outcome.rank = rank;
  outcome.out_dir = options.out_dir.empty() ? "runs/" + k.job_id : options.out_dir;

  if (async) {
    return RunAsyncWorker(job, *node, *client, std::move(*prepared), rank, opts.run, options.injected.poison_unit,
                          std::move(outcome));
  }
  if (k.elastic) {
    return RunElasticWorker(job, k, *node, *client, roster, rank, join_deadline, std::move(*prepared), std::move(opts),
                            std::move(outcome), options.spare, options.injected);
  }
  return RunFixedWorker(job, k, *node, *client, roster, rank, join_deadline, opts, std::move(outcome));
}

}  // namespace tenax

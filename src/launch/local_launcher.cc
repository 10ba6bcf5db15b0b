#include "tenax/launch/local_launcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <signal.h>
#include <sys/resource.h>
#include <thread>

#include "fault_injector.h"
#include "job_topology.h"
#include "reference_run.h"
#include "run_migration.h"
#include "run_monitor.h"
#include "run_storage.h"
#include "run_summary.h"
#include "shared_memory.h"
#include "tenax/coord/job_watcher.h"
#include "tenax/core/blas_kernels.h"
#include "tenax/core/files.h"
#include "tenax/core/log.h"
#include "tenax/core/metrics.h"
#include "tenax/core/process_supervisor.h"
#include "tenax/core/subprocess.h"
#include "tenax/core/run_dir.h"
#include "tenax/core/signals.h"
#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"
#include "tenax/job/price_table.h"
#include "tenax/roles/sync_job.h"

namespace tenax {
namespace {

using namespace std::chrono_literals;

std::string SelfPath() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "tenax" : p.string();
}

Status StopStatus() {
  return StopRequested() ? Cancelled("stopped by signal " + std::to_string(StopSignal())) : Status::Ok();
}

// Empties the run directory of a previous run's state and logs.
Status PrepareRunDirectory(const std::string& out_dir, const std::string& logs) {
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(out_dir));
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(logs));
  std::error_code ec;
  for (const std::string& file : RunDir(out_dir).PreviousRunFiles()) std::filesystem::remove(file, ec);
  for (const auto& entry : std::filesystem::directory_iterator(logs, ec)) std::filesystem::remove(entry.path(), ec);
  // Parameter-server checkpoints belong to the run that wrote them (a
  // server restarted within a run continues from them; a new run starts over).
  for (const auto& entry : std::filesystem::directory_iterator(out_dir, ec)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("server-", 0) == 0) {
      std::filesystem::remove_all(entry.path(), ec);
    }
  }
  return Status::Ok();
}

// The configured secret, else $TENAX_SECRET or $TENAX_SECRET_FILE's, else a
// random one (a local run needs no secret shared with anyone else).
std::string RunSecret(const std::string& configured) {
  std::string secret = configured;
  if (secret.empty()) secret = net::SecretFromEnvironment();
  if (secret.empty()) {
    for (unsigned char c : net::RandomNonce()) secret += "0123456789abcdef"[c % 16];
  }
  return secret;
}

Result<uint16_t> WaitForPortFile(const std::string& path, ProcessSupervisor& children, Deadline deadline) {
  while (true) {
    std::ifstream in(path);
    int port = 0;
    if (in >> port && port > 0 && port < 65536) return static_cast<uint16_t>(port);
    if (auto failed = children.FirstFailure())
      return Unavailable("the coordinator did not start: " + failed->Describe());
    TENAX_RETURN_IF_ERROR(StopStatus());
    if (deadline.Expired()) return DeadlineExceeded("the coordinator did not start listening in time");
    std::this_thread::sleep_for(20ms);  // polling a file another process writes
  }
}

TrainProgress ToTrainProgress(const coord::JobProgress& j, int64_t log_every_steps) {
  TrainProgress tp;
  tp.epoch = j.epoch;
  tp.epochs = j.epochs;
  tp.global_step = j.step;
  tp.total_steps = j.total_steps;
  // The workers' own count: total_steps / epochs is wrong when
  // train.max_steps cuts the run short.
  tp.steps_per_epoch = j.steps_per_epoch > 0 ? j.steps_per_epoch
                       : j.epochs > 0        ? (j.total_steps + j.epochs - 1) / j.epochs
                                             : 0;
  tp.step_in_epoch = tp.steps_per_epoch > 0 ? (j.step - 1) % tp.steps_per_epoch + 1 : 0;
  tp.loss = j.loss;
  tp.samples_per_second = j.samples_per_second;
  tp.elapsed_seconds = j.elapsed_seconds;
  tp.eta_seconds = tp.global_step > 0 ? tp.elapsed_seconds / tp.global_step * (tp.total_steps - tp.global_step) : 0;
  tp.log_point = j.test_accuracy.has_value() || j.step % log_every_steps == 0;
  tp.test_accuracy = j.test_accuracy;
  return tp;
}

// A coded job's decoder events (DIR/decoder.jsonl: stragglers detected or
// recovered, shuffles), read as the file grows and shown as notices.
class DecoderEventTail {
 public:
  explicit DecoderEventTail(std::string path) : tail_(std::move(path)) {}
  void Poll(const std::function<void(const std::string&)>& notice) {
    const auto now = SteadyClock::now();
    if (now - last_ < 250ms) return;
    last_ = now;
    for (const auto& e : tail_.ReadNew()) {
      if (auto st = records::StragglerFrom(e)) {
        notice(fmt::format("step {}: worker {} {} ({:.1f}x the median worker's time)", st->step,
                           st->worker.value_or(-1), st->slow ? "is a straggler" : "recovered", st->ratio));
      } else if (auto sh = records::ShuffleFrom(e)) {
        notice(fmt::format("step {}: partitions re-mapped away from slow workers ({} partition copies moved)",
                           sh->step, sh->partitions_moved));
      }
    }
  }

 private:
  JsonLinesTail tail_;
  SteadyClock::time_point last_{};
};

// Runs this launcher again inside the switch namespace of `network`
// (emulated_network.h says why), forwarding a stop signal, and removes the
// namespaces when it is done. Its output is the user's.
Result<LaunchOutcome> RunInsideTopology(sched::EmulatedNetwork& network, const LaunchOptions& options,
                                        const std::string& self, const std::vector<std::string>& sets,
                                        int64_t workers) {
  std::vector<std::string> argv = {"env", std::string(kTopologyPrefixEnvVar) + "=" + network.prefix(), self, "run",
                                   options.job_path, "--out", options.out_dir};
  if (options.without_faults) argv.push_back("--no-faults");
  argv.insert(argv.end(), sets.begin(), sets.end());
  TENAX_ASSIGN_OR_RETURN(auto child, ChildProcess::StartWithOutput(network.InControlNamespace(argv), -1, -1));
  bool forwarded = false;
  std::optional<int> code;
  while (!(code = child->TryWait())) {
    if (StopRequested() && !forwarded) {
      child->Signal(SIGTERM);  // it stops its own children and reaps them
      forwarded = true;
    }
    std::this_thread::sleep_for(20ms);  // waiting for a child that prints its own progress
  }
  network.Remove();
  if (*code == 0) {
    LaunchOutcome outcome;
    outcome.workers = workers;
    outcome.reported_by_child = true;
    TENAX_ASSIGN_OR_RETURN(outcome.summary, ReadJobSummary(options.out_dir));
    return outcome;
  }
  const std::string why = "the launcher inside the emulated topology exited with " + std::to_string(*code) +
                          " (its error is above)";
  if (*code == 2) return InvalidArgument(why);
  if (*code == 130) return Cancelled(why);
  return PeerLost(why);
}

// One `tenax run`, phase by phase: LaunchLocalJob's steps in the order it
// calls them. It owns every child process (the supervisor stops and reaps
// them when the launch ends, whatever the outcome). Not thread-safe: the
// calling thread does everything, the fault injector's callbacks included.
class LocalLaunch {
 public:
  explicit LocalLaunch(const LaunchOptions& options) : options_(options), run_(options.out_dir) {}

  Result<LaunchOutcome> Run() {
    TENAX_RETURN_IF_ERROR(LoadJob());
    TENAX_RETURN_IF_ERROR(CheckRoomForSharedMemory());
    TENAX_RETURN_IF_ERROR(RunReference());
    TENAX_RETURN_IF_ERROR(PrepareRun());
    TENAX_ASSIGN_OR_RETURN(std::optional<LaunchOutcome> inside, SetUpTopology());
    if (inside) return std::move(*inside);
    children_ = std::make_unique<ProcessSupervisor>("job " + cluster().job_id, 5s);
    join_deadline_ = Deadline::After(cluster().join_timeout());
    TENAX_RETURN_IF_ERROR(StartStore());
    TENAX_RETURN_IF_ERROR(StartCoordinator());
    TENAX_RETURN_IF_ERROR(Place());
    TENAX_RETURN_IF_ERROR(StartServers());
    TENAX_RETURN_IF_ERROR(StartWorkers());
    KeepSpares(/*with_the_job=*/true);
    StartFaults();
    StartMigration();
    AnnounceStart();
    TENAX_RETURN_IF_ERROR(Watch());
    TENAX_RETURN_IF_ERROR(WaitForChildren());
    return Summarize();
  }

 private:
  const coord::ClusterConfig& cluster() const { return job_.config.cluster; }
  bool coded() const { return job_.config.mode == "coded"; }
  void Notice(const std::string& text) const {
    if (options_.on_notice) options_.on_notice(text);
  }
  // A `tenax <role>` command line for this job, with its --set overrides.
  std::vector<std::string> RoleArgv(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), self_);
    argv.insert(argv.end(), sets_.begin(), sets_.end());
    return argv;
  }
  // Worker `rank`'s command line (-1: no rank, the coordinator gives an
  // id: a joiner, an async worker): `tenax worker`, or the job's own
  // program ([worker] command) with the job in its environment (the
  // names tenax.torch.Manager reads; TENAX_SECRET and TENAX_RUN_METRICS
  // are this launcher's, inherited).
  std::vector<std::string> WorkerArgv(int rank) const {
    const std::vector<std::string>& command = job_.config.worker.command;
    if (command.empty()) {
      std::vector<std::string> args = {"worker", "--job", options_.job_path, "--coordinator", coordinator_};
      if (rank >= 0) args.insert(args.end(), {"--rank", std::to_string(rank)});
      args.insert(args.end(), {"--out", options_.out_dir});
      if (rank >= 0 && !allreduce_zones_.empty()) {
        std::string zones;
        for (const auto& z : allreduce_zones_) zones += (zones.empty() ? "" : ",") + z;
        args.insert(args.end(), {"--allreduce-zones", zones});
        if (hierarchical_allreduce_) args.push_back("--hierarchical-allreduce");
      } else if (elastic_ && hierarchical_allreduce_) {
        // Every member and joiner alike: each generation works out its
        // zones and sums zone by zone when they have equal sizes.
        args.push_back("--hierarchical-allreduce");
      }
      return RoleArgv(args);
    }
    std::vector<std::string> argv = {"env"};
    if (rank < 0) argv.insert(argv.end(), {"-u", "TENAX_RANK"});
    argv.insert(argv.end(), {"TENAX_COORDINATOR=" + coordinator_, "TENAX_JOB_ID=" + cluster().job_id,
                             "TENAX_WORLD_SIZE=" + std::to_string(cluster().workers), "TENAX_RUN_DIR=" + run_dir_abs_});
    if (rank >= 0) argv.push_back("TENAX_RANK=" + std::to_string(rank));
    // train.max_steps, when the job file states the program's steps (fault
    // plans at_step are checked against it; the live view shows it).
    if (job_.config.max_steps > 0) argv.push_back("TENAX_TOTAL_STEPS=" + std::to_string(job_.config.max_steps));
    if (!python_path_.empty()) argv.push_back("PYTHONPATH=" + python_path_);
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }
  // A warm spare's command line: `tenax worker --spare`, or the job's own
  // program with TENAX_SPARE=1 (tenax.torch.Manager then waits as a spare).
  std::vector<std::string> SpareArgv() const {
    std::vector<std::string> argv = WorkerArgv(-1);
    if (job_.config.worker.command.empty()) {
      argv.push_back("--spare");
    } else {
      // Among env's assignments, after its options ("-u TENAX_RANK"): env reads options first.
      const auto first_assignment = std::find_if(argv.begin() + 1, argv.end(), [](const std::string& a) {
        return a.find('=') != std::string::npos;
      });
      argv.insert(first_assignment, "TENAX_SPARE=1");
    }
    return argv;
  }
  // Process `slot` of the placement runs on its emulated host (as is, without a topology).
  std::vector<std::string> OnSlot(int slot, std::vector<std::string> argv) const {
    return topology_ ? topology_->OnSlot(slot, argv) : argv;
  }
  // Stops every child (after the fault plan's own) and returns `status`.
  Status StopAll(Status status) {
    if (faults_) faults_->Finish(max_step_);  // SIGKILLs the children it stopped: SIGTERM would wait for them
    children_->Stop();
    return status;
  }

  // The job file, its price table, logging and the stop handlers.
  Status LoadJob() {
    TENAX_ASSIGN_OR_RETURN(job_, LoadSyncJob(options_.job_path, options_.overrides));
    if (options_.without_faults) {
      job_.config.faults = FaultPlan{};  // the children's stragglers are the caller's --set
    }
    // Async jobs: workers come and go as in an elastic job.
    async_ = job_.config.mode == "async";
    elastic_ = cluster().elastic || async_;
    if (!job_.config.cost.prices.empty()) {
      TENAX_ASSIGN_OR_RETURN(PriceTable t, LoadPriceTable(job_.config.cost.prices));
      TENAX_RETURN_IF_ERROR(CheckPriceTableCovers(t, async_ ? std::vector<std::string>{"coordinator", "server", "worker"}
                                                            : std::vector<std::string>{"coordinator", "worker"}));
      prices_ = std::move(t);
    }
    InitLogging("run", job_.config.log_level);
    InstallStopHandlers();
    self_ = options_.tenax_binary.empty() ? SelfPath() : options_.tenax_binary;
    inside_topology_ = std::getenv(kTopologyPrefixEnvVar) != nullptr;
    return Status::Ok();
  }

  // Before any child starts: room in /dev/shm for every process of the job
  // (shared_memory.h), unless cluster.transports keeps UCX off shared memory.
  Status CheckRoomForSharedMemory() const {
    const std::string& tls = cluster().transports;  // UCX_TLS: "" or e.g. "tcp", "shm,tcp", "posix", "all"
    bool shm = tls.empty();
    for (const char* t : {"shm", "sm", "posix", "sysv", "all"}) shm = shm || tls.find(t) != std::string::npos;
    if (!shm) return Status::Ok();
    const int64_t processes = cluster().workers + cluster().spares + job_.config.storage.nodes +
                              (async_ ? job_.config.async.servers : 0) +
                              static_cast<int64_t>(job_.config.topology.hosts.size()) + 2;  // + coordinator, launcher
    return CheckSharedMemory("/dev/shm", SharedMemoryNeed(processes), processes);
  }

  // The fault-free reference runs first, as a `tenax run` of its own (with
  // its own emulated hosts, if any), unless this is the launcher re-run
  // inside a topology (its parent ran it).
  Status RunReference() {
    if (!job_.config.report.reference || inside_topology_) return Status::Ok();
    ReferenceRunOptions ro;
    ro.self = self_;
    ro.job_path = options_.job_path;
    ro.overrides = options_.overrides;
    ro.out_dir = options_.out_dir;
    ro.notice = [this](const std::string& text) { Notice(text); };
    TENAX_ASSIGN_OR_RETURN(nlohmann::json r, EnsureReferenceRun(job_.config, ro));
    reference_ = std::move(r);
    return Status::Ok();
  }

  // The run directory emptied, the children's environment (secret, where
  // metrics go), the run monitor and the --set lines every child gets.
  Status PrepareRun() {
    TENAX_ASSIGN_OR_RETURN(hp_, net::ParseHostPort(cluster().coordinator));
    TENAX_RETURN_IF_ERROR(PrepareRunDirectory(options_.out_dir, run_.logs()));
    secret_ = RunSecret(cluster().secret);
    ::setenv(net::kSecretEnvVar, secret_.c_str(), 1);  // the children's secret
    ::setenv(kRunMetricsEnvVar, run_.metrics().c_str(), 1);  // rank 0 appends; workers add their events
    started_at_ = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    // The workers [stragglers] slows from the start (markov's slow_workers).
    std::vector<std::string> injected_stragglers;
    if (job_.config.mode == "sync" && job_.config.stragglers.model == "markov") {
      for (int w : job_.config.stragglers.slow_workers) injected_stragglers.push_back("worker " + std::to_string(w));
    }
    monitor_ = std::make_unique<RunMonitor>(run_.metrics(), RunMonitor::Callbacks{options_.on_notice, options_.on_workers},
                                            injected_stragglers);
    for (const auto& o : options_.overrides) sets_.insert(sets_.end(), {"--set", o});
    if (!job_.config.worker.command.empty()) PrepareCommandWorkers();
    // The price table as this launcher found it (perhaps beside the job file):
    // the workers get the job's text from the coordinator, without its path.
    if (!job_.config.cost.prices.empty()) {
      std::error_code ec;
      const auto absolute = std::filesystem::absolute(job_.config.cost.prices, ec);
      if (!ec) sets_.insert(sets_.end(), {"--set", "cost.prices=" + nlohmann::json(absolute.string()).dump()});
    }
    return Status::Ok();
  }

  // A worker command's environment: the run directory, absolute (the
  // program may change directory), and this tenax's own Python package
  // first on PYTHONPATH (a build folder's python/, beside src/), so the
  // program imports the tenax that launched it.
  void PrepareCommandWorkers() {
    std::error_code ec;
    const auto abs = std::filesystem::absolute(options_.out_dir, ec);
    run_dir_abs_ = ec ? options_.out_dir : abs.lexically_normal().string();
    const auto package = std::filesystem::path(self_).parent_path().parent_path() / "python";
    const char* inherited = std::getenv("PYTHONPATH");
    python_path_ = inherited ? inherited : "";
    if (std::filesystem::exists(package / "tenax" / "__init__.py", ec)) {
      python_path_ = package.lexically_normal().string() + (python_path_.empty() ? "" : ":" + python_path_);
    }
  }

  // An emulated topology (docs/placement.md): the hosts exist before any
  // child, and this thread moves into their control namespace, where the
  // coordinator listens. With namespaces, the whole launch runs again
  // inside them and its outcome is returned here.
  Result<std::optional<LaunchOutcome>> SetUpTopology() {
    if (!job_.config.topology.enabled()) return std::optional<LaunchOutcome>();
    std::unique_ptr<sched::EmulatedNetwork> network;
    if (!inside_topology_) {
      TENAX_ASSIGN_OR_RETURN(network, MakeEmulatedNetwork(job_.config, [this](const std::string& t) { Notice(t); }));
      if (network->namespaces()) {
        TENAX_ASSIGN_OR_RETURN(LaunchOutcome outcome, RunInsideTopology(*network, options_, self_, sets_, cluster().workers));
        outcome.write_report = job_.config.report.html;
        if (reference_) {
          // The inner launcher wrote the summary; the reference is ours.
          AddReference(outcome.summary);
          TENAX_RETURN_IF_ERROR(WriteFileAtomic(run_.summary(), outcome.summary.dump(2) + "\n"));
        }
        return std::optional<LaunchOutcome>(std::move(outcome));
      }
    }
    TENAX_ASSIGN_OR_RETURN(topology_, JobTopology::Create(job_.config, options_.out_dir, std::move(network)));
    hp_.host = topology_->ControlHost();
    sets_.insert(sets_.end(), {"--set", "cluster.coordinator=" + hp_.host + ":" + std::to_string(hp_.port)});
    for (const auto& s : topology_->ChildSets()) sets_.push_back(s);
    return std::optional<LaunchOutcome>();
  }

  // The job's own store ([storage]): its nodes and data before anyone reads it.
  Status StartStore() {
    const StorageConfig& s = job_.config.storage;
    if (s.nodes <= 0) return Status::Ok();
    monitor_->Notice("store: starting " + std::to_string(s.nodes) + " data nodes and putting " + s.source_dir +
                     " into them (RS " + std::to_string(s.data_chunks) + "+" + std::to_string(s.parity_chunks) + ")");
    auto started = RunStorage::Start(job_.config, self_, hp_.host, options_.out_dir, *children_, join_deadline_);
    if (!started.ok()) {
      children_->Stop();
      return Status(started.status().code(), "the job's store: " + started.status().message());
    }
    storage_ = std::move(*started);
    sets_.insert(sets_.end(), {"--set", storage_->CatalogSet()});
    monitor_->Notice(fmt::format("store: {:.1f} MiB of chunks on {} nodes in {:.1f} s (catalog {})",
                                 static_cast<double>(storage_->stored_bytes()) / (1 << 20), s.nodes,
                                 storage_->put_seconds(), storage_->catalog()));
    if (!storage_->recovery_service().empty()) {
      sets_.insert(sets_.end(), {"--set", storage_->RecoveryServiceSet()});
      monitor_->Notice("store: recovery service at " + storage_->recovery_service() +
                       " (catalog and node connections open; the workers' " + job_.config.store_recovery_policy +
                       " recovery asks it)");
    }
    return Status::Ok();
  }

  // The coordinator first, then its port (the workers are pointed at it).
  Status StartCoordinator() {
    TENAX_ASSIGN_OR_RETURN(coordinator_index_, children_->StartLogged("coordinator", CoordinatorArgv(), run_.log("coordinator")));
    // Role of every child by supervisor index, for the cost ("" = not
    // priced: the store's nodes and puts).
    roles_.assign(children_->size() - 1, "");
    roles_.push_back("coordinator");
    TENAX_ASSIGN_OR_RETURN(port_, WaitForPortFile(run_.coordinator_port(), *children_, join_deadline_));
    coordinator_ = hp_.host + ":" + std::to_string(port_);
    return Status::Ok();
  }

  // Without a port: the first start, which picks a free one; a restart by
  // the fault plan takes the same port again, so the members and servers
  // find it where they knock. Either writes the port file once it listens.
  std::vector<std::string> CoordinatorArgv(uint16_t port = 0) const {
    std::vector<std::string> argv = {"coordinator", "--job", options_.job_path, "--state", run_.coordinator_db(),
                                     "--port-file", run_.coordinator_port()};
    if (port != 0) argv.insert(argv.end(), {"--port", std::to_string(port)});
    if (!cluster().metrics_listen.empty()) {
      argv.insert(argv.end(), {"--metrics-listen", cluster().metrics_listen, "--metrics-port-file",
                               run_.coordinator_metrics_port()});
    }
    return RoleArgv(argv);
  }

  // The fault plan's restart: the coordinator again on its state file and
  // port; it resumes the job (members rejoin within the join timeout).
  Result<size_t> RestartCoordinator() {
    const int restart = ++coordinator_restarts_;
    std::error_code ec;
    std::filesystem::remove(run_.coordinator_port(), ec);  // written again once the new one listens
    TENAX_ASSIGN_OR_RETURN(size_t index, children_->StartLogged("coordinator", CoordinatorArgv(port_),
                                                                run_.log("coordinator-" + std::to_string(restart))));
    children_->ExpectExit(index);  // the plan may kill it again
    roles_.resize(children_->size() - 1, "");
    roles_.push_back("coordinator");
    coordinator_index_ = index;
    return index;
  }

  // With a topology: probe the emulated hosts and place every process.
  Status Place() {
    if (!topology_) return Status::Ok();
    TENAX_RETURN_IF_ERROR(topology_->ProbeAndPlace(self_, hp_.host, port_, secret_, run_.logs(),
                                                   static_cast<int>(cluster().workers) + (coded() ? 1 : 0),
                                                   async_ ? static_cast<int>(job_.config.async.servers) : 0));
    std::string placed;
    for (int r = 0; r < cluster().workers; ++r) {
      placed += (r ? ", " : "") + ("worker " + std::to_string(r)) + " on " + topology_->HostOfSlot(r);
    }
    monitor_->Notice("placement (" + job_.config.placement.policy + "): " + placed);
    if (cluster().tcp_streams == 0 && topology_->namespaces()) {
      // net.tcp_streams = "auto" between namespaced hosts (TCP): from the
      // probes. The processes started from here on get it.
      std::string why;
      const int streams = topology_->AutoTcpStreams(&why);
      sets_.insert(sets_.end(), {"--set", "net.tcp_streams=" + std::to_string(streams)});
      monitor_->Notice("net.tcp_streams (auto): " + std::to_string(streams) + " per peer (" + why + ")");
    }
    if (job_.config.mode == "sync" && !coded()) {
      const sched::AllreduceChoice c =
          topology_->ChooseAllreduce(static_cast<int>(cluster().workers), job_.config.allreduce);
      // An elastic job's ranks change: its members get the choice, not the
      // zone list, and apply it in every generation whose zones allow it.
      if (!elastic_) allreduce_zones_ = c.zones;
      hierarchical_allreduce_ = c.hierarchical;
      monitor_->Notice("allreduce: " + c.reason +
                       (elastic_ && c.hierarchical ? " (elastic: in every generation whose zones have equal sizes)" : ""));
    }
    return Status::Ok();
  }

  // Shard s on its checkpoint directory: a restarted shard continues from
  // its newest intact checkpoint there (docs/async.md).
  Result<size_t> StartServer(int64_t s) {
    const std::string id = std::to_string(s);
    const std::vector<std::string> argv = RoleArgv({"server", "--job", options_.job_path, "--shard", id, "--checkpoints",
                                                    run_.server_checkpoints(id), "--coordinator", coordinator_});
    const int restart = server_restarts_[s];
    const std::string log = run_.log("server-" + id + (restart > 0 ? "-" + std::to_string(restart) : ""));
    const int first_server_slot = static_cast<int>(cluster().workers) + (coded() ? 1 : 0);
    TENAX_ASSIGN_OR_RETURN(size_t index, children_->StartLogged("server " + id,
                                                                OnSlot(first_server_slot + static_cast<int>(s), argv), log));
    roles_.push_back("server");
    return index;
  }

  Status StartServers() {
    for (int64_t s = 0; async_ && s < job_.config.async.servers; ++s) {
      TENAX_ASSIGN_OR_RETURN(size_t index, StartServer(s));
      servers_.push_back(index);
    }
    return Status::Ok();
  }

  // cluster.workers workers, and a coded job's decoder: the last rank, a
  // `tenax worker` too (docs/coded.md).
  Status StartWorkers() {
    for (int r = 0; r < cluster().workers; ++r) {
      // Async workers take whatever id the coordinator gives (they come and go).
      const std::string name = "worker " + std::to_string(r);
      TENAX_ASSIGN_OR_RETURN(size_t index, children_->StartLogged(name, OnSlot(r, WorkerArgv(async_ ? -1 : r)),
                                                                  run_.log("worker-" + std::to_string(r))));
      monitor_->AddWorker(name, children_->pid(index), topology_ ? topology_->HostOfSlot(r) : "");
      // In an elastic job a worker that dies is the coordinator's to judge
      // (the others go on): its exit is not the launcher's failure.
      if (elastic_) children_->ExpectExit(index);
      if (elastic_ && topology_) {
        if (auto host = topology_->HostIndexOfSlot(r)) host_of_member_[index] = *host;
      }
      workers_.push_back(index);
      roles_.push_back("worker");
    }
    if (!coded()) return Status::Ok();
    const std::string rank = std::to_string(cluster().workers);
    const std::vector<std::string> argv = RoleArgv({"worker", "--job", options_.job_path, "--coordinator",
                                                    coordinator_, "--rank", rank, "--out", options_.out_dir});
    TENAX_ASSIGN_OR_RETURN(size_t index, children_->StartLogged("decoder (rank " + rank + ")",
                                                                OnSlot(static_cast<int>(cluster().workers), argv),
                                                                run_.log("decoder")));
    decoder_index_ = index;
    roles_.push_back("worker");
    return Status::Ok();
  }

  // A joiner has no rank: it joins the running elastic job and the
  // coordinator gives it an id.
  Result<size_t> StartJoiner(int64_t n) {
    const std::string id = std::to_string(n);
    std::string host;
    auto index = StartUnranked("joiner " + id, "joiner-" + id, WorkerArgv(-1), &host);
    if (index.ok() && topology_) {
      monitor_->Notice("placement changed: joiner " + id + " placed on " + host +
                       " (best link score among hosts with a free slot)");
    }
    return index;
  }
  // A worker without a rank (a joiner, a spare) named `name`, logging to
  // logs/<log>.log, on the best host with a free slot under a topology:
  // its exit is the coordinator's to judge, and it is priced as a worker.
  Result<size_t> StartUnranked(const std::string& name, const std::string& log, const std::vector<std::string>& argv,
                               std::string* host) {
    size_t host_index = 0;
    if (topology_) {
      children_->Poll();  // the slots of members that exited since the last look are free again
      WatchExits();
    }
    auto index = children_->StartLogged(name, topology_ ? topology_->OnNewHost(argv, host, &host_index) : argv,
                                        run_.log(log));
    if (!index.ok()) return index;
    children_->ExpectExit(*index);
    if (topology_) host_of_member_[*index] = host_index;
    roles_.push_back("worker");  // a spare too: a machine of the same market
    monitor_->AddWorker(name, children_->pid(*index), *host);
    return index;
  }

  // cluster.spares: keeps that many warm spares waiting beside the running
  // job (docs/elastic.md, "Warm spares"). Called once with the workers'
  // start (`with_the_job`) and then on every new generation, which replaces
  // the spares it admitted. A spare that exits on its own is replaced too,
  // up to kMaxSpareFailures in a run, so one that cannot start does not
  // loop.
  //
  // Priority: the spares started with the job start at the members'
  // priority, beside the members' own start-up (no training yet to slow),
  // so that they are warm when the job begins: at nice 19 beside four
  // training members on two cores a spare took 7-8 s to be ready, and a
  // loss before then found none. One still starting when the first
  // generation forms drops to SCHED_IDLE. Later spares start in SCHED_IDLE:
  // on a host they share with members their start-up must not slow the
  // job, and a member waking from its allreduce preempts them at once. An
  // admitted spare gets the members' class and priority back
  // (RestorePriority).
  void KeepSpares(bool with_the_job = false) {
    if (!elastic_ || cluster().spares <= 0) return;
    constexpr int kMaxSpareFailures = 3;
    int waiting = 0;
    for (size_t i : spares_) {
      const std::string state = monitor_->StateOf(children_->pid(i));
      if (state == "active" && spares_admitted_.insert(i).second) RestorePriority(i);
      if (state == "spare" && !with_the_job && spares_at_members_priority_.count(i) &&
          !monitor_->SpareReady(children_->pid(i))) {
        spares_at_members_priority_.erase(i);
        (void)children_->SetIdle(i);  // best effort: moving to SCHED_IDLE needs no right
      }
      if (auto code = children_->exit_code(i)) {
        if (spare_exits_seen_.insert(i).second && *code != 0 && !spares_admitted_.count(i)) ++spare_failures_;
        continue;
      }
      if (state == "spare") ++waiting;
    }
    while (waiting < cluster().spares) {
      if (spare_failures_ >= kMaxSpareFailures) {
        if (!spares_given_up_) {
          Notice("no more spares: " + std::to_string(spare_failures_) + " exited on their own (their logs are spare-N.log in " +
                 run_.logs() + ")");
        }
        spares_given_up_ = true;
        return;
      }
      const std::string id = std::to_string(spares_.size() + 1);
      std::vector<std::string> argv = SpareArgv();
      std::string host;
      auto index = StartUnranked("spare " + id, "spare-" + id, argv, &host);
      if (!index.ok()) {
        Notice("spare " + id + " did not start: " + index.status().message());
        ++spare_failures_;
        continue;
      }
      spares_.push_back(*index);
      if (with_the_job) {
        spares_at_members_priority_.insert(*index);
      } else if (Status st = children_->SetIdle(*index); !st.ok()) {
        Notice("spare " + id + " starts at the members' priority: " + st.message());
      }
      ++waiting;
    }
  }
  // A spare a generation admitted trains as a member: the class it waited
  // in (SCHED_IDLE) goes back to the normal one at the launcher's own nice
  // value, on every thread. Without the right to (RLIMIT_NICE), it stays
  // and is said.
  void RestorePriority(size_t spare) {
    errno = 0;
    const int own = ::getpriority(PRIO_PROCESS, 0);
    if (errno != 0) return;
    if (Status st = children_->SetNice(spare, own); !st.ok()) {
      monitor_->Notice(children_->name(spare) + " trains in SCHED_IDLE beside members at nice " + std::to_string(own) +
                       " (it may lag them on a shared host): " + st.message());
    }
  }
  // The job is done: spares still waiting and joiners not yet admitted
  // are not needed. SIGTERM ends their wait at once (a spare exits 0), so
  // neither they nor the coordinator, which lingers while they are
  // connected, hold the run's end up.
  void ReleaseWaitingWorkers() {
    for (size_t i = 0; i < children_->size(); ++i) {
      if (children_->exit_code(i)) continue;
      const std::string state = monitor_->StateOf(children_->pid(i));
      if (state == "spare" || state == "rejoining") (void)children_->Signal(i, SIGTERM);
    }
  }

  // placement.migrate: a RunMigration that moves members off degraded
  // links while the job runs (run_migration.h).
  void StartMigration() {
    if (!elastic_ || !topology_ || !job_.config.placement.migrate) return;
    RunMigrationOptions mo;
    mo.children = children_.get();
    mo.topology = topology_.get();
    mo.monitor = monitor_.get();
    mo.host_of_member = &host_of_member_;
    mo.coordinator_host = hp_.host;
    mo.coordinator_port = port_;
    mo.secret = secret_;
    mo.migrant_argv = [this] { return SpareArgv(); };
    mo.log_path = [this](const std::string& name) { return run_.log(name); };
    mo.on_started = [this](size_t) { roles_.push_back("worker"); };  // priced as a worker while it runs
    mo.on_left_as_spare = [this](size_t child) { spares_.push_back(child); };
    mo.warm_timeout = cluster().join_timeout();
    mo.run_start = wall_start_;
    migration_.emplace(std::move(mo));
  }

  // The fault plan's clock starts with the workers; its records go to
  // metrics.jsonl as they are made (RunMonitor).
  void StartFaults() {
    FaultInjectorOptions fo;
    fo.plan = job_.config.faults;
    fo.workers = workers_;
    fo.expect_exits = elastic_;
    fo.on_notice = [this](const std::string& text) { monitor_->Notice(text); };
    fo.start_joiner = [this](int64_t n) { return StartJoiner(n); };
    fo.servers = servers_;
    if (storage_) {
      fo.storage = storage_->processes();
      fo.wipe_storage = [this](int64_t node) -> Status {
        std::error_code ec;
        std::filesystem::remove_all(storage_->NodeDir(node), ec);
        if (ec) return IoError(storage_->NodeDir(node) + ": " + ec.message());
        return Status::Ok();
      };
    }
    fo.on_record = [this](const nlohmann::json& r) { monitor_->OnFaultRecord(r); };
    fo.coordinator = coordinator_index_;
    fo.restart_coordinator = [this] { return RestartCoordinator(); };
    if (topology_) {
      fo.link_faults_file = topology_->link_faults_file();
      fo.zone_of_host = topology_->ZoneOfHost();
      fo.host_of_worker = [this](int64_t w) { return topology_->HostNameOfSlot(static_cast<int>(w)); };
    }
    fo.restart_server = [this](int64_t s) -> Result<size_t> {
      ++server_restarts_[s];
      TENAX_ASSIGN_OR_RETURN(size_t index, StartServer(s));
      children_->ExpectExit(index);  // it may be the plan's target again
      return index;
    };
    faults_ = std::make_unique<FaultInjector>(*children_, std::move(fo));
    faults_->Start();
  }

  void AnnounceStart() {
    const coord::ClusterConfig& k = cluster();
    spdlog::debug("started the coordinator (pid {}) and {} workers", children_->pid(0), k.workers);
    monitor_->Notice("job " + k.job_id + ": coordinator on " + coordinator_ + ", " + std::to_string(k.workers) +
                     (coded() ? " workers and a decoder" : " workers") + "; logs in " + run_.logs());
    // The workers load the same OpenBLAS with the same environment as this
    // process: if it fell back to slow kernels here, so did theirs.
    if (const std::string advice = OpenBlasAdviceForThisProcess(); !advice.empty()) Notice("note: " + advice);
    if (!k.metrics_listen.empty()) {
      std::ifstream port_file(run_.coordinator_metrics_port());
      int metrics_port = 0;
      if (port_file >> metrics_port && metrics_port > 0) {
        monitor_->Notice("Prometheus metrics: http://" + hp_.host + ":" + std::to_string(metrics_port) + "/metrics");
      }
    }
  }

  // Tells the monitor of every exit not yet seen, and keeps the first
  // worker that failed on its own (no fault aimed at it): if the job then
  // fails, that is most likely why, so its log's end goes into the error.
  void WatchExits() {
    exit_seen_.resize(children_->size(), false);
    for (size_t i = 0; i < children_->size(); ++i) {
      if (exit_seen_[i]) continue;
      if (auto code = children_->exit_code(i)) {
        exit_seen_[i] = true;
        if (auto h = host_of_member_.find(i); h != host_of_member_.end()) {
          topology_->ReleaseSlotOn(h->second);  // an elastic member gone: its slot takes the next joiner
          host_of_member_.erase(h);
        }
        std::optional<ChildFailure> report = children_->ExitReport(i);
        const std::string why = report && !report->last_lines.empty() ? report->last_lines.back() : "";
        if (!monitor_->OnExit(children_->pid(i), *code, why) || !report) continue;
        if (!first_own_failure_) first_own_failure_ = report;
        if (!job_started_ && std::find(workers_.begin(), workers_.end(), i) != workers_.end()) {
          ranked_failures_before_start_.push_back(*report);
        }
      }
    }
  }
  std::string OwnFailure() {
    WatchExits();
    return first_own_failure_ ? "; the first worker that failed on its own: " + first_own_failure_->Describe() : "";
  }

  // Until the job's first generation or step, every worker (and a coded
  // job's decoder) must join for the job to start at all: one that failed on
  // its own by then means the job cannot start, and waiting out the
  // coordinator's join timeout would only hide why. (An async job's workers
  // come and go; a worker a fault was aimed at is the plan's business.)
  // An elastic job does without members lost before it formed: its warm
  // spares take their places (the coordinator's FillVacatedPlaces), or,
  // without spares, it starts short of them while min_workers remain. So
  // it fails at once only when more workers failed than that allows (every
  // worker of a broken program fails within seconds, and its error should
  // not wait for the join timeout); a spare's own failure is KeepSpares'
  // business (it starts another).
  std::optional<ChildFailure> FailureBeforeStart() const {
    if (job_started_ || async_) return std::nullopt;
    const int64_t failed = static_cast<int64_t>(ranked_failures_before_start_.size());
    const bool elastic_can_do_without = elastic_ && (cluster().spares > 0 ? !spares_given_up_ && failed <= cluster().spares
                                                                          : failed <= cluster().workers - cluster().min_workers);
    if (failed > 0 && !elastic_can_do_without) return ranked_failures_before_start_.front();
    if (first_own_failure_ && !elastic_) return first_own_failure_;
    if (decoder_index_) {
      if (auto code = children_->exit_code(*decoder_index_); code && *code != 0) {
        return children_->ExitReport(*decoder_index_);
      }
    }
    return std::nullopt;
  }

  // An elastic job's worker that ended before the job formed, killed by
  // the plan or on its own, may never have joined: the coordinator, which
  // had no connection of it to lose, hears it from here, and a waiting
  // spare takes its place or, without spares, the job starts short of it
  // (JobStateMachine::OnWorkerExited). Once per
  // worker; a message lost with the connection costs the join timeout, as
  // before.
  void TellExitsBeforeStart(coord::JobWatcher& watcher) {
    if (!elastic_ || job_started_) return;
    for (size_t r = 0; r < workers_.size(); ++r) {
      const size_t i = workers_[r];
      if (!children_->exit_code(i) || !told_exit_before_start_.insert(i).second) continue;
      Status st = watcher.TellWorkerExited(static_cast<int>(r), children_->name(i) + " ended before the job formed",
                                           Deadline::After(std::chrono::seconds(1)));
      if (!st.ok()) spdlog::warn("could not tell the coordinator that {} ended: {}", children_->name(i), st.message());
    }
  }

  // Follows the job as a watcher of the coordinator until it is done;
  // an error stops every child first.
  Status Watch() {
    const coord::ClusterConfig& k = cluster();
    coord::JobWatcherOptions wo;
    wo.host = hp_.host;
    wo.port = port_;
    wo.job_id = k.job_id;
    wo.world = static_cast<int>(RankCount(job_.config));
    wo.secret = secret_;
    wo.peer_timeout = k.peer_timeout();
    wo.name = "launcher";
    // Step triggers follow the fastest rank; so does an async job's progress
    // (its workers train units side by side, and a lost one never reports again).
    // A coded job's front is its decoder's step (a stopped worker lags behind).
    // A worker command's progress is shown at its front too (OnProgress).
    wo.report_max_step = !job_.config.faults.empty() || async_ || coded() || !job_.config.worker.command.empty();
    DecoderEventTail decoder_events(run_.decoder_events());
    TENAX_ASSIGN_OR_RETURN(auto watcher, coord::JobWatcher::Connect(wo, join_deadline_));
    int64_t watched_restart = 0;  // the coordinator process the watcher follows (restarts by the plan)
    // Connections to a running coordinator lost and made again; bounded, so
    // a coordinator that keeps dropping the launcher ends the run, named.
    constexpr int kMaxWatcherReconnects = 10;
    int watcher_reconnects = 0;
    uint64_t last_generation = 0;  // the newest generation announced
    while (true) {
      if (StopRequested()) {
        Notice("stopping the coordinator and " + std::to_string(k.workers) + " workers");
        return StopAll(StopStatus());
      }
      children_->Poll();  // notes exits as they happen, so the first failure is the first one
      faults_->Poll(max_step_);
      WatchExits();
      TellExitsBeforeStart(*watcher);
      if (std::optional<ChildFailure> early = FailureBeforeStart()) {
        return StopAll(PeerLost("job " + k.job_id + " cannot start, a worker failed before every worker had joined: " +
                                early->Describe()));
      }
      monitor_->Poll();
      if (migration_ && job_started_) migration_->Poll(max_step_);
      Deadline wait = Deadline::After(50ms);
      if (auto due = faults_->NextDue()) wait = wait.Earlier(Deadline::At(*due));
      auto event = watcher->Next(wait);
      if (!event.ok() && (faults_->CoordinatorDown() || faults_->coordinator_restarts() > watched_restart)) {
        // The plan killed the coordinator: follow the job again once its
        // restart (if the plan has one) listens on the same port.
        Notice("lost the coordinator (the fault plan's kill): " + event.status().message() +
               "; following the job again when it is restarted");
        auto again = RewatchAfterCoordinatorRestart(wo);
        if (!again.ok()) return StopAll(again.status());
        if (!*again) {
          Notice("the restarted coordinator ended the job before the launcher was back");
          return Status::Ok();  // JobDone
        }
        watcher = std::move(*again);
        watched_restart = faults_->coordinator_restarts();
        // A restarted coordinator resumes from its state file, which holds
        // no place lost before the job formed: tell it those exits again
        // (it ignores one it knows, and any once the job has formed).
        told_exit_before_start_.clear();
        continue;
      }
      if (!event.ok() && !children_->exit_code(coordinator_index_) && watcher_reconnects < kMaxWatcherReconnects) {
        // The coordinator still runs: only this connection was lost (the
        // coordinator drops a watcher it has not heard from for a peer
        // timeout, e.g. while this thread was held up on a loaded machine).
        // Follow the job again on a new connection.
        ++watcher_reconnects;
        Notice("lost the connection to the coordinator, which still runs (" + event.status().message() +
               "); following the job again");
        auto again = coord::JobWatcher::Connect(wo, Deadline::After(k.join_timeout()));
        if (again.ok()) {
          watcher = std::move(*again);
          continue;
        }
        event = again.status();
      }
      if (!event.ok() && children_->exit_code(coordinator_index_) == 0) {
        // It ended the job (exit 0 is a finished job) while this launcher
        // was not connected.
        Notice("the coordinator ended the job while the launcher was not connected to it");
        return Status::Ok();  // JobDone
      }
      if (!event.ok()) {
        std::optional<ChildFailure> why = children_->FirstFailure();
        const std::string own = why ? "" : OwnFailure();
        return StopAll(PeerLost("lost the coordinator: " + event.status().message() + (why ? "; " + why->Describe() : own)));
      }
      if (coded()) decoder_events.Poll([this](const std::string& text) { monitor_->Notice(text); });
      if (!event->has_value()) continue;
      job_started_ = true;  // the coordinator formed the job: it judges failures from now on
      if (auto* p = std::get_if<coord::JobProgress>(&**event)) {
        OnProgress(*p);
      } else if (auto* g = std::get_if<coord::JobGeneration>(&**event)) {
        // A watcher that follows the job again (a new connection, or a
        // restarted coordinator) hears the current generation once more.
        if (g->generation <= last_generation) continue;
        last_generation = g->generation;
        std::string ids;
        for (int m : g->members) ids += (ids.empty() ? "" : ", ") + std::to_string(m);
        monitor_->Notice("generation " + std::to_string(g->generation) + ": " + std::to_string(g->members.size()) +
                         " workers (ranks " + ids + "): " + g->why);
        monitor_->OnGeneration(*g);
        if (migration_) migration_->OnGeneration();
        KeepSpares();
      } else if (auto* q = std::get_if<coord::JobQueue>(&**event)) {
        // An async job's queue: leases that expired and units re-issued
        // are event lines; the last counts go into the summary.
        queue_counts_ = q->counts;
        monitor_->OnQueueCounts(q->counts);
      } else if (auto* f = std::get_if<coord::JobFailed>(&**event)) {
        const std::string own = OwnFailure();
        return StopAll(PeerLost("job " + k.job_id + " failed: " + f->Describe() + " (logs in " + run_.logs() + ")" + own));
      } else {
        return Status::Ok();  // JobDone
      }
    }
  }

  // The coordinator is down by the plan's hand: waits for the plan to start
  // it again (its restart may be timed after the kill), then for it to
  // accept the watcher, within the join timeout after the restart. The
  // children are watched meanwhile: a failure of one, or of the restarted
  // coordinator, ends the wait with its report. A null watcher: the
  // restarted coordinator already ended the job (exit 0).
  Result<std::unique_ptr<coord::JobWatcher>> RewatchAfterCoordinatorRestart(const coord::JobWatcherOptions& wo) {
    while (faults_->CoordinatorDown()) {
      if (StopRequested()) return StopStatus();
      if (!faults_->CoordinatorRestartPending()) {
        return PeerLost("lost the coordinator: the fault plan killed it and has no restart of it to come (add a "
                        "[[faults]] entry with action = \"restart\" and coordinator = true)");
      }
      children_->Poll();
      faults_->Poll(max_step_);
      WatchExits();
      Deadline wait = Deadline::After(50ms);
      if (auto due = faults_->NextDue()) wait = wait.Earlier(Deadline::At(*due));
      std::this_thread::sleep_until(wait.at());  // pacing: nothing to hear until the restart
    }
    const Deadline deadline = Deadline::After(cluster().join_timeout());
    Status last = Status::Ok();
    while (!deadline.Expired()) {
      if (StopRequested()) return StopStatus();
      children_->Poll();
      WatchExits();
      if (auto code = children_->exit_code(coordinator_index_)) {
        // 0: every member reported done to it and it ended the job before
        // the launcher was back (a kill near the end): the job is done.
        if (*code == 0) return std::unique_ptr<coord::JobWatcher>();
        std::optional<ChildFailure> report = children_->ExitReport(coordinator_index_);
        return PeerLost("the restarted coordinator exited with code " + std::to_string(*code) +
                        (report ? ": " + report->Describe() : ""));
      }
      if (!std::filesystem::exists(run_.coordinator_port())) {
        std::this_thread::sleep_for(50ms);  // pacing: it writes the file once it listens
        continue;
      }
      auto watcher = coord::JobWatcher::Connect(wo, Deadline::After(1s).Earlier(deadline));
      if (watcher.ok()) {
        Notice("following the restarted coordinator on " + coordinator_);
        monitor_->OnCoordinatorFollowed();
        return watcher;
      }
      last = watcher.status();
      std::this_thread::sleep_for(100ms);  // pacing reconnect attempts
    }
    return PeerLost("the restarted coordinator did not accept the launcher within the join timeout: " + last.message());
  }

  void OnProgress(const coord::JobProgress& p) {
    max_step_ = std::max(max_step_, p.max_step);
    monitor_->OnProgress();
    faults_->Poll(max_step_);
    if (!options_.on_progress) return;
    const int64_t every = job_.config.log_every_steps;
    // A worker command reports every 250 ms, not at log.every_steps: its
    // log lines come when the front crosses a multiple, as below.
    const bool crossings = async_ || coded() || !job_.config.worker.command.empty();
    if (!crossings && !p.max_step_only) {
      options_.on_progress(ToTrainProgress(p, every));
    } else if (crossings && (p.total_steps > 0 || !job_.config.worker.command.empty())) {
      // Async: the front of the job, the furthest step any worker reached
      // (units are issued in step order); coded: the decoder's step; a
      // worker command: its fastest member's. A log line whenever it
      // crosses a multiple of log.every_steps.
      coord::JobProgress front = p;
      front.step = max_step_;
      if (front.steps_per_epoch > 0) front.epoch = (max_step_ - 1) / front.steps_per_epoch + 1;
      TrainProgress tp = ToTrainProgress(front, every);
      const int64_t bucket = max_step_ / std::max<int64_t>(1, every);
      tp.log_point = bucket > async_logged_ || max_step_ == p.total_steps;
      async_logged_ = std::max(async_logged_, bucket);
      options_.on_progress(tp);
    }
  }

  // Every child ends on its own once the job is done, except those the
  // fault plan stopped (Finish SIGKILLs them) and the store's nodes, which
  // serve until the job is done.
  Status WaitForChildren() {
    faults_->Finish(max_step_);
    if (elastic_) ReleaseWaitingWorkers();
    monitor_->Finish();
    if (storage_) {
      for (size_t index : storage_->processes()) (void)children_->Signal(index, SIGTERM);
      if (auto service = storage_->service_process()) (void)children_->Signal(*service, SIGTERM);
    }
    // Every member reported done before JobDone, so members exit at once
    // (and async servers write their last checkpoint on the coordinator's
    // Done, well within the grace); in an elastic job, whoever still runs
    // after a short grace was never needed.
    Status waited = children_->WaitAll(Deadline::After(elastic_ ? 3s : 30s), StopStatus);
    if (!waited.ok() && elastic_ && waited.code() == StatusCode::kDeadlineExceeded) {
      // A joiner started near the end may still be loading its data or
      // knocking at a coordinator that is gone: the job no longer needs it.
      Notice("the job is done; stopping workers that had not joined it (" + waited.message() + ")");
      children_->Stop();
      waited = Status::Ok();
    }
    if (!waited.ok()) {
      return Status(waited.code(), "after the job finished: " + waited.message() + " (logs in " + run_.logs() + ")");
    }
    return Status::Ok();
  }

  // Rank 0's summary.json completed with what only the launcher knows.
  Result<LaunchOutcome> Summarize() {
    LaunchOutcome outcome;
    outcome.workers = cluster().workers;
    TENAX_ASSIGN_OR_RETURN(outcome.summary, ReadJobSummary(options_.out_dir));
    nlohmann::json& s = outcome.summary;
    s["launcher_wall_seconds"] = std::chrono::duration<double>(SteadyClock::now() - wall_start_).count();
    s["started_at"] = started_at_;
    outcome.write_report = job_.config.report.html && !inside_topology_;
    nlohmann::json faults = MergeFaultRecords(faults_->Executed(), monitor_->FaultsWithReactions());
    if (!faults.empty() || !job_.config.faults.empty()) s["faults"] = std::move(faults);
    s["bytes_moved"] = BytesMoved(s, monitor_->RecoveryBytes());
    if (reference_) AddReference(s);
    if (topology_) s["placement"] = topology_->Summary();
    if (cluster().spares > 0) {
      s["spares"] = {{"configured", cluster().spares},
                     {"started", spares_.size()},
                     {"admitted", spares_admitted_.size()},
                     {"exited_on_their_own", spare_failures_}};
    }
    if (migration_) s["migrations"] = migration_->Records();
    if (async_) TENAX_RETURN_IF_ERROR(AddQueueCounts(s));
    if (prices_) TENAX_RETURN_IF_ERROR(AddCost(s));
    NoticeGenerations(s);
    TENAX_RETURN_IF_ERROR(WriteFileAtomic(run_.summary(), s.dump(2) + "\n"));
    return outcome;
  }

  void AddReference(nlohmann::json& summary) const {
    summary["reference_test_accuracy"] = reference_->value("final_test_accuracy", 0.0);
    summary["reference_dir"] = "reference";
    Notice(AccuracyAgainstReference(summary));
  }

  // An async job's preemptions and its queue's counts.
  Status AddQueueCounts(nlohmann::json& summary) const {
    int64_t preemptions = 0;
    for (const auto& f : faults_->Executed()) {
      const std::string action = f.value("action", "");
      if (action == "kill" || action == "preempt") ++preemptions;
    }
    summary["preemptions"] = preemptions;
    // The coordinator sends its final counts right before JobDone.
    if (!queue_counts_) return Internal("the coordinator of async job " + cluster().job_id + " sent no work-queue counts");
    const coord::WorkQueueCounts& counts = *queue_counts_;
    summary["units"] = counts.units;
    summary["units_issued"] = counts.units_issued;
    summary["units_reissued"] = counts.units_reissued;
    summary["results_rejected"] = counts.results_rejected;
    summary["leases_expired"] = counts.leases_expired;
    summary["partial_results"] = counts.partial_results;
    return Status::Ok();
  }

  // What each role's processes ran for, priced.
  Status AddCost(nlohmann::json& summary) {
    std::map<std::string, double> seconds;
    if (storage_ && prices_->role_market.count("storage")) {
      for (size_t index : storage_->processes()) roles_[index] = "storage";
      if (auto service = storage_->service_process()) roles_[*service] = "storage";
    }
    for (size_t i = 0; i < children_->size() && i < roles_.size(); ++i) {
      if (!roles_[i].empty()) seconds[roles_[i]] += children_->RunSeconds(i);
    }
    TENAX_ASSIGN_OR_RETURN(CostReport cost, ComputeCost(*prices_, seconds));
    summary["cost"] = CostToJson(*prices_, cost);
    return Status::Ok();
  }

  // The reactions, as the final rank 0 measured them.
  void NoticeGenerations(const nlohmann::json& summary) const {
    for (const auto& g : summary.value("generations", nlohmann::json::array())) {
      if (g.value("number", 0) <= 1 && !g.contains("join_transfer_ms")) continue;
      std::string line =
          "generation " + std::to_string(g.value("number", 0)) + " from step " + std::to_string(g.value("first_step", 0));
      for (const char* key : {"detect_ms", "reform_ms", "join_transfer_ms"}) {
        if (g.contains(key)) line += fmt::format(", {} {:.0f}", key, g[key].get<double>());
      }
      Notice(line + ": " + g.value("why", ""));
    }
  }

  const LaunchOptions& options_;
  const RunDir run_;
  const SteadyClock::time_point wall_start_ = SteadyClock::now();
  // LoadJob, RunReference, PrepareRun
  SyncJob job_;
  bool async_ = false;
  bool elastic_ = false;
  std::map<size_t, size_t> host_of_member_;  // elastic on a topology: child index -> host, until it exits
  std::vector<size_t> spares_;               // child indexes of every spare started (KeepSpares)
  std::set<size_t> spare_exits_seen_;
  std::set<size_t> spares_admitted_;  // spares a generation made members
  std::set<size_t> spares_at_members_priority_;  // started with the job, not yet in SCHED_IDLE (KeepSpares)
  int spare_failures_ = 0;
  bool spares_given_up_ = false;
  bool inside_topology_ = false;  // the launcher re-run inside a topology's namespaces
  std::vector<std::string> allreduce_zones_;  // fixed sync jobs with a topology: the workers' zones by rank
  bool hierarchical_allreduce_ = false;       // and whether they sum zone by zone
  std::optional<PriceTable> prices_;
  std::string self_;
  std::optional<nlohmann::json> reference_;
  net::HostPort hp_;
  std::string secret_;
  double started_at_ = 0;
  std::unique_ptr<RunMonitor> monitor_;
  std::vector<std::string> sets_;  // "--set", "k=v" for every child
  std::string run_dir_abs_;        // a worker command's TENAX_RUN_DIR
  std::string python_path_;        // a worker command's PYTHONPATH
  // SetUpTopology and the processes; destroyed in reverse: the supervisor
  // (which stops what still runs) before the topology it ran in.
  std::unique_ptr<JobTopology> topology_;
  std::unique_ptr<ProcessSupervisor> children_;
  Deadline join_deadline_ = Deadline::After(0s);
  std::optional<RunStorage> storage_;
  uint16_t port_ = 0;
  std::string coordinator_;         // host:port the children dial
  std::vector<std::string> roles_;  // by supervisor index
  std::vector<size_t> servers_;
  std::vector<size_t> workers_;
  std::optional<size_t> decoder_index_;
  std::map<int64_t, int> server_restarts_;  // shard -> times the fault plan restarted it
  size_t coordinator_index_ = 0;            // supervisor index of the coordinator's current process
  int coordinator_restarts_ = 0;            // by the fault plan
  std::unique_ptr<FaultInjector> faults_;
  std::optional<RunMigration> migration_;  // placement.migrate
  // Watch
  int64_t max_step_ = 0;      // the highest step any rank reported
  int64_t async_logged_ = 0;  // async: the last multiple of log.every_steps shown as a log line
  std::optional<coord::WorkQueueCounts> queue_counts_;  // async: the coordinator's latest
  std::vector<bool> exit_seen_;
  std::optional<ChildFailure> first_own_failure_;
  std::set<size_t> told_exit_before_start_;  // TellExitsBeforeStart
  std::vector<ChildFailure> ranked_failures_before_start_;  // workers (not spares) that failed on their own
  bool job_started_ = false;
};

}  // namespace

Result<LaunchOutcome> LaunchLocalJob(const LaunchOptions& options) { return LocalLaunch(options).Run(); }

}  // namespace tenax

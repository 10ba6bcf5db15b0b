#include "tenax/launch/local_launcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <signal.h>
#include <thread>

#include "fault_injector.h"
#include "job_topology.h"
#include "reference_run.h"
#include "run_monitor.h"
#include "run_storage.h"
#include "tenax/coord/job_watcher.h"
#include "tenax/coord/work_queue.h"
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

// The summary.json the job's rank 0 wrote, read once the job has ended.
Result<nlohmann::json> ReadJobSummary(const std::string& out_dir) {
  std::ifstream in(RunDir(out_dir).summary());
  nlohmann::json summary = nlohmann::json::parse(in, nullptr, false);
  if (summary.is_discarded() || !summary.is_object()) {
    return Internal(RunDir(out_dir).summary() + " is missing or unreadable after the job finished");
  }
  return summary;
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

// The configured secret, else $TENAX_SECRET, else a random one.
std::string RunSecret(const std::string& configured) {
  std::string secret = configured;
  if (secret.empty() && std::getenv(net::kSecretEnvVar)) secret = std::getenv(net::kSecretEnvVar);
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
      const std::string kind = e.value("event", "");
      if (kind == "straggler_detected" || kind == "straggler_recovered") {
        notice(fmt::format("step {}: worker {} {} ({:.1f}x the median worker's time)", e.value("step", int64_t{0}),
                           e.value("worker", -1), kind == "straggler_detected" ? "is a straggler" : "recovered",
                           e.value("ratio", 0.0)));
      } else if (kind == "shuffle") {
        notice(fmt::format("step {}: partitions re-mapped away from slow workers ({} partition copies moved)",
                           e.value("step", int64_t{0}), e.value("partitions_moved", int64_t{0})));
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

// Bytes the job moved, by purpose (summary.json "bytes_moved"; the
// report's chart). Gradients: a ring allreduce moves 2 (W-1)/W of the
// gradient per member and step, for each generation's steps at its size;
// models: each state copy to a joiner (parameters and momentum); recovery:
// what the store recoveries of any worker read and wrote; shuffling: a coded job's
// partition re-mappings (from the decoder's summary).
nlohmann::json BytesMoved(const nlohmann::json& summary, const RunMonitor& monitor) {
  const double gradient = 4.0 * static_cast<double>(summary.value("parameters", int64_t{0}));
  const int64_t steps = summary.value("steps", int64_t{0});
  double gradients = 0, models = 0;
  const auto generations = summary.value("generations", nlohmann::json::array());
  if (generations.empty()) {
    const double w = static_cast<double>(summary.value("workers", int64_t{1}));
    gradients = static_cast<double>(steps) * 2 * (w - 1) * gradient;
  }
  for (size_t i = 0; i < generations.size(); ++i) {
    const auto& g = generations[i];
    const int64_t first = g.value("first_step", int64_t{0});
    const int64_t last = i + 1 < generations.size() ? generations[i + 1].value("first_step", steps) : steps;
    const double w = static_cast<double>(g.value("members", nlohmann::json::array()).size());
    gradients += static_cast<double>(std::max<int64_t>(0, last - first)) * 2 * std::max(0.0, w - 1) * gradient;
    if (g.contains("join_transfer_ms")) models += 2 * gradient;  // parameters + SGD momentum, one joiner
  }
  // Every worker's recoveries (the summary has rank 0's only).
  const double recovery = monitor.RecoveryBytes();
  const double shuffling = summary.value("coded", nlohmann::json::object()).value("bytes_shuffled", 0.0);
  return {{"gradients", gradients}, {"models", models}, {"recovery", recovery}, {"shuffling", shuffling}};
}

// An async job's work queue in the coordinator's state file (out_dir/coordinator.db).
Result<std::unique_ptr<coord::WorkQueue>> OpenAsyncQueue(const TrainConfig& config, const std::string& out_dir) {
  coord::WorkQueueOptions qo;
  TENAX_ASSIGN_OR_RETURN(qo.total_steps, AsyncTotalSteps(config));
  qo.unit_steps = config.async.unit_steps;
  qo.shards = static_cast<int>(config.async.servers);
  return coord::WorkQueue::Open(RunDir(out_dir).coordinator_db(), qo);
}

// "test accuracy 0.8865 against 0.8925 without faults (-0.60 points)".
std::string AccuracyAgainstReference(const nlohmann::json& summary) {
  const double run = summary.value("final_test_accuracy", 0.0), ref = summary.value("reference_test_accuracy", 0.0);
  return fmt::format("test accuracy {:.4f} against {:.4f} without faults ({:+.2f} points)", run, ref,
                     100 * (run - ref));
}

}  // namespace

Result<LaunchOutcome> LaunchLocalJob(const LaunchOptions& options) {
  const auto wall_start = SteadyClock::now();
  auto notice = [&](const std::string& text) {
    if (options.on_notice) options.on_notice(text);
  };
  TENAX_ASSIGN_OR_RETURN(SyncJob job, LoadSyncJob(options.job_path, options.overrides));
  if (options.without_faults) {
    job.config.faults = FaultPlan{};  // the children's stragglers are the caller's --set
  }
  const coord::ClusterConfig& k = job.config.cluster;
  // Async jobs: workers come and go as in an elastic job.
  const bool async = job.config.mode == "async";
  const bool elastic = k.elastic || async;
  std::optional<PriceTable> prices;
  if (!job.config.cost.prices.empty()) {
    TENAX_ASSIGN_OR_RETURN(PriceTable t, LoadPriceTable(job.config.cost.prices));
    TENAX_RETURN_IF_ERROR(CheckPriceTableCovers(
        t, async ? std::vector<std::string>{"coordinator", "server", "worker"} : std::vector<std::string>{"coordinator", "worker"}));
    prices = std::move(t);
  }
  InitLogging("run", job.config.log_level);
  InstallStopHandlers();
  const std::string self_binary = options.tenax_binary.empty() ? SelfPath() : options.tenax_binary;
  // The fault-free reference runs first, as a `tenax run` of its own (with
  // its own emulated hosts, if any), unless this is the launcher re-run
  // inside a topology (its parent ran it).
  std::optional<nlohmann::json> reference;
  if (job.config.report.reference && std::getenv(kTopologyPrefixEnvVar) == nullptr) {
    ReferenceRunOptions ro;
    ro.self = self_binary;
    ro.job_path = options.job_path;
    ro.overrides = options.overrides;
    ro.out_dir = options.out_dir;
    ro.notice = notice;
    TENAX_ASSIGN_OR_RETURN(nlohmann::json r, EnsureReferenceRun(job.config, ro));
    reference = std::move(r);
  }
  TENAX_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(k.coordinator));
  const std::string& out = options.out_dir;
  const RunDir run(out);
  const std::string logs = run.logs();
  TENAX_RETURN_IF_ERROR(PrepareRunDirectory(out, logs));
  const std::string secret = RunSecret(k.secret);
  ::setenv(net::kSecretEnvVar, secret.c_str(), 1);  // the children's secret
  const std::string metrics = run.metrics();
  ::setenv(kRunMetricsEnvVar, metrics.c_str(), 1);  // rank 0 appends; workers add their events
  const double started_at =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // The workers [stragglers] slows from the start (markov's slow_workers).
  std::vector<std::string> injected_stragglers;
  if (job.config.mode == "sync" && job.config.stragglers.model == "markov") {
    for (int w : job.config.stragglers.slow_workers) injected_stragglers.push_back("worker " + std::to_string(w));
  }
  RunMonitor monitor(metrics, {options.on_notice, options.on_workers}, injected_stragglers);

  // Start order: the coordinator, its port, then the workers pointed at it.
  std::vector<std::string> sets;
  for (const auto& o : options.overrides) sets.insert(sets.end(), {"--set", o});
  // The price table as this launcher found it (perhaps beside the job file):
  // the workers get the job's text from the coordinator, without its path.
  if (!job.config.cost.prices.empty()) {
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(job.config.cost.prices, ec);
    if (!ec) sets.insert(sets.end(), {"--set", "cost.prices=" + nlohmann::json(absolute.string()).dump()});
  }
  // An emulated topology (docs/placement.md): the hosts exist before any
  // child, and this thread moves into their control namespace, where the
  // coordinator listens.
  std::unique_ptr<JobTopology> topology;
  if (job.config.topology.enabled()) {
    std::unique_ptr<sched::EmulatedNetwork> network;
    if (std::getenv(kTopologyPrefixEnvVar) == nullptr) {
      TENAX_ASSIGN_OR_RETURN(network, MakeEmulatedNetwork(job.config, notice));
      if (network->namespaces()) {
        auto outcome = RunInsideTopology(*network, options, self_binary, sets, k.workers);
        if (outcome.ok()) outcome->write_report = job.config.report.html;
        if (outcome.ok() && reference) {
          // The inner launcher wrote the summary; the reference is ours.
          outcome->summary["reference_test_accuracy"] = reference->value("final_test_accuracy", 0.0);
          outcome->summary["reference_dir"] = "reference";
          TENAX_RETURN_IF_ERROR(WriteFileAtomic(run.summary(), outcome->summary.dump(2) + "\n"));
          notice(AccuracyAgainstReference(outcome->summary));
        }
        return outcome;
      }
    }
    TENAX_ASSIGN_OR_RETURN(topology, JobTopology::Create(job.config, out, std::move(network)));
    hp.host = topology->ControlHost();
    sets.insert(sets.end(), {"--set", "cluster.coordinator=" + hp.host + ":" + std::to_string(hp.port)});
    for (const auto& s : topology->ChildSets()) sets.push_back(s);
  }
  const std::string& self = self_binary;
  ProcessSupervisor children("job " + k.job_id, 5s);
  const Deadline join_deadline = Deadline::After(k.join_timeout());
  // The job's own store ([storage]): its nodes and data before anyone reads it.
  std::optional<RunStorage> storage;
  if (job.config.storage.nodes > 0) {
    monitor.Notice("store: starting " + std::to_string(job.config.storage.nodes) + " data nodes and putting " +
                   job.config.storage.source_dir + " into them (RS " + std::to_string(job.config.storage.data_chunks) +
                   "+" + std::to_string(job.config.storage.parity_chunks) + ")");
    auto started = RunStorage::Start(job.config, self, hp.host, out, children, join_deadline);
    if (!started.ok()) {
      children.Stop();
      return Status(started.status().code(), "the job's store: " + started.status().message());
    }
    storage = std::move(*started);
    sets.insert(sets.end(), {"--set", storage->CatalogSet()});
    monitor.Notice(fmt::format("store: {:.1f} MiB of chunks on {} nodes in {:.1f} s (catalog {})",
                               static_cast<double>(storage->stored_bytes()) / (1 << 20), job.config.storage.nodes,
                               storage->put_seconds(), storage->catalog()));
  }
  std::vector<std::string> coord_argv = {self,      "coordinator",           "--job",       options.job_path,
                                         "--state", run.coordinator_db(), "--port-file", run.coordinator_port()};
  coord_argv.insert(coord_argv.end(), sets.begin(), sets.end());
  if (!k.metrics_listen.empty()) {
    coord_argv.insert(coord_argv.end(), {"--metrics-listen", k.metrics_listen, "--metrics-port-file",
                                         run.coordinator_metrics_port()});
  }
  TENAX_RETURN_IF_ERROR(children.StartLogged("coordinator", coord_argv, run.log("coordinator")).status());
  TENAX_ASSIGN_OR_RETURN(uint16_t port, WaitForPortFile(run.coordinator_port(), children, join_deadline));
  const std::string coordinator = hp.host + ":" + std::to_string(port);
  if (topology) {
    TENAX_RETURN_IF_ERROR(topology->ProbeAndPlace(
        self, hp.host, port, secret, logs,
        static_cast<int>(k.workers) + (job.config.mode == "coded" ? 1 : 0),
        async ? static_cast<int>(job.config.async.servers) : 0));
    std::string placed;
    for (int r = 0; r < k.workers; ++r) placed += (r ? ", " : "") + ("worker " + std::to_string(r)) + " on " + topology->HostOfSlot(r);
    monitor.Notice("placement (" + job.config.placement.policy + "): " + placed);
  }
  // Process `slot` of the placement runs on its emulated host (as is, without a topology).
  auto on_slot = [&](int slot, std::vector<std::string> argv) {
    return topology ? topology->OnSlot(slot, argv) : argv;
  };
  const int first_server_slot = static_cast<int>(k.workers) + (job.config.mode == "coded" ? 1 : 0);
  // role of every child by supervisor index, for the cost ("" = not priced:
  // the store's nodes and puts)
  std::vector<std::string> roles(children.size() - 1, "");
  roles.push_back("coordinator");
  std::vector<size_t> servers;
  // Shard s on its checkpoint directory: a restarted shard continues from
  // its newest intact checkpoint there (docs/async.md).
  std::map<int64_t, int> server_restarts;  // shard -> times the fault plan restarted it
  auto start_server = [&](int64_t s) -> Result<size_t> {
    const std::string id = std::to_string(s);
    std::vector<std::string> argv = {self,          "server",      "--job",         options.job_path, "--shard", id,
                                     "--checkpoints", run.server_checkpoints(id), "--coordinator", coordinator};
    argv.insert(argv.end(), sets.begin(), sets.end());
    const int restart = server_restarts[s];
    const std::string log = run.log("server-" + id + (restart > 0 ? "-" + std::to_string(restart) : ""));
    TENAX_ASSIGN_OR_RETURN(size_t index,
                           children.StartLogged("server " + id, on_slot(first_server_slot + static_cast<int>(s), argv), log));
    roles.push_back("server");
    return index;
  };
  for (int64_t s = 0; async && s < job.config.async.servers; ++s) {
    TENAX_ASSIGN_OR_RETURN(size_t index, start_server(s));
    servers.push_back(index);
  }
  std::vector<size_t> workers;
  for (int r = 0; r < k.workers; ++r) {
    std::vector<std::string> argv = {self, "worker", "--job", options.job_path, "--coordinator", coordinator};
    // Async workers take whatever id the coordinator gives (they come and go).
    if (!async) argv.insert(argv.end(), {"--rank", std::to_string(r)});
    argv.insert(argv.end(), {"--out", out});
    argv.insert(argv.end(), sets.begin(), sets.end());
    const std::string name = "worker " + std::to_string(r);
    TENAX_ASSIGN_OR_RETURN(size_t index,
                           children.StartLogged(name, on_slot(r, argv), run.log("worker-" + std::to_string(r))));
    monitor.AddWorker(name, children.pid(index), topology ? topology->HostOfSlot(r) : "");
    // In an elastic job a worker that dies is the coordinator's to judge
    // (the others go on): its exit is not the launcher's failure.
    if (elastic) children.ExpectExit(index);
    workers.push_back(index);
    roles.push_back("worker");
  }
  std::optional<size_t> decoder_index;
  if (job.config.mode == "coded") {
    // The decoder: the last rank, a `tenax worker` too (docs/coded.md).
    const std::string rank = std::to_string(k.workers);
    std::vector<std::string> argv = {self, "worker", "--job", options.job_path, "--coordinator", coordinator,
                                     "--rank", rank, "--out", out};
    argv.insert(argv.end(), sets.begin(), sets.end());
    TENAX_ASSIGN_OR_RETURN(size_t index, children.StartLogged("decoder (rank " + rank + ")",
                                                              on_slot(static_cast<int>(k.workers), argv),
                                                              run.log("decoder")));
    decoder_index = index;
    roles.push_back("worker");
  }

  // The fault plan's clock starts with the workers. A joiner has no rank:
  // it joins the running elastic job and the coordinator gives it an id.
  FaultInjectorOptions fo;
  fo.plan = job.config.faults;
  fo.workers = workers;
  fo.expect_exits = elastic;
  fo.on_notice = [&](const std::string& text) { monitor.Notice(text); };
  fo.start_joiner = [&](int64_t n) {
    std::vector<std::string> argv = {self,        "worker", "--job", options.job_path, "--coordinator",
                                     coordinator, "--out",  out};
    argv.insert(argv.end(), sets.begin(), sets.end());
    const std::string id = std::to_string(n);
    std::string host;
    auto index = children.StartLogged("joiner " + id, topology ? topology->OnNewHost(argv, &host) : argv,
                                      run.log("joiner-" + id));
    if (index.ok()) {
      children.ExpectExit(*index);
      roles.push_back("worker");
      monitor.AddWorker("joiner " + id, children.pid(*index), host);
      if (topology) monitor.Notice("placement changed: joiner " + id + " placed on " + host + " (best link score among hosts with a free slot)");
    }
    return index;
  };
  fo.servers = servers;
  if (storage) {
    fo.storage = storage->processes();
    fo.wipe_storage = [&](int64_t node) -> Status {
      std::error_code ec;
      std::filesystem::remove_all(storage->NodeDir(node), ec);
      if (ec) return IoError(storage->NodeDir(node) + ": " + ec.message());
      return Status::Ok();
    };
  }
  fo.on_record = [&](const nlohmann::json& r) { monitor.OnFaultRecord(r); };
  fo.restart_server = [&](int64_t s) -> Result<size_t> {
    ++server_restarts[s];
    TENAX_ASSIGN_OR_RETURN(size_t index, start_server(s));
    children.ExpectExit(index);  // it may be the plan's target again
    return index;
  };
  FaultInjector faults(children, std::move(fo));
  faults.Start();
  int64_t max_step = 0;  // the highest step any rank reported
  int64_t async_logged = 0;  // async: the last multiple of log.every_steps shown as a log line
  // The plan's records go to metrics.jsonl as they are made (RunMonitor).
  // An async job's queue, read from the coordinator's state file once a
  // second: leases that expired and units re-issued are event lines.
  std::unique_ptr<coord::WorkQueue> queue_view;
  auto last_queue_poll = SteadyClock::now();
  auto poll_queue = [&](bool now = false) {
    if (!now && SteadyClock::now() - last_queue_poll < 1s) return;
    last_queue_poll = SteadyClock::now();
    if (!queue_view) {
      auto opened = OpenAsyncQueue(job.config, out);
      if (!opened.ok()) return;  // not created yet: the next poll tries again
      queue_view = std::move(*opened);
    }
    if (auto counts = queue_view->Counts(); counts.ok()) monitor.OnQueueCounts(*counts);
  };
  // Exits the monitor was told about, by supervisor index, and the first
  // worker that failed on its own (no fault aimed at it): if the job then
  // fails, that is most likely why, so its log's end goes into the error.
  std::vector<bool> exit_seen;
  std::optional<ChildFailure> first_own_failure;
  auto watch_exits = [&] {
    exit_seen.resize(children.size(), false);
    for (size_t i = 0; i < children.size(); ++i) {
      if (exit_seen[i]) continue;
      if (auto code = children.exit_code(i)) {
        exit_seen[i] = true;
        std::optional<ChildFailure> report = children.ExitReport(i);
        const std::string why = report && !report->last_lines.empty() ? report->last_lines.back() : "";
        if (monitor.OnExit(children.pid(i), *code, why) && report && !first_own_failure) first_own_failure = report;
      }
    }
  };
  auto own_failure = [&]() -> std::string {
    watch_exits();
    return first_own_failure ? "; the first worker that failed on its own: " + first_own_failure->Describe() : "";
  };
  // Until the job's first generation or step, every worker (and a coded
  // job's decoder) must join for the job to start at all: one that failed on
  // its own by then means the job cannot start, and waiting out the
  // coordinator's join timeout would only hide why. (An async job's workers
  // come and go; a worker a fault was aimed at is the plan's business.)
  bool job_started = false;
  auto failure_before_start = [&]() -> std::optional<ChildFailure> {
    if (job_started || async) return std::nullopt;
    if (first_own_failure) return first_own_failure;
    if (decoder_index) {
      if (auto code = children.exit_code(*decoder_index); code && *code != 0) return children.ExitReport(*decoder_index);
    }
    return std::nullopt;
  };
  spdlog::debug("started the coordinator (pid {}) and {} workers", children.pid(0), k.workers);
  monitor.Notice("job " + k.job_id + ": coordinator on " + coordinator + ", " + std::to_string(k.workers) +
                 (job.config.mode == "coded" ? " workers and a decoder" : " workers") + "; logs in " + logs);
  if (!k.metrics_listen.empty()) {
    std::ifstream port_file(run.coordinator_metrics_port());
    int metrics_port = 0;
    if (port_file >> metrics_port && metrics_port > 0) {
      monitor.Notice("Prometheus metrics: http://" + hp.host + ":" + std::to_string(metrics_port) + "/metrics");
    }
  }

  // Follow the job.
  coord::JobWatcherOptions wo;
  wo.host = hp.host;
  wo.port = port;
  wo.job_id = k.job_id;
  wo.world = static_cast<int>(RankCount(job.config));
  wo.secret = secret;
  wo.peer_timeout = k.peer_timeout();
  wo.name = "launcher";
  // Step triggers follow the fastest rank; so does an async job's progress
  // (its workers train units side by side, and a lost one never reports again).
  // A coded job's front is its decoder's step (a stopped worker lags behind).
  const bool coded = job.config.mode == "coded";
  wo.report_max_step = !job.config.faults.empty() || async || coded;
  DecoderEventTail decoder_events(run.decoder_events());
  TENAX_ASSIGN_OR_RETURN(auto watcher, coord::JobWatcher::Connect(wo, join_deadline));
  while (true) {
    if (StopRequested()) {
      notice("stopping the coordinator and " + std::to_string(k.workers) + " workers");
      faults.Finish(max_step);  // SIGKILLs the children it stopped: SIGTERM would wait for them
      children.Stop();
      return StopStatus();
    }
    children.Poll();  // notes exits as they happen, so the first failure is the first one
    faults.Poll(max_step);
    watch_exits();
    if (std::optional<ChildFailure> early = failure_before_start()) {
      faults.Finish(max_step);
      children.Stop();
      return PeerLost("job " + k.job_id + " cannot start, a worker failed before every worker had joined: " +
                      early->Describe());
    }
    monitor.Poll();
    if (async) poll_queue();
    Deadline wait = Deadline::After(50ms);
    if (auto due = faults.NextDue()) wait = wait.Earlier(Deadline::At(*due));
    auto event = watcher->Next(wait);
    if (!event.ok()) {
      std::optional<ChildFailure> why = children.FirstFailure();
      faults.Finish(max_step);
      children.Stop();
      return PeerLost("lost the coordinator: " + event.status().message() +
                      (why ? "; " + why->Describe() : own_failure()));
    }
    if (coded) decoder_events.Poll([&](const std::string& text) { monitor.Notice(text); });
    if (!event->has_value()) continue;
    job_started = true;  // the coordinator formed the job: it judges failures from now on
    if (auto* p = std::get_if<coord::JobProgress>(&**event)) {
      max_step = std::max(max_step, p->max_step);
      monitor.OnProgress();
      faults.Poll(max_step);
      if (options.on_progress && !async && !coded && !p->max_step_only) {
        options.on_progress(ToTrainProgress(*p, job.config.log_every_steps));
      } else if (options.on_progress && (async || coded) && p->total_steps > 0) {
        // Async: the front of the job, the furthest step any worker reached
        // (units are issued in step order); coded: the decoder's step. A log
        // line whenever it crosses a multiple of log.every_steps.
        coord::JobProgress front = *p;
        front.step = max_step;
        if (front.steps_per_epoch > 0) front.epoch = (max_step - 1) / front.steps_per_epoch + 1;
        TrainProgress tp = ToTrainProgress(front, job.config.log_every_steps);
        const int64_t bucket = max_step / std::max<int64_t>(1, job.config.log_every_steps);
        tp.log_point = bucket > async_logged || max_step == p->total_steps;
        async_logged = std::max(async_logged, bucket);
        options.on_progress(tp);
      }
    } else if (auto* g = std::get_if<coord::JobGeneration>(&**event)) {
      std::string ids;
      for (int m : g->members) ids += (ids.empty() ? "" : ", ") + std::to_string(m);
      monitor.Notice("generation " + std::to_string(g->generation) + ": " + std::to_string(g->members.size()) +
                     " workers (ranks " + ids + "): " + g->why);
      monitor.OnGeneration(*g);
    } else if (auto* f = std::get_if<coord::JobFailed>(&**event)) {
      const std::string own = own_failure();
      faults.Finish(max_step);
      children.Stop();
      return PeerLost("job " + k.job_id + " failed: " + f->Describe() + " (logs in " + logs + ")" + own);
    } else {
      break;  // JobDone
    }
  }
  watcher.reset();

  // Every child ends on its own once the job is done, except those the
  // fault plan stopped: Finish SIGKILLs them.
  faults.Finish(max_step);
  if (async) poll_queue(true);  // the last re-issues, before the counts go into the summary
  monitor.Finish();
  // The store's nodes serve until the job is done; then they stop like the rest.
  if (storage) {
    for (size_t index : storage->processes()) (void)children.Signal(index, SIGTERM);
  }
  // Elastic: every member reported done before JobDone, so members exit at
  // once; whoever still runs after a short grace was never needed.
  // Every member reported done before JobDone (and async servers write their
  // last checkpoint on the coordinator's Done, well within the grace).
  Status waited = children.WaitAll(Deadline::After(elastic ? 3s : 30s), StopStatus);
  if (!waited.ok() && elastic && waited.code() == StatusCode::kDeadlineExceeded) {
    // A joiner started near the end may still be loading its data or
    // knocking at a coordinator that is gone: the job no longer needs it.
    notice("the job is done; stopping workers that had not joined it (" + waited.message() + ")");
    children.Stop();
    waited = Status::Ok();
  }
  if (!waited.ok()) {
    return Status(waited.code(), "after the job finished: " + waited.message() + " (logs in " + logs + ")");
  }
  LaunchOutcome outcome;
  outcome.workers = k.workers;
  TENAX_ASSIGN_OR_RETURN(outcome.summary, ReadJobSummary(out));
  outcome.summary["launcher_wall_seconds"] = std::chrono::duration<double>(SteadyClock::now() - wall_start).count();
  outcome.summary["started_at"] = started_at;
  outcome.write_report = job.config.report.html && std::getenv(kTopologyPrefixEnvVar) == nullptr;
  {
    // Every injected fault (and unplanned failure) with the system's reaction and time to recover.
    nlohmann::json executed = faults.Executed();
    nlohmann::json reactions = monitor.FaultsWithReactions();
    nlohmann::json listed = nlohmann::json::array();
    for (size_t i = 0; i < reactions.size(); ++i) {
      // The injector's records first (stragglers and unplanned failures have none).
      nlohmann::json f = i < executed.size() ? executed[i] : reactions[i];
      for (const char* key : {"fault", "target", "reaction", "recovered", "recovered_seconds"}) f[key] = reactions[i][key];
      if (!f.contains("action")) f["action"] = reactions[i]["action"];
      if (!f.contains("step")) f["step"] = reactions[i]["step"];
      listed.push_back(std::move(f));
    }
    if (!listed.empty() || !job.config.faults.empty()) outcome.summary["faults"] = listed;
  }
  outcome.summary["bytes_moved"] = BytesMoved(outcome.summary, monitor);
  if (reference) {
    outcome.summary["reference_test_accuracy"] = reference->value("final_test_accuracy", 0.0);
    outcome.summary["reference_dir"] = "reference";
    notice(AccuracyAgainstReference(outcome.summary));
  }
  if (topology) outcome.summary["placement"] = topology->Summary();
  if (async) {
    int64_t preemptions = 0;
    for (const auto& f : faults.Executed()) {
      const std::string action = f.value("action", "");
      if (action == "kill" || action == "preempt") ++preemptions;
    }
    outcome.summary["preemptions"] = preemptions;
    // The queue's counts, from the coordinator's state file.
    TENAX_ASSIGN_OR_RETURN(auto queue, OpenAsyncQueue(job.config, out));
    TENAX_ASSIGN_OR_RETURN(coord::WorkQueueCounts counts, queue->Counts());
    outcome.summary["units"] = counts.units;
    outcome.summary["units_issued"] = counts.units_issued;
    outcome.summary["units_reissued"] = counts.units_reissued;
    outcome.summary["results_rejected"] = counts.results_rejected;
    outcome.summary["leases_expired"] = counts.leases_expired;
    outcome.summary["partial_results"] = counts.partial_results;
  }
  if (prices) {
    std::map<std::string, double> seconds;
    if (storage && prices->role_market.count("storage")) {
      for (size_t index : storage->processes()) roles[index] = "storage";
    }
    for (size_t i = 0; i < children.size() && i < roles.size(); ++i) {
      if (!roles[i].empty()) seconds[roles[i]] += children.RunSeconds(i);
    }
    TENAX_ASSIGN_OR_RETURN(CostReport cost, ComputeCost(*prices, seconds));
    outcome.summary["cost"] = CostToJson(*prices, cost);
  }
  // The reactions, as the final rank 0 measured them.
  for (const auto& g : outcome.summary.value("generations", nlohmann::json::array())) {
    if (g.value("number", 0) <= 1 && !g.contains("join_transfer_ms")) continue;
    std::string line = "generation " + std::to_string(g.value("number", 0)) + " from step " +
                       std::to_string(g.value("first_step", 0));
    for (const char* key : {"detect_ms", "reform_ms", "join_transfer_ms"}) {
      if (g.contains(key)) line += fmt::format(", {} {:.0f}", key, g[key].get<double>());
    }
    notice(line + ": " + g.value("why", ""));
  }
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(run.summary(), outcome.summary.dump(2) + "\n"));
  return outcome;
}

}  // namespace tenax

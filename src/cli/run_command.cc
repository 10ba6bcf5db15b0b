// tenax run JOB.toml --out DIR: the local launcher. Starts a coordinator
// and cluster.workers workers as child processes on this machine, follows
// the job through the coordinator (one aggregated progress bar), and stops
// every child on failure, Ctrl-C or SIGTERM. One log file per process in
// DIR/logs/; rank 0 writes DIR/{metrics.jsonl, summary.json, model.pt}.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "command.h"
#include "job_file.h"
#include "progress_bar.h"
#include "tenax/coord/coord_codec.h"
#include "tenax/core/files.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/core/subprocess.h"
#include "tenax/net/auth.h"
#include "tenax/net/node.h"

namespace tenax::cli {
namespace {

using namespace std::chrono_literals;

struct RunArgs {
  std::string job_path;
  std::string out_dir;
  std::vector<std::string> overrides;
};

std::string SelfPath() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "tenax" : p.string();
}

std::string LastLines(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) out += "\n    " + lines[i];
  return out;
}

// The children of one run; the destructor stops whoever is still running.
class Cluster {
 public:
  ~Cluster() { Stop(); }
  Status Start(const std::string& name, const std::vector<std::string>& argv, const std::string& log) {
    TENAX_ASSIGN_OR_RETURN(auto child, ChildProcess::StartLogged(argv, log));
    spdlog::debug("started {} (pid {}), log {}", name, child->pid(), log);
    procs_.push_back({name, log, std::move(child), std::nullopt});
    return Status::Ok();
  }
  // The first child that exited with a non-zero code, if any.
  std::optional<std::string> FirstFailure() {
    for (auto& p : procs_) {
      if (!p.exit) p.exit = p.child->TryWait();
      if (p.exit && *p.exit != 0) {
        return p.name + " exited with code " + std::to_string(*p.exit) + "; its log (" + p.log + ") ends:" +
               LastLines(p.log, 5);
      }
    }
    return std::nullopt;
  }
  bool AllExited() {
    for (auto& p : procs_) {
      if (!p.exit) p.exit = p.child->TryWait();
      if (!p.exit) return false;
    }
    return true;
  }
  // SIGTERM, then SIGKILL after a grace period; reaps everyone.
  void Stop() {
    for (auto& p : procs_) {
      if (!p.exit) p.child->Signal(SIGTERM);
    }
    const auto give_up = SteadyClock::now() + 5s;
    while (!AllExited() && SteadyClock::now() < give_up) std::this_thread::sleep_for(20ms);  // polling exits
    for (auto& p : procs_) {
      if (!p.exit) {
        p.child->Signal(SIGKILL);
        p.exit = p.child->Wait();
      }
    }
  }
  bool WaitAll(std::chrono::milliseconds limit) {
    const auto give_up = SteadyClock::now() + limit;
    while (!AllExited()) {
      if (SteadyClock::now() > give_up) return false;
      std::this_thread::sleep_for(20ms);  // polling exits
    }
    return true;
  }

 private:
  struct Proc {
    std::string name, log;
    std::unique_ptr<ChildProcess> child;
    std::optional<int> exit;
  };
  std::vector<Proc> procs_;
};

Result<uint16_t> WaitForPortFile(const std::string& path, Cluster& cluster, Deadline deadline) {
  while (true) {
    std::ifstream in(path);
    int port = 0;
    if (in >> port && port > 0 && port < 65536) return static_cast<uint16_t>(port);
    if (auto failed = cluster.FirstFailure()) return Unavailable("the coordinator did not start: " + *failed);
    if (deadline.Expired()) return DeadlineExceeded("the coordinator did not start listening in time");
    std::this_thread::sleep_for(20ms);  // polling a file another process writes
  }
}

Status RunJob(const RunArgs& a) {
  const auto wall_start = SteadyClock::now();
  TENAX_ASSIGN_OR_RETURN(Job job, LoadSyncJob(a.job_path, a.overrides));
  const ClusterConfig& k = job.config.cluster;
  InitLogging("run", job.config.log_level);
  InstallStopHandlers();
  TENAX_ASSIGN_OR_RETURN(auto hp, ParseHostPort(k.coordinator));
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(a.out_dir));
  const std::string logs = a.out_dir + "/logs";
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(logs));
  std::error_code ec;
  std::filesystem::remove(a.out_dir + "/summary.json", ec);
  std::filesystem::remove(a.out_dir + "/coordinator.port", ec);
  std::filesystem::remove(a.out_dir + "/coordinator.db", ec);
  std::filesystem::remove(a.out_dir + "/coordinator.db-wal", ec);
  std::filesystem::remove(a.out_dir + "/coordinator.db-shm", ec);
  for (const auto& entry : std::filesystem::directory_iterator(logs, ec)) std::filesystem::remove(entry.path(), ec);

  // A cluster secret for this run unless the user set one; children inherit it.
  std::string secret = k.secret;
  if (secret.empty() && std::getenv(net::kSecretEnvVar)) secret = std::getenv(net::kSecretEnvVar);
  if (secret.empty()) {
    for (unsigned char c : net::RandomNonce()) secret += "0123456789abcdef"[c % 16];
  }
  ::setenv(net::kSecretEnvVar, secret.c_str(), 1);

  std::vector<std::string> sets;
  for (const auto& o : a.overrides) sets.insert(sets.end(), {"--set", o});
  const std::string self = SelfPath();
  Cluster cluster;
  std::vector<std::string> coord_argv = {self, "coordinator", "--job", a.job_path, "--state", a.out_dir + "/coordinator.db",
                                         "--port-file", a.out_dir + "/coordinator.port"};
  coord_argv.insert(coord_argv.end(), sets.begin(), sets.end());
  TENAX_RETURN_IF_ERROR(cluster.Start("coordinator", coord_argv, logs + "/coordinator.log"));
  const Deadline join_deadline = Deadline::After(Millis(k.join_timeout_seconds));
  TENAX_ASSIGN_OR_RETURN(uint16_t port, WaitForPortFile(a.out_dir + "/coordinator.port", cluster, join_deadline));
  const std::string coordinator = hp.first + ":" + std::to_string(port);
  for (int r = 0; r < k.workers; ++r) {
    std::vector<std::string> argv = {self, "worker", "--job", a.job_path, "--coordinator", coordinator,
                                     "--rank", std::to_string(r), "--out", a.out_dir};
    argv.insert(argv.end(), sets.begin(), sets.end());
    TENAX_RETURN_IF_ERROR(cluster.Start("worker " + std::to_string(r), argv, logs + "/worker-" + std::to_string(r) + ".log"));
  }
  std::fprintf(stderr, "tenax run: job %s: coordinator on %s, %lld workers; logs in %s\n", k.job_id.c_str(),
               coordinator.c_str(), static_cast<long long>(k.workers), logs.c_str());

  // Follow the job as a watcher of the coordinator.
  net::NodeOptions no;
  no.name = "launcher";
  no.secret = secret;
  no.peer_timeout = Millis(k.peer_timeout_seconds);
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(net::PeerId coord, node->Connect(hp.first, port, join_deadline));
  wire::Watch watch;
  watch.set_job_id(k.job_id);
  TENAX_RETURN_IF_ERROR(node->SendControl(coord, coord::kWatchKind, watch.SerializeAsString(), join_deadline));

  ProgressRenderer renderer(StderrIsInteractive());
  std::map<uint32_t, wire::Progress> latest;
  int64_t rendered_step = -1;
  while (true) {
    if (StopRequested()) {
      renderer.Finish();
      std::fprintf(stderr, "tenax run: stopping the coordinator and %lld workers\n", static_cast<long long>(k.workers));
      cluster.Stop();
      return Cancelled("stopped by signal " + std::to_string(StopSignal()));
    }
    // Node waits poll: check without blocking and pace the idle loop, so
    // the launcher leaves the cores to the workers.
    node->Progress();
    auto msg = node->ReceiveControl(Deadline::At(SteadyClock::now()), coord);
    if (!msg.ok() && msg.status().code() == StatusCode::kDeadlineExceeded) std::this_thread::sleep_for(5ms);
    if (msg.ok() && msg->kind == coord::kProgressKind) {
      auto p = coord::DecodeProgress(msg->payload, "coordinator");
      if (!p.ok()) continue;
      latest[p->rank()] = *p;
      // The job is as far as its slowest rank.
      const wire::Progress* slow = nullptr;
      for (auto& [r, q] : latest) {
        if (!slow || q.step() < slow->step()) slow = &q;
      }
      if (static_cast<int64_t>(latest.size()) < k.workers || slow->step() == rendered_step) continue;
      rendered_step = slow->step();
      TrainProgress tp;
      tp.epoch = slow->epoch();
      tp.epochs = slow->epochs();
      tp.global_step = slow->step();
      tp.total_steps = slow->total_steps();
      tp.steps_per_epoch = slow->epochs() > 0 ? (slow->total_steps() + slow->epochs() - 1) / slow->epochs() : 0;
      tp.step_in_epoch = tp.steps_per_epoch > 0 ? (slow->step() - 1) % tp.steps_per_epoch + 1 : 0;
      tp.loss = slow->loss();
      tp.samples_per_second = slow->samples_per_second();
      tp.elapsed_seconds = slow->elapsed_seconds();
      tp.eta_seconds = tp.global_step > 0 ? tp.elapsed_seconds / tp.global_step * (tp.total_steps - tp.global_step) : 0;
      tp.log_point = slow->test_accuracy() >= 0 || slow->step() % job.config.log_every_steps == 0;
      if (slow->test_accuracy() >= 0) tp.test_accuracy = slow->test_accuracy();
      renderer(tp);
    } else if (msg.ok() && msg->kind == coord::kFailureKind) {
      renderer.Finish();
      auto f = coord::DecodeFailure(msg->payload, "coordinator");
      cluster.Stop();
      std::string why = !f.ok() ? "unknown reason"
                        : f->host().empty() ? f->reason()
                                            : "rank " + std::to_string(f->rank()) + " on " + f->host() + " failed: " + f->reason();
      return PeerLost("job " + k.job_id + " failed: " + why + " (logs in " + logs + ")");
    } else if (msg.ok() && msg->kind == coord::kDoneKind) {
      renderer.Finish();
      break;
    } else if (!msg.ok() && msg.status().code() != StatusCode::kDeadlineExceeded) {
      renderer.Finish();
      std::string why = cluster.FirstFailure().value_or("");
      cluster.Stop();
      return PeerLost("lost the coordinator: " + msg.status().message() + (why.empty() ? "" : "; " + why));
    }
  }
  node.reset();
  if (!cluster.WaitAll(30s)) {
    cluster.Stop();
    return DeadlineExceeded("processes did not exit after the job finished (logs in " + logs + ")");
  }
  if (auto failed = cluster.FirstFailure()) return Internal(*failed);
  std::ifstream in(a.out_dir + "/summary.json");
  nlohmann::json summary = nlohmann::json::parse(in, nullptr, false);
  if (summary.is_discarded()) return Internal(a.out_dir + "/summary.json is missing or unreadable after the job finished");
  summary["launcher_wall_seconds"] =
      std::chrono::duration<double>(SteadyClock::now() - wall_start).count();
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(a.out_dir + "/summary.json", summary.dump(2) + "\n"));
  std::printf("final test accuracy %.4f with %lld workers, %.1f s, %.0f samples/s\n",
              summary.value("final_test_accuracy", 0.0), static_cast<long long>(k.workers),
              summary.value("launcher_wall_seconds", 0.0), summary.value("samples_per_second", 0.0));
  std::printf("outputs: %s/{summary.json,metrics.jsonl,model.pt,config.toml,logs/}\n", a.out_dir.c_str());
  return Status::Ok();
}

}  // namespace

void AddRunCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = root.add_subcommand("run", "Run a multi-process job on this machine (coordinator + workers)");
  cmd->add_option("job", a->job_path, "Job file (TOML, mode = \"sync\"), e.g. examples/quickstart.toml")
      ->required()
      ->type_name("JOB.toml");
  cmd->add_option("--out", a->out_dir, "Run directory (created if needed)")->required()->type_name("DIR");
  cmd->add_option("--set", a->overrides, "Override a job key, e.g. --set cluster.workers=4 (repeatable)")
      ->type_name("KEY=VALUE");
  cmd->footer(
      "Outputs in DIR: logs/{coordinator,worker-N}.log, metrics.jsonl, model.pt, config.toml,\n"
      "coordinator.db (the job's state) and summary.json (written last, only on success).\n"
      "Exit status: 0 done, 2 bad input, 3 a worker or the network failed, 130 stopped (every child is stopped).");
  cmd->callback([a, &exit_code] {
    Status st = RunJob(*a);
    exit_code = st.ok() ? 0 : ReportError("run", st);
  });
}

}  // namespace tenax::cli

// tenax bench elastic: what losing a worker costs a synchronous job, tenax
// against PyTorch's elastic launcher, in the same run (issue 9, "Numbers").
//
// Both train the cnn with 4 workers on the same data, per-worker batch, SGD
// and steps, once without faults and once with worker 1 SIGKILLed at one third
// of the steps:
//  - tenax: `tenax run` of an elastic job (`[cluster] elastic = true`,
//    min_workers 2, max_workers 4) whose fault plan kills worker 1 at step
//    total/3 and starts a new worker at 2*total/3. The survivors re-form and
//    keep training from the model in memory; the new worker is fed live state.
//    Wall time, accuracy and the generations (detect_ms, reform_ms,
//    join_transfer_ms) come from the run's summary.json.
//  - torchrun: `python3 -m torch.distributed.run --max_restarts 3` of
//    bench/torchrun_elastic_train.py, which checkpoints every K steps as
//    torchrun's docs advise; this benchmark SIGKILLs rank 1 when the script's
//    progress file reaches total/3, and torchrun restarts every worker from
//    the last checkpoint. Wall time is measured around the torchrun command.
// lost_seconds = wall with the fault - wall without it, per implementation:
// the median over rounds (3 full, 1 --quick, --rounds N) of each round's own
// difference. The rounds alternate their order (ABBA) so that a steady
// drift of the machine's speed cancels instead of counting as lost time.
// paced_lost_seconds (judged): the same difference of each run's excess over
// its own pace (bench/step_pace.h), from (step, time) marks every
// kPaceEvery steps on both sides (tenax's metrics.jsonl "train" records, the
// script's pace file): a run that ran slower all along is not a loss.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "bench_common.h"
#include "step_pace.h"
#include "tenax/core/files.h"
#include "tenax/core/signals.h"

namespace tenax::bench {
namespace {

using namespace std::chrono_literals;

struct ElasticArgs {
  bool quick = false;
  std::string json_path;
  int64_t steps = 0;  // 0 = kQuickSteps with --quick, else kFullSteps
  int64_t batch_size = 64;
  double lr = 0.02;
  int64_t checkpoint_every = 0;  // torchrun script; 0 = every 10% of the steps
  std::string data_dir = kDefaultFashionMnistDir;
  std::string python = "/usr/bin/python3";
  std::string script = BenchFile("torchrun_elastic_train.py");
  int64_t timeout_seconds = 900;  // per run
  int64_t spares = 0;             // tenax's cluster.spares, in both its runs
  // Hidden (tests): fewer workers, the torchrun side alone, no fault-free run.
  int64_t workers = 4;
  bool torchrun_only = false;
  bool faults_only = false;  // skip the fault-free runs
  bool keep_blas_core = false;
  int64_t rounds = 0;        // 0 = kQuickRounds with --quick, else kFullRounds
};

// 4 workers x 64 = a global batch of 256: 234 steps make one epoch of
// Fashion-MNIST. --quick: 4 runs of 480 steps (about 2 epochs) in under 4
// minutes on 2 cores; fewer leave a replacement started at 2/3 no time to
// load its data and join before the end.
constexpr int64_t kQuickSteps = 480;
constexpr int64_t kFullSteps = 1170;  // 5 epochs
// Rounds of the four runs: the full benchmark takes medians over three (run
// to run speed on a shared 2-core machine drifts by up to 25%, as much as
// tenax loses); --quick fits one in its 4 minutes.
constexpr int64_t kFullRounds = 3;
constexpr int64_t kQuickRounds = 1;
constexpr int kKilledWorker = 1;
constexpr int kTorchrunMaxRestarts = 3;
constexpr double kLostRatioTarget = 0.25;
constexpr double kLostRatioTargetWithSpares = 0.1;  // issue 33: a warm spare removes the replacement's start-up
constexpr double kSpareMemberMsTarget = 100;         // from the loss's detection to the spare holding the state
constexpr double kReformMsTarget = 500;
constexpr double kAccuracyGapTarget = 0.005;  // 0.5 point
// Steps between two (step, time) marks of the pace estimate, on both sides:
// tenax's log.every_steps and the script's --pace-every. 117 blocks in a
// full run, so one block slowed by the fault does not move the median.
constexpr int64_t kPaceEvery = 10;

Deadline RunDeadline(const ElasticArgs& a) { return Deadline::After(std::chrono::seconds(a.timeout_seconds)); }

int64_t KillStep(int64_t steps) { return steps / 3; }
int64_t RestartStep(int64_t steps) { return 2 * steps / 3; }
int64_t CheckpointEvery(const ElasticArgs& a, int64_t steps) {
  return a.checkpoint_every > 0 ? a.checkpoint_every : std::max<int64_t>(1, steps / 10);
}

// The integer in a small file another process replaces atomically; nullopt
// while it does not exist yet.
std::optional<int64_t> ReadNumberFile(const std::string& path) {
  std::ifstream in(path);
  int64_t v = 0;
  if (in >> v) return v;
  return std::nullopt;
}

// ------------------------------------------------------------------ tenax

std::string TenaxJobText(const ElasticArgs& a, int64_t steps, bool faulty) {
  std::string text = fmt::format(
      "mode = \"sync\"\n"
      "[cluster]\nworkers = {}\njob_id = \"bench-elastic\"\nelastic = true\nmin_workers = 2\nmax_workers = {}\n"
      "spares = {}\npeer_timeout_seconds = 2\nstep_timeout_seconds = 10\n"
      "[data]\ndir = \"{}\"\n[model]\nname = \"cnn\"\n"
      "[train]\nepochs = 10000\nmax_steps = {}\nbatch_size = {}\noptimizer = \"sgd\"\nlr = {}\nmomentum = 0.9\n"
      "seed = 1\nthreads = 1\n[log]\nevery_steps = {}\n",
      a.workers, a.workers, a.spares, a.data_dir, steps, a.batch_size, a.lr, kPaceEvery);
  if (faulty) {
    text += fmt::format("\n[[faults]]\naction = \"kill\"\nworker = {}\nat_step = {}\n", kKilledWorker, KillStep(steps));
    // With spares the launcher starts the next spare itself when one is
    // admitted: a new worker from the plan would only wait beside it.
    if (a.spares == 0) text += fmt::format("\n[[faults]]\naction = \"restart\"\nat_step = {}\n", RestartStep(steps));
  }
  return text;
}

// A number of a generation, or null when it is absent or not a number.
nlohmann::json NumberOrNull(const nlohmann::json& g, const char* key) {
  if (g.is_object() && g.contains(key) && g[key].is_number()) return g[key];
  return nullptr;
}

// The loss generation (the first carrying detect_ms, or whose why says
// "lost") and the first join generation after it (why "rank N joined", or
// join_transfer_ms without detect_ms): summary.json's "generations".
void ReadGenerations(const nlohmann::json& summary, nlohmann::json& result) {
  nlohmann::json loss, join;
  if (summary.contains("generations") && summary["generations"].is_array()) {
    for (const auto& g : summary["generations"]) {
      if (!g.is_object()) continue;
      const std::string why = g.contains("why") && g["why"].is_string() ? g["why"].get<std::string>() : "";
      if (loss.is_null()) {
        if (g.contains("detect_ms") || why.find("lost") != std::string::npos) loss = g;
      } else if (join.is_null() && (why.find("join") != std::string::npos ||
                                    (g.contains("join_transfer_ms") && !g.contains("detect_ms")))) {
        join = g;
      }
    }
    result["generations"] = summary["generations"];
  } else {
    result["generations"] = nullptr;
  }
  result["loss_generation"] = loss;
  result["join_generation"] = join;
  result["detect_ms"] = NumberOrNull(loss, "detect_ms");
  result["reform_ms"] = NumberOrNull(loss, "reform_ms");
  result["join_transfer_ms"] = NumberOrNull(join, "join_transfer_ms");
  // A warm spare joins in the loss generation itself: from the detection
  // it is a member holding the state after the re-form and its transfer.
  const nlohmann::json spare_transfer = NumberOrNull(loss, "join_transfer_ms");
  result["spare_member_ms"] = spare_transfer.is_number() && result["reform_ms"].is_number()
                                  ? nlohmann::json(result["reform_ms"].get<double>() + spare_transfer.get<double>())
                                  : nlohmann::json();
}

// The pace of a run as JSON: {loop_seconds, steps, median_step_seconds,
// excess_seconds, blocks, and the medians before and after the kill's step
// (in a fault-free run too: how much the machine itself drifted)}, or null
// when its marks cannot say.
nlohmann::json PaceJson(const std::vector<StepSample>& marks, int64_t kill_step) {
  const auto p = PaceOf(marks, kill_step);
  if (!p) return nullptr;
  return {{"loop_seconds", p->loop_seconds},
          {"steps", p->steps},
          {"median_step_seconds", p->median_step_seconds},
          {"median_step_seconds_before_kill", p->median_step_seconds_before},
          {"median_step_seconds_after_kill", p->median_step_seconds_after},
          {"excess_seconds", p->excess_seconds},
          {"blocks", p->blocks}};
}

// tenax's marks: the "train" records of the run's metrics.jsonl (one per
// log point, stamped by the worker that logged it), first of each step.
std::vector<StepSample> TenaxPaceMarks(const std::string& metrics_path) {
  std::vector<StepSample> marks;
  std::ifstream in(metrics_path);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || j.value("event", "") != "train") continue;
    if (!j.contains("step") || !j["step"].is_number_integer() || !j.contains("time") || !j["time"].is_number()) continue;
    const int64_t step = j["step"].get<int64_t>();
    if (!marks.empty() && marks.back().step == step) continue;
    marks.push_back({step, j["time"].get<double>()});
  }
  return marks;
}

// torchrun's marks: the script's pace file, "step time" lines of rank 0
// over every attempt (a restart goes back to its checkpoint's step). A line
// that is not two numbers (an attempt stopped mid-write) is skipped, not
// read into the next one.
std::vector<StepSample> TorchrunPaceMarks(const std::string& pace_path) {
  std::vector<StepSample> marks;
  std::ifstream in(pace_path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    StepSample m;
    std::string rest;
    if (fields >> m.step >> m.seconds && !(fields >> rest)) marks.push_back(m);
  }
  return marks;
}

// One `tenax run` of the elastic job: {wall_seconds, final_test_accuracy,
// steps, pace, ...}, and with faults the generations' timings.
Result<nlohmann::json> RunTenax(const ElasticArgs& a, const std::string& tenax_bin, const std::string& work,
                                int64_t steps, bool faulty) {
  const std::string what = faulty ? "with faults" : "fault-free";
  const std::string dir = work + (faulty ? "/tenax-faults" : "/tenax-fault-free");
  const std::string job = dir + "/job.toml", out = dir + "/run";
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(dir));
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(job, TenaxJobText(a, steps, faulty)));
  auto run = RunToEnd("tenax run (" + what + ")", {tenax_bin, "run", job, "--out", out}, RunDeadline(a));
  if (!run.ok()) {
    return Status(run.status().code(), "tenax run of the elastic job (" + what + ") failed: " + run.status().message() +
                                           " (tenax run's own error line is above)");
  }
  std::ifstream in(out + "/summary.json");
  auto s = nlohmann::json::parse(in, nullptr, false);
  if (s.is_discarded() || !s.is_object()) return Internal("tenax run (" + what + "): summary.json unreadable");
  for (const char* key : {"launcher_wall_seconds", "final_test_accuracy"}) {
    if (!s.contains(key) || !s[key].is_number()) {
      return Internal("tenax run (" + what + "): summary.json has no number '" + key + "'");
    }
  }
  nlohmann::json r = {{"wall_seconds", s["launcher_wall_seconds"]},
                      {"final_test_accuracy", s["final_test_accuracy"]},
                      {"steps", s.value("steps", nlohmann::json())},
                      {"pace", PaceJson(TenaxPaceMarks(out + "/metrics.jsonl"), KillStep(steps))}};
  if (faulty) ReadGenerations(s, r);
  return r;
}

// --------------------------------------------------------------- torchrun

// Kills worker `rank` of a torchrun job (SIGKILL) once the script's progress
// file reaches `at_step`, from its own thread while the caller waits for the
// job. The pid is checked to be the script's before the kill.
class ProgressKiller {
 public:
  ProgressKiller(std::string run_dir, std::string script_name, int rank, int64_t at_step)
      : run_dir_(std::move(run_dir)), script_(std::move(script_name)), rank_(rank), at_step_(at_step) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~ProgressKiller() { Finish(); }
  void Finish() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // After Finish: the step rank 0 had reported when the kill was sent, or
  // nullopt if it was not sent; why not.
  std::optional<int64_t> killed_at_step() const { return killed_at_; }
  std::optional<double> killed_at_seconds() const { return killed_seconds_; }
  const std::string& problem() const { return problem_; }

 private:
  void Loop() {
    const auto start = std::chrono::steady_clock::now();
    while (!done_) {
      std::this_thread::sleep_for(10ms);
      const auto step = ReadNumberFile(run_dir_ + "/progress");
      if (!step || *step < at_step_) continue;
      const auto pid = ReadNumberFile(run_dir_ + "/pid-" + std::to_string(rank_));
      if (!pid || *pid <= 1) {
        problem_ = "no pid file for rank " + std::to_string(rank_);
        continue;
      }
      std::ifstream cmdline("/proc/" + std::to_string(*pid) + "/cmdline");
      std::stringstream text;
      text << cmdline.rdbuf();
      if (text.str().find(script_) == std::string::npos) {
        problem_ = "pid " + std::to_string(*pid) + " of rank " + std::to_string(rank_) + " is not " + script_;
        continue;
      }
      if (::kill(static_cast<pid_t>(*pid), SIGKILL) != 0) {
        problem_ = "kill(" + std::to_string(*pid) + "): " + ErrnoMessage(errno);
        return;
      }
      killed_at_ = *step;
      killed_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      spdlog::info("torchrun: SIGKILLed rank {} (pid {}) after step {}", rank_, *pid, *step);
      problem_.clear();
      return;
    }
  }

  const std::string run_dir_, script_;
  const int rank_;
  const int64_t at_step_;
  std::atomic<bool> done_{false};
  std::optional<int64_t> killed_at_;
  std::optional<double> killed_seconds_;
  std::string problem_;
  std::thread thread_;
};

// One torchrun job of the script: its JSON line plus the wall time measured
// here and, with the fault, when rank 1 was killed.
Result<nlohmann::json> RunTorchrun(const ElasticArgs& a, const std::string& work, int64_t steps, bool faulty) {
  const std::string what = faulty ? "with rank 1 killed" : "fault-free";
  const std::string dir = work + (faulty ? "/torchrun-faults" : "/torchrun-fault-free");
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(dir + "/logs"));
  TENAX_ASSIGN_OR_RETURN(int port, FreePort());
  // --redirects 2 --tee 2: worker stderr to files under --log_dir and to the
  // console. Both flags must be given: their default "0" cannot be parsed by
  // torch 1.13 under Python 3.11 (Std.from_str iterates the IntFlag, which no
  // longer yields the zero member: "'NoneType' object has no attribute 'get'").
  const std::vector<std::string> argv = {a.python,
                                         "-m",
                                         "torch.distributed.run",
                                         "--nnodes",
                                         "1",
                                         "--nproc_per_node",
                                         std::to_string(a.workers),
                                         "--max_restarts",
                                         std::to_string(kTorchrunMaxRestarts),
                                         "--rdzv_backend",
                                         "c10d",
                                         "--rdzv_endpoint",
                                         "127.0.0.1:" + std::to_string(port),
                                         "--rdzv_id",
                                         "bench-elastic",
                                         "--monitor_interval",
                                         "1",
                                         "--redirects",
                                         "2",
                                         "--tee",
                                         "2",
                                         "--log_dir",
                                         dir + "/logs",
                                         a.script,
                                         "--run-dir",
                                         dir,
                                         "--steps",
                                         std::to_string(steps),
                                         "--checkpoint-every",
                                         std::to_string(CheckpointEvery(a, steps)),
                                         "--model",
                                         "cnn",
                                         "--batch-size",
                                         std::to_string(a.batch_size),
                                         "--threads",
                                         "1",
                                         "--lr",
                                         fmt::format("{}", a.lr),
                                         "--momentum",
                                         "0.9",
                                         "--seed",
                                         "1",
                                         "--data",
                                         a.data_dir,
                                         "--pace-every",
                                         std::to_string(kPaceEvery)};
  const auto start = std::chrono::steady_clock::now();
  PeerGroup group;
  TENAX_RETURN_IF_ERROR(group.Start("torchrun (" + what + ")", argv));
  std::unique_ptr<ProgressKiller> killer;
  if (faulty) {
    killer = std::make_unique<ProgressKiller>(dir, std::filesystem::path(a.script).filename().string(), kKilledWorker,
                                              KillStep(steps));
  }
  const Status waited = group.Wait(RunDeadline(a));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (killer) killer->Finish();
  TENAX_RETURN_IF_ERROR(waited);
  const std::vector<nlohmann::json> lines = JsonObjectLines(group.Lines(0));
  if (lines.empty() || !lines.back().contains("final_test_accuracy")) {
    return Internal("torchrun (" + what + "): the script printed no JSON result");
  }
  const nlohmann::json& line = lines.back();
  if (line.value("steps", int64_t{-1}) != steps) {
    return Internal("torchrun (" + what + "): the script trained " + line.value("steps", nlohmann::json()).dump() +
                    " steps, not " + std::to_string(steps));
  }
  nlohmann::json r = {{"wall_seconds", wall},
                      {"final_test_accuracy", line["final_test_accuracy"]},
                      {"steps", line["steps"]},
                      {"pace", PaceJson(TorchrunPaceMarks(dir + "/pace"), KillStep(steps))},
                      {"script_result", line}};
  if (faulty) {
    if (!killer->killed_at_step()) {
      return Internal("torchrun (" + what + "): rank 1 was never killed before the job ended" +
                      (killer->problem().empty() ? "" : " (" + killer->problem() + ")"));
    }
    if (line.value("restarts", 0) < 1) {
      return Internal("torchrun (" + what + "): rank 1 was killed but the job finished without a restart");
    }
    r["killed_at_step"] = *killer->killed_at_step();
    r["killed_at_seconds"] = *killer->killed_at_seconds();
    r["restarts"] = line["restarts"];
    r["resumed_from_step"] = line["resumed_from_step"];
  }
  return r;
}

// ----------------------------------------------------------------- report

// Where a run failed: its message in the report instead of its numbers.
struct Measured {
  std::optional<nlohmann::json> result;
  std::string error;
};

std::optional<double> Num(const Measured& m, const char* key) {
  if (!m.result || !m.result->contains(key) || !(*m.result)[key].is_number()) return std::nullopt;
  return (*m.result)[key].get<double>();
}

std::optional<double> Num(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

// A run's excess over its own pace (step_pace.h), if its marks said one.
std::optional<double> Excess(const Measured& m) {
  if (!m.result || !m.result->contains("pace") || !(*m.result)["pace"].is_object()) return std::nullopt;
  return Num((*m.result)["pace"], "excess_seconds");
}

// max - min of `v`; nullopt with fewer than two values.
std::optional<double> Spread(const std::vector<double>& v) {
  if (v.size() < 2) return std::nullopt;
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return *hi - *lo;
}

nlohmann::json OrNull(std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

std::string Cell(std::optional<double> v, const char* format) {
  if (!v) return "-";
  return fmt::format(fmt::runtime(format), *v);
}

// The runs of one implementation: round r has a fault-free run free[r] and
// a run with the fault faulty[r].
struct Rounds {
  std::vector<Measured> free, faulty;
};

// The values of `key` over `runs`; nullopt when any run lacks it (a failed
// run makes the statistic unknown, not better).
std::optional<std::vector<double>> AllOf(const std::vector<Measured>& runs, const char* key) {
  std::vector<double> v;
  for (const Measured& m : runs) {
    const auto x = Num(m, key);
    if (!x) return std::nullopt;
    v.push_back(*x);
  }
  if (v.empty()) return std::nullopt;
  return v;
}

std::optional<double> MedianOf(const std::optional<std::vector<double>>& v) {
  return v ? std::optional<double>(Median(*v)) : std::nullopt;
}

// {impl, wall_seconds, fault_free_wall_seconds, lost_seconds,
// paced_lost_seconds, final_test_accuracy, fault_free_final_test_accuracy,
// rounds} over all rounds: walls and accuracies are medians; lost_seconds
// and paced_lost_seconds are medians of the rounds' own differences (each
// round's two runs ran close together); the fault-free runs' spreads of wall
// and of excess say how much either estimate moves with no fault at all;
// accuracy_gap is the largest round's |faulty - fault-free|; for tenax,
// detect_ms and join_transfer_ms are medians and reform_ms the largest
// (the target is a bound). The last faulty run's other fields (generations,
// killed_at_step...) are copied as they are. Null where a run failed.
nlohmann::json ImplResult(const std::string& impl, const Rounds& runs) {
  const bool tenax = impl == "tenax";
  nlohmann::json rounds = nlohmann::json::array();
  std::vector<double> lost, paced, gaps, free_walls, free_excesses;
  bool complete = !runs.faulty.empty() && runs.free.size() == runs.faulty.size();
  bool paced_complete = complete;
  for (size_t i = 0; i < runs.faulty.size(); ++i) {
    const Measured* free = i < runs.free.size() ? &runs.free[i] : nullptr;
    const auto wall = Num(runs.faulty[i], "wall_seconds");
    const auto free_wall = free ? Num(*free, "wall_seconds") : std::nullopt;
    const auto acc = Num(runs.faulty[i], "final_test_accuracy");
    const auto free_acc = free ? Num(*free, "final_test_accuracy") : std::nullopt;
    nlohmann::json r = {{"wall_seconds", OrNull(wall)},
                        {"fault_free_wall_seconds", OrNull(free_wall)},
                        {"lost_seconds", wall && free_wall ? nlohmann::json(*wall - *free_wall) : nlohmann::json()},
                        {"final_test_accuracy", OrNull(acc)},
                        {"fault_free_final_test_accuracy", OrNull(free_acc)}};
    const auto excess = Excess(runs.faulty[i]);
    const auto free_excess = free ? Excess(*free) : std::nullopt;
    r["excess_seconds"] = OrNull(excess);
    r["fault_free_excess_seconds"] = OrNull(free_excess);
    r["paced_lost_seconds"] = excess && free_excess ? nlohmann::json(*excess - *free_excess) : nlohmann::json();
    if (excess && free_excess) paced.push_back(*excess - *free_excess);
    else paced_complete = false;
    if (free_wall) free_walls.push_back(*free_wall);
    if (free_excess) free_excesses.push_back(*free_excess);
    if (tenax) {
      for (const char* key : {"detect_ms", "reform_ms", "join_transfer_ms", "spare_member_ms"}) {
        r[key] = OrNull(Num(runs.faulty[i], key));
      }
    }
    if (wall && free_wall) lost.push_back(*wall - *free_wall);
    else complete = false;
    if (acc && free_acc) gaps.push_back(std::fabs(*acc - *free_acc));
    rounds.push_back(r);
  }
  nlohmann::json r = {
      {"impl", impl},
      {"wall_seconds", OrNull(MedianOf(AllOf(runs.faulty, "wall_seconds")))},
      {"fault_free_wall_seconds", OrNull(MedianOf(AllOf(runs.free, "wall_seconds")))},
      {"lost_seconds", complete ? nlohmann::json(Median(lost)) : nlohmann::json()},
      {"paced_lost_seconds", paced_complete ? nlohmann::json(Median(paced)) : nlohmann::json()},
      {"fault_free_wall_spread_seconds", OrNull(Spread(free_walls))},
      {"fault_free_excess_spread_seconds", OrNull(Spread(free_excesses))},
      {"final_test_accuracy", OrNull(MedianOf(AllOf(runs.faulty, "final_test_accuracy")))},
      {"fault_free_final_test_accuracy", OrNull(MedianOf(AllOf(runs.free, "final_test_accuracy")))},
      {"accuracy_gap", complete && gaps.size() == rounds.size()
                           ? nlohmann::json(*std::max_element(gaps.begin(), gaps.end()))
                           : nlohmann::json()},
      {"rounds", rounds}};
  if (tenax) {
    r["detect_ms"] = OrNull(MedianOf(AllOf(runs.faulty, "detect_ms")));
    const auto reforms = AllOf(runs.faulty, "reform_ms");
    r["reform_ms"] = reforms ? nlohmann::json(*std::max_element(reforms->begin(), reforms->end())) : nlohmann::json();
    r["join_transfer_ms"] = OrNull(MedianOf(AllOf(runs.faulty, "join_transfer_ms")));
    const auto spare_ms = AllOf(runs.faulty, "spare_member_ms");
    r["spare_member_ms"] =
        spare_ms ? nlohmann::json(*std::max_element(spare_ms->begin(), spare_ms->end())) : nlohmann::json();
  }
  if (!runs.faulty.empty() && runs.faulty.back().result) {
    for (const auto& [key, value] : runs.faulty.back().result->items()) {
      if (!r.contains(key)) r[key] = value;
    }
  }
  std::vector<std::string> errors;
  for (const auto* set : {&runs.free, &runs.faulty}) {
    for (const Measured& m : *set) {
      if (!m.error.empty()) errors.push_back(m.error);
    }
  }
  if (!errors.empty()) r["errors"] = errors;
  return r;
}

struct Target {
  std::string name, text;
  std::optional<double> value;
  double limit;
  bool met;
};

// The three targets of issue 9; a missing number misses its target, saying why.
std::vector<Target> CheckTargets(const nlohmann::json& tenax, const nlohmann::json& torchrun, int64_t spares) {
  std::vector<Target> out;
  const auto tl = Num(tenax, "paced_lost_seconds"), pl = Num(torchrun, "paced_lost_seconds");
  const double ratio_limit = spares > 0 ? kLostRatioTargetWithSpares : kLostRatioTarget;
  {
    Target t{.name = "lost_seconds_ratio", .text = {}, .value = std::nullopt, .limit = ratio_limit, .met = false};
    if (tl && pl) {
      t.value = *pl > 0 ? std::optional<double>(*tl / *pl) : std::nullopt;
      t.met = *tl <= ratio_limit * *pl;
      t.text = fmt::format(
          "tenax lost seconds <= {:.2f} x torchrun's (paced): {:.2f} s vs {:.2f} x {:.2f} s = {:.2f} s", ratio_limit,
          *tl, ratio_limit, *pl, ratio_limit * *pl);
    } else {
      t.text = fmt::format("tenax lost seconds <= {:.2f} x torchrun's (paced): not measured ({} missing)", ratio_limit,
                           tl ? "torchrun's" : "tenax's");
    }
    out.push_back(t);
  }
  if (spares > 0) {
    const auto ms = Num(tenax, "spare_member_ms");
    Target t{.name = "spare_member_ms", .text = {}, .value = ms, .limit = kSpareMemberMsTarget, .met = false};
    t.met = ms && *ms <= kSpareMemberMsTarget;
    t.text = ms ? fmt::format("a spare is a member holding the state <= {:.0f} ms after the loss's detection (slowest "
                              "round, re-form + transfer): {:.0f} ms",
                              kSpareMemberMsTarget, *ms)
                : fmt::format("a spare is a member <= {:.0f} ms after the loss's detection: not measured (the loss "
                              "generation admitted no spare)",
                              kSpareMemberMsTarget);
    out.push_back(t);
  }
  {
    const auto reform = Num(tenax, "reform_ms");
    Target t{.name = "reform_ms",
             .text = {},
             .value = reform,
             .limit = kReformMsTarget,
             .met = reform && *reform <= kReformMsTarget};
    t.text = reform ? fmt::format("tenax reform_ms <= {:.0f} after detection (slowest round): {:.0f} ms", kReformMsTarget, *reform)
                    : fmt::format(
                          "tenax reform_ms <= {:.0f} after detection: not measured (no reform_ms for the "
                          "loss generation in summary.json)",
                          kReformMsTarget);
    out.push_back(t);
  }
  {
    const auto gap = Num(tenax, "accuracy_gap");
    Target t{.name = "accuracy_gap", .text = {}, .value = gap, .limit = kAccuracyGapTarget, .met = false};
    if (gap) {
      t.met = *gap <= kAccuracyGapTarget;
      t.text = fmt::format(
          "tenax final accuracy with faults within {:.1f} point of fault-free (worst round): median {:.4f} vs "
          "{:.4f}, largest gap {:.2f} points",
          kAccuracyGapTarget * 100, Num(tenax, "final_test_accuracy").value_or(0),
          Num(tenax, "fault_free_final_test_accuracy").value_or(0), *gap * 100);
    } else {
      t.text = fmt::format("tenax final accuracy with faults within {:.1f} point of fault-free: not measured",
                           kAccuracyGapTarget * 100);
    }
    out.push_back(t);
  }
  return out;
}

Status RunElastic(ElasticArgs a) {
  const int64_t steps = a.steps > 0 ? a.steps : a.quick ? kQuickSteps : kFullSteps;
  if (KillStep(steps) < 1 || RestartStep(steps) <= KillStep(steps)) {
    return InvalidArgument("--steps " + std::to_string(steps) + " leaves no room for a kill and a restart (>= 3)");
  }
  std::error_code ec;
  if (!std::filesystem::exists(a.script, ec)) {
    return NotFound(a.script + ": torchrun benchmark script not found (--script)");
  }
  // Both sides read the gzipped idx files (the Python reader knows no other names).
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                           "t10k-labels-idx1-ubyte.gz"}) {
    if (!std::filesystem::exists(a.data_dir + "/" + name, ec)) {
      return NotFound(a.data_dir + "/" + name + ": no such file (--data: the Fashion-MNIST directory)");
    }
  }
  TENAX_RETURN_IF_ERROR(CheckOnPath(a.python, "--python"));
  std::string tenax_bin;
  if (!a.torchrun_only) {
    TENAX_ASSIGN_OR_RETURN(tenax_bin, FindProgram("tenax"));
  }
  TENAX_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Create("tenax-bench-elastic"));
  UseFreshSecret();
  const std::string blas = ChooseBlasCoreForBothSides(a.keep_blas_core);

  const int64_t every = CheckpointEvery(a, steps);
  std::printf(
      "elastic: %lld workers, cnn, %lld steps of batch %lld per worker (global %lld), SGD lr %g momentum 0.9\n"
      "faults: worker %d SIGKILLed at step %lld; tenax %s, torchrun restarts every worker (max %d restarts) from "
      "its checkpoint (every %lld steps)\n",
      static_cast<long long>(a.workers), static_cast<long long>(steps), static_cast<long long>(a.batch_size),
      static_cast<long long>(a.batch_size * a.workers), a.lr, kKilledWorker, static_cast<long long>(KillStep(steps)),
      a.spares > 0 ? "admits a warm spare" : fmt::format("starts a new worker at step {}", RestartStep(steps)).c_str(),
      kTorchrunMaxRestarts, static_cast<long long>(every));
  if (a.spares > 0) {
    std::printf("tenax keeps %lld warm spare(s) beside its workers in both its runs (cluster.spares): a spare "
                "takes the killed worker's place, and tenax run starts the next spare itself (no new worker at "
                "step %lld)\n",
                static_cast<long long>(a.spares), static_cast<long long>(RestartStep(steps)));
  }
  std::printf("OpenBLAS kernels for both sides: %s\n", blas.c_str());
  const char* size = a.steps > 0 ? "--steps" : a.quick ? "quick" : "full";
  const int rounds = static_cast<int>(a.rounds > 0 ? a.rounds : a.quick ? kQuickRounds : kFullRounds);
  std::printf("%s: %d round(s) of %d run(s) (%s, per implementation)\n", size, rounds,
              (a.torchrun_only ? 1 : 2) * (a.faults_only ? 1 : 2),
              a.faults_only ? "with faults only" : "fault-free and with faults");
  std::fflush(stdout);

  // Interleaved, so that drift on a noisy machine hits both implementations,
  // and in ABBA order over rounds (even rounds fault-free first, odd rounds
  // with the fault first), so that a steady drift does not count as lost
  // time.
  Rounds tenax_runs, torch_runs;
  std::vector<std::string> failures;
  const auto bench_start = std::chrono::steady_clock::now();
  auto measure = [&](std::vector<Measured>& into, const std::string& label,
                     const std::function<Result<nlohmann::json>()>& run) {
    if (StopRequested()) return Cancelled("benchmark stopped");
    Measured& m = into.emplace_back();
    spdlog::info("{} ...", label);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run();
    if (r.ok()) {
      m.result = *r;
      spdlog::info("{}: {:.1f} s, test accuracy {:.4f}", label,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                   (*r)["final_test_accuracy"].get<double>());
      return Status::Ok();
    }
    if (r.status().code() == StatusCode::kCancelled) return r.status();
    m.error = r.status().message();
    failures.push_back(label + ": " + m.error);
    spdlog::error("{}", failures.back());
    return Status::Ok();
  };
  for (int round = 0; round < rounds; ++round) {
    const std::string dir = work.path() + "/round-" + std::to_string(round + 1);
    const std::string tag = rounds > 1 ? fmt::format(" (round {}/{})", round + 1, rounds) : "";
    auto fault_free = [&]() -> Status {
      if (a.faults_only) return Status::Ok();
      TENAX_RETURN_IF_ERROR(measure(torch_runs.free, "torchrun, fault-free" + tag,
                                    [&] { return RunTorchrun(a, dir, steps, false); }));
      if (a.torchrun_only) return Status::Ok();
      return measure(tenax_runs.free, "tenax, fault-free" + tag,
                     [&] { return RunTenax(a, tenax_bin, dir, steps, false); });
    };
    auto faulty = [&]() -> Status {
      TENAX_RETURN_IF_ERROR(measure(torch_runs.faulty, "torchrun, rank 1 killed" + tag,
                                    [&] { return RunTorchrun(a, dir, steps, true); }));
      if (a.torchrun_only) return Status::Ok();
      return measure(tenax_runs.faulty, "tenax, worker 1 killed and a new worker started" + tag,
                     [&] { return RunTenax(a, tenax_bin, dir, steps, true); });
    };
    if (round % 2 == 0) {
      TENAX_RETURN_IF_ERROR(fault_free());
      TENAX_RETURN_IF_ERROR(faulty());
    } else {
      TENAX_RETURN_IF_ERROR(faulty());
      TENAX_RETURN_IF_ERROR(fault_free());
    }
  }
  const double bench_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - bench_start).count();

  nlohmann::json results = nlohmann::json::array();
  if (!a.torchrun_only) results.push_back(ImplResult("tenax", tenax_runs));
  results.push_back(ImplResult("torchrun", torch_runs));

  std::printf("\n%-10s %9s %12s %8s %8s %9s %11s %9s %9s %9s\n", "impl", "wall s", "fault-free s", "lost s",
              "paced s", "accuracy", "fault-free", "detect ms", "reform ms", "join ms");
  for (const auto& r : results) {
    const bool tx = r["impl"] == "tenax";
    std::printf(
        "%-10s %9s %12s %8s %8s %9s %11s %9s %9s %9s\n", r["impl"].get<std::string>().c_str(),
        Cell(Num(r, "wall_seconds"), "{:.1f}").c_str(), Cell(Num(r, "fault_free_wall_seconds"), "{:.1f}").c_str(),
        Cell(Num(r, "lost_seconds"), "{:.1f}").c_str(), Cell(Num(r, "paced_lost_seconds"), "{:.2f}").c_str(),
        Cell(Num(r, "final_test_accuracy"), "{:.4f}").c_str(),
        Cell(Num(r, "fault_free_final_test_accuracy"), "{:.4f}").c_str(),
        tx ? Cell(Num(r, "detect_ms"), "{:.0f}").c_str() : "", tx ? Cell(Num(r, "reform_ms"), "{:.0f}").c_str() : "",
        tx ? Cell(Num(r, "join_transfer_ms"), "{:.0f}").c_str() : "");
  }
  // Per round: the lost seconds each round measured, both ways, so a reader
  // sees the spread; and how far each estimate moves with no fault at all.
  for (const auto& r : results) {
    std::string wall, paced;
    for (const auto& round : r["rounds"]) {
      wall += " " + Cell(Num(round, "lost_seconds"), "{:.2f}");
      paced += " " + Cell(Num(round, "paced_lost_seconds"), "{:.2f}");
    }
    const std::string impl = r["impl"].get<std::string>();
    std::printf("%s lost seconds by round, walls:%s; paced:%s (median %s)\n", impl.c_str(), wall.c_str(),
                paced.c_str(), Cell(Num(r, "paced_lost_seconds"), "{:.2f}").c_str());
    if (r["rounds"].size() > 1) {
      std::printf("%s fault-free runs spread over rounds: walls %s s, excess over pace %s s\n", impl.c_str(),
                  Cell(Num(r, "fault_free_wall_spread_seconds"), "{:.2f}").c_str(),
                  Cell(Num(r, "fault_free_excess_spread_seconds"), "{:.2f}").c_str());
    }
  }
  // What the median cannot see (step_pace.h): a slowdown after the kill for
  // the rest of the run. Each run's medians before and after the kill's step.
  for (const auto* runs : {&tenax_runs, &torch_runs}) {
    const char* impl = runs == &tenax_runs ? "tenax" : "torchrun";
    std::string line;
    for (size_t i = 0; i < runs->faulty.size(); ++i) {
      auto split = [](const Measured* m) -> std::string {
        if (m == nullptr || !m->result || !m->result->contains("pace")) return "-";
        const nlohmann::json& p = m->result->at("pace");
        if (!p.is_object()) return "-";
        return fmt::format("{:.1f}/{:.1f}", p["median_step_seconds_before_kill"].get<double>() * 1e3,
                           p["median_step_seconds_after_kill"].get<double>() * 1e3);
      };
      line += fmt::format(" round {}: {} ({})", i + 1, split(&runs->faulty[i]),
                          split(i < runs->free.size() ? &runs->free[i] : nullptr));
    }
    if (!runs->faulty.empty()) {
      std::printf("%s ms per step before/after the kill's step, with the fault (fault-free):%s\n", impl, line.c_str());
    }
  }
  if (!a.torchrun_only) {
    const auto tl = Num(results[0], "lost_seconds"), pl = Num(results[1], "lost_seconds");
    if (tl && pl && *pl > 0) {
      std::printf("walls instead of paces (not judged): tenax %.2f s / torchrun %.2f s = %.2f\n", *tl, *pl, *tl / *pl);
    }
  }
  for (const auto& runs : {&tenax_runs.faulty, &torch_runs.faulty}) {
    for (const Measured& m : *runs) {
      if (!m.result) continue;
      const nlohmann::json& r = *m.result;
      auto first_step = [](const nlohmann::json& g) {
        return g.is_object() && g.contains("first_step") ? g["first_step"].dump() : std::string("-");
      };
      if (runs == &tenax_runs.faulty && a.spares > 0) {
        const nlohmann::json& ms = r.contains("spare_member_ms") ? r["spare_member_ms"] : nlohmann::json();
        std::printf("tenax: worker %d lost -> generation from step %s with a spare in its place (a member holding the "
                    "state %s ms after the detection)\n",
                    kKilledWorker, first_step(r["loss_generation"]).c_str(),
                    ms.is_number() ? fmt::format("{:.0f}", ms.get<double>()).c_str() : "-");
      } else if (runs == &tenax_runs.faulty) {
        std::printf("tenax: worker %d lost -> generation from step %s; new worker joined -> generation from step %s\n",
                    kKilledWorker, first_step(r["loss_generation"]).c_str(), first_step(r["join_generation"]).c_str());
      } else {
        std::printf("torchrun: rank 1 killed after step %s, %s restart(s), resumed from step %s\n",
                    r["killed_at_step"].dump().c_str(), r["restarts"].dump().c_str(),
                    r["resumed_from_step"].dump().c_str());
      }
    }
  }
  nlohmann::json targets = nlohmann::json::array();
  if (!a.torchrun_only) {
    for (const Target& t : CheckTargets(results[0], results[1], a.spares)) {
      std::printf("target: %s: %s\n", t.text.c_str(), t.met ? "met" : "MISSED");
      targets.push_back(
          {{"name", t.name}, {"value", OrNull(t.value)}, {"limit", t.limit}, {"met", t.met}, {"text", t.text}});
    }
  }
  std::printf("wall time: %.1f s\n", bench_wall);
  std::fflush(stdout);

  const nlohmann::json report = {{"benchmark", "elastic"},
                                 {"quick", a.quick},
                                 {"model", "cnn"},
                                 {"workers", a.workers},
                                 {"steps", steps},
                                 {"batch_size_per_worker", a.batch_size},
                                 {"global_batch_size", a.batch_size * a.workers},
                                 {"optimizer", "sgd"},
                                 {"lr", a.lr},
                                 {"momentum", 0.9},
                                 {"tenax_spares", a.spares},
                                 {"blas_core", blas},
                                 {"killed_worker", kKilledWorker},
                                 {"kill_at_step", KillStep(steps)},
                                 {"restart_at_step", RestartStep(steps)},
                                 {"torchrun_checkpoint_every", every},
                                 {"torchrun_max_restarts", kTorchrunMaxRestarts},
                                 {"rounds", rounds},
                                 {"results", results},
                                 {"targets", targets},
                                 {"wall_seconds", bench_wall},
                                 {"failures", failures}};
  TENAX_RETURN_IF_ERROR(WriteJsonReport(a.json_path, report));
  if (!failures.empty()) {
    std::string msg = std::to_string(failures.size()) + " run(s) failed";
    for (const auto& f : failures) msg += "; " + f;
    return Unavailable(msg);
  }
  return Status::Ok();
}

}  // namespace

void AddElasticBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<ElasticArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "elastic",
      "A worker SIGKILLed at 1/3 of a 4-worker cnn job and a new one at 2/3: tenax elastic sync vs torchrun "
      "(--max_restarts, checkpoints), lost seconds, re-form and join times",
      fmt::format("{} steps instead of {} (4 runs in under 4 minutes)", kQuickSteps, kFullSteps), a->quick,
      a->json_path, [a] { return RunElastic(*a); }, exit_code);
  cmd->add_option("--spares", a->spares,
                  "tenax keeps this many warm spares (cluster.spares) in both its runs; the lost-seconds target "
                  "becomes 0.1x torchrun's and a spare must hold the state <= 100 ms after the loss's detection")
      ->check(CLI::Range(int64_t{0}, int64_t{4}))
      ->capture_default_str();
  cmd->add_option("--steps", a->steps,
                  fmt::format("Optimizer steps per run (default {} quick, {} full)", kQuickSteps, kFullSteps))
      ->check(CLI::Range(int64_t{3}, int64_t{1} << 30));
  cmd->add_option("--rounds", a->rounds,
                  fmt::format("Rounds of the four runs, in ABBA order; medians over them (default {} quick, {} full)",
                              kQuickRounds, kFullRounds))
      ->check(CLI::Range(int64_t{1}, int64_t{100}));
  cmd->add_option("--batch-size", a->batch_size, "Samples per step per worker")
      ->check(CLI::Range(int64_t{1}, int64_t{15000}))
      ->capture_default_str();
  cmd->add_option("--lr", a->lr, "SGD learning rate (momentum 0.9)")
      ->check(CLI::Range(1e-9, 10.0))
      ->capture_default_str();
  cmd->add_option("--checkpoint-every", a->checkpoint_every,
                  "Steps between the torchrun script's checkpoints (default: 10% of the steps)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--data", a->data_dir, "Fashion-MNIST directory")->capture_default_str();
  cmd->add_option("--python", a->python, "Python interpreter with torch (runs torch.distributed.run)")
      ->capture_default_str();
  cmd->add_option("--script", a->script, "The torchrun worker script")->capture_default_str();
  cmd->add_flag("--keep-blas-core", a->keep_blas_core,
                "Keep the OpenBLAS kernels OpenBLAS picks itself (by default, where it fell back to SSE3 kernels on a "
                "CPU it does not know, both sides run the kernels the CPU's flags support)");
  cmd->add_option("--timeout", a->timeout_seconds, "Time limit of one run of either side, seconds")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}))
      ->capture_default_str();
  // Hidden, for tests: fewer workers, and the torchrun side alone.
  cmd->add_option("--workers", a->workers, "Workers per job")->check(CLI::Range(int64_t{2}, int64_t{16}))->group("");
  cmd->add_flag("--torchrun-only", a->torchrun_only, "Run only the torchrun side")->group("");
  cmd->add_flag("--faults-only", a->faults_only, "Skip the fault-free runs")->group("");
}

}  // namespace tenax::bench

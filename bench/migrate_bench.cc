// tenax bench migrate: what moving a live worker off a degraded host buys
// (placement.migrate, docs/placement.md "Moving a live worker").
//
// Every run is a `tenax run` of the same elastic sync job on an emulated
// 2-zone topology: hosts a1, a2, a3 in zone-a and b1, b2, b3 in zone-b, one
// slot each; inside a zone 0.05 ms and 4 Gbit/s, across 1 ms and
// 0.2 Gbit/s (topology.mode "auto": network namespaces where the bench may
// make them, else loopback). Network-aware placement puts the --workers
// (default 2) in one zone, which leaves a free host there. The cnn trains
// with SGD (momentum 0.9) and the collective pinned to the flat ring
// (train.allreduce = "ring"), so that only the move changes between runs.
// Three runs per round:
//  - clean: no fault (placement.migrate = true, as the move run, so the
//    link checks cost both the same);
//  - stay:  at step S = steps / 3, worker 1's host is slowed at the
//    transport seam for the rest of the job (`slow_host`: every link of the
//    host takes its delay x --factor plus --delay-ms one way, its bandwidth
//    / --factor), and placement.migrate = false: the job trains on;
//  - move:  the same fault with placement.migrate = true: the launcher sees
//    the host's links break migrate_max_rtt_ms (10 ms), starts a migrant on
//    the free host, and the migrant takes worker 1's place. Loss is not
//    judged, tenax's default (migrate_max_loss 1, --migrate-max-loss): the
//    fault adds none, and the probes count a late ping as lost, which a
//    loaded machine makes (0.07-0.21 seen); throughput is not
//    judged (migrate_min_gbps 0): the probes' 1 MiB writes measure low on a
//    loaded machine, and the delay alone makes the scenario.
// Seconds per step come from the runs' metrics.jsonl (the "time" of the
// "train" records, every log.every_steps), over a window of steps, the
// intervals holding an epoch-end evaluation left out:
//  - check (the scenario is valid, not a target): stay's seconds per step
//    over [S + 50, end] >= 2x clean's over the same steps;
//  - target: move's throughput over [max(2 x steps / 3, the first step
//    logged after the move was done + 20), end] >= 0.9x clean's over the
//    same steps.
// Also reported: the move's timings (summary.json's "migrations": warm and
// member seconds; from the fault to the move's start and end), the step at
// which the fault hit and the move was done, each run's wall time and the
// seconds the fault lost (stay - clean, move - clean). --rounds N runs the
// three N times (ABBA order) and reports medians.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

#include "bench_common.h"
#include "tenax/core/files.h"
#include "tenax/core/run_records.h"
#include "tenax/core/signals.h"

namespace tenax::bench {
namespace {

struct MigrateArgs {
  bool quick = false;
  std::string json_path;
  int64_t steps = 0;   // 0 = kQuickSteps with --quick, else kFullSteps
  int64_t rounds = 0;  // 0 = 3, or 1 with --quick
  int64_t workers = 2;
  std::string model = "cnn";
  int64_t batch_size = 64;
  double lr = 0.02;
  double factor = 10;
  double delay_ms = 20;
  double migrate_max_loss = 1;  // placement.migrate_max_loss of the clean and move runs (tenax's default: not judged)
  std::string work_dir;         // "" = a fresh temporary directory, removed at the end
  std::string data_dir = kDefaultFashionMnistDir;
  int64_t timeout_seconds = 1800;  // per run
  int64_t log_every = 50;          // hidden: log.every_steps
  bool reread = false;             // hidden: report the runs already in --work-dir, run nothing
};

// 1800: the window after the move (the last third) is then about 600 steps,
// 6-10 s of cnn on 2 cores; with 900 steps its 3 s spread one round's ratio
// over 0.56-1.59 (the machine's own step time drifts 9-18 ms between runs).
constexpr int64_t kFullSteps = 1800;
constexpr int64_t kQuickSteps = 500;
constexpr int64_t kMinSteps = 300;
constexpr int kSlowWorker = 1;
constexpr double kStayCheck = 2.0;      // stay's seconds per step >= 2x clean's
constexpr double kMoveTarget = 0.9;     // move's throughput after the move >= 0.9x clean's
constexpr int64_t kStaySkip = 50;       // the stay window starts this many steps after the fault
constexpr int64_t kAfterMoveSkip = 20;  // ... the move window this many after the step logged at the move's end
constexpr int64_t kMinWindow = 100;     // fewer steps than this in a window: not measured

struct Host {
  const char* name;
  const char* zone;
};
constexpr Host kHosts[] = {{"a1", "zone-a"}, {"a2", "zone-a"}, {"a3", "zone-a"},
                           {"b1", "zone-b"}, {"b2", "zone-b"}, {"b3", "zone-b"}};
constexpr int64_t kHostCount = static_cast<int64_t>(std::size(kHosts));

int64_t FaultStep(int64_t steps) { return steps / 3; }

// ------------------------------------------------------------------ a run

enum class Kind { kClean, kStay, kMove };
const char* Name(Kind k) { return k == Kind::kClean ? "clean" : k == Kind::kStay ? "stay" : "move"; }

std::string JobText(const MigrateArgs& a, Kind kind, int64_t steps) {
  std::string hosts;
  for (const Host& h : kHosts) {
    hosts += fmt::format("{}{{ name = \"{}\", zone = \"{}\", slots = 1 }}", hosts.empty() ? "" : ", ", h.name, h.zone);
  }
  const bool migrate = kind != Kind::kStay;
  std::string text = fmt::format(
      "mode = \"sync\"\n"
      "[cluster]\nworkers = {}\njob_id = \"bench-migrate-{}\"\nelastic = true\nmin_workers = 1\n"
      "peer_timeout_seconds = 5\njoin_timeout_seconds = 60\nstep_timeout_seconds = 60\n"
      "[topology]\nmode = \"auto\"\nhosts = [ {} ]\n"
      "same_zone = {{ delay_ms = 0.05, bandwidth_gbps = 4 }}\ncross_zone = {{ delay_ms = 1.0, bandwidth_gbps = 0.2 }}\n"
      "[placement]\npolicy = \"network_aware\"\nprobe_seconds = 2\nlink_half_life_seconds = 2\nmigrate = {}\n",
      a.workers, Name(kind), hosts, migrate ? "true" : "false");
  // The thresholds are refused without migrate.
  if (migrate) {
    text += fmt::format("migrate_max_rtt_ms = 10\nmigrate_min_gbps = 0\nmigrate_max_loss = {}\n", a.migrate_max_loss);
  }
  text += fmt::format(
      "[data]\ndir = \"{}\"\ntest_limit = 1000\n[model]\nname = \"{}\"\n"
      "[train]\nepochs = 10000\nmax_steps = {}\nbatch_size = {}\noptimizer = \"sgd\"\nlr = {}\nmomentum = 0.9\n"
      "seed = 1\nthreads = 1\nallreduce = \"ring\"\n[log]\nevery_steps = {}\n[report]\nreference = false\n",
      a.data_dir, a.model, steps, a.batch_size, a.lr, a.log_every);
  if (kind != Kind::kClean) {
    text += fmt::format(
        "\n[[faults]]\naction = \"slow_host\"\nworker = {}\nfactor = {}\ndelay_ms = {}\nseconds = 3600\nat_step = {}\n",
        kSlowWorker, a.factor, a.delay_ms, FaultStep(steps));
  }
  return text;
}

// A "train" record: the global step and when rank 0 logged it (unix seconds).
struct Point {
  int64_t step;
  double time;
};

// What one run's metrics.jsonl and summary.json say.
struct Run {
  std::string name;
  std::string out;
  nlohmann::json summary;
  std::vector<Point> train;          // by step, one per step (the last record of a step)
  std::vector<int64_t> epoch_ends;   // steps after which an epoch's evaluation ran
  std::optional<Point> fault;        // the slow_host fault's firing
  std::optional<double> move_start;  // the launcher's first "migration: ... moves to" notice
  std::vector<double> moves_done;    // each "migration done:" notice (or a migrant's "active" state)
  std::string migration_notices;     // every "migration..." notice, for the report of a run that did not move
};

Result<Run> ReadRun(const std::string& name, const std::string& out) {
  Run r;
  r.name = name;
  r.out = out;
  {
    std::ifstream in(out + "/summary.json");
    r.summary = nlohmann::json::parse(in, nullptr, false);
    if (r.summary.is_discarded() || !r.summary.is_object()) {
      return Internal("tenax run (" + name + "): " + out + "/summary.json unreadable");
    }
  }
  std::ifstream in(out + "/metrics.jsonl");
  if (!in) return Internal("tenax run (" + name + "): no " + out + "/metrics.jsonl");
  std::map<int64_t, double> train;
  std::vector<double> migrants_active;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("time") || !j["time"].is_number()) continue;
    const double time = j["time"].get<double>();
    if (auto t = records::TrainFrom(j)) {
      train[t->step] = time;  // a step logged twice (a re-formed generation): the later
    } else if (auto e = records::EpochFrom(j)) {
      r.epoch_ends.push_back(e->step);
    } else if (auto f = records::FaultFrom(j); f && f->fired && f->action == "slow_host" && !r.fault) {
      r.fault = Point{f->step, time};
    } else if (auto n = records::NoticeFrom(j); n && n->text.rfind("migration", 0) == 0) {
      r.migration_notices += (r.migration_notices.empty() ? "" : "\n") + n->text;
      if (n->text.rfind("migration: ", 0) == 0 && n->text.find(" moves to ") != std::string::npos && !r.move_start) {
        r.move_start = time;
      }
      if (n->text.rfind("migration done:", 0) == 0) r.moves_done.push_back(time);
    } else if (auto w = records::WorkerStateFrom(j); w && w->worker.rfind("migrant", 0) == 0 && w->state == "active") {
      migrants_active.push_back(time);
    }
  }
  // The launcher says "migration done" when it sees the migrant active;
  // without those lines, the migrants' states say when.
  if (r.moves_done.empty()) r.moves_done = migrants_active;
  for (const auto& [step, time] : train) r.train.push_back({step, time});
  if (r.train.size() < 2) return Internal("tenax run (" + name + "): fewer than two train records in metrics.jsonl");
  return r;
}

Result<Run> RunOne(const MigrateArgs& a, const std::string& tenax_bin, const std::string& dir, Kind kind,
                   int64_t steps) {
  const std::string name = Name(kind);
  const std::string job = dir + "/" + name + ".toml", out = dir + "/" + name;
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(dir));
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(job, JobText(a, kind, steps)));
  auto run = RunToEnd("tenax run (" + name + ")", {tenax_bin, "run", job, "--out", out},
                      Deadline::After(std::chrono::seconds(a.timeout_seconds)));
  if (!run.ok()) {
    return Status(run.status().code(), "tenax run (" + name + ") failed: " + run.status().message() +
                                           " (tenax run's own error line is above; its output is in " + out + ")");
  }
  return ReadRun(name, out);
}

// ---------------------------------------------------------------- windows

// Seconds per step over the train records in [from, to]: the time between
// the first record at or after `from` and the last at or before `to`, over
// the steps between them, less every interval between two records that
// holds an epoch-end evaluation (it is compute, the same in every run, and
// would only dilute the ratios).
struct Window {
  int64_t first = 0, last = 0;  // the records' steps
  int64_t steps = 0;            // steps counted (the left-out intervals not)
  double seconds_per_step = 0;
};

std::optional<Window> StepSeconds(const Run& r, int64_t from, int64_t to) {
  Window w;
  double seconds = 0;
  const Point* prev = nullptr;
  for (const Point& p : r.train) {
    if (p.step < from || p.step > to) continue;
    if (prev) {
      const bool evaluated = std::any_of(r.epoch_ends.begin(), r.epoch_ends.end(),
                                         [&](int64_t e) { return e >= prev->step && e < p.step; });
      if (!evaluated) {
        seconds += p.time - prev->time;
        w.steps += p.step - prev->step;
      }
    } else {
      w.first = p.step;
    }
    w.last = p.step;
    prev = &p;
  }
  if (w.steps <= 0) return std::nullopt;
  w.seconds_per_step = seconds / static_cast<double>(w.steps);
  return w;
}

// The first step logged at or after unix time `t`; -1 if none was.
int64_t StepAt(const Run& r, double t) {
  for (const Point& p : r.train) {
    if (p.time >= t) return p.step;
  }
  return -1;
}

std::optional<double> Num(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

nlohmann::json OrNull(std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

std::string Cell(std::optional<double> v, const char* format) {
  if (!v) return "-";
  return fmt::format(fmt::runtime(format), *v);
}

// Worker `index`'s host from summary.json's placement ("a2 (zone-a)"), "" if absent.
std::string HostOfWorker(const nlohmann::json& summary, int index) {
  if (!summary.contains("placement") || !summary["placement"].is_object()) return "";
  for (const auto& slot : summary["placement"].value("slots", nlohmann::json::array())) {
    if (slot.is_object() && slot.value("index", -1) == index && slot.value("role", "worker") == "worker") {
      return slot.value("host", "") + " (" + slot.value("zone", "") + ")";
    }
  }
  return "";
}

nlohmann::json RunJson(const Run& r, int64_t fault_step, int64_t log_every) {
  nlohmann::json j = {{"out", r.out},
                      {"wall_seconds", OrNull(Num(r.summary, "launcher_wall_seconds"))},
                      {"steps", OrNull(Num(r.summary, "steps"))},
                      {"final_test_accuracy", OrNull(Num(r.summary, "final_test_accuracy"))},
                      {"worker_1_host", HostOfWorker(r.summary, kSlowWorker)}};
  if (r.summary.contains("placement") && r.summary["placement"].is_object()) {
    j["placement_mode"] = r.summary["placement"].value("mode", "");
    if (r.summary["placement"].contains("fallback_reason")) {
      j["placement_fallback_reason"] = r.summary["placement"]["fallback_reason"];
    }
  }
  const auto pre = StepSeconds(r, log_every, fault_step);
  j["pre_fault_step_seconds"] = pre ? nlohmann::json(pre->seconds_per_step) : nlohmann::json();
  if (r.fault) j["fault"] = {{"step", r.fault->step}, {"time", r.fault->time}};
  j["migrations"] = r.summary.value("migrations", nlohmann::json::array());
  j["generations"] =
      r.summary.contains("generations") && r.summary["generations"].is_array() ? r.summary["generations"].size() : 0;
  nlohmann::json series = nlohmann::json::array();
  const double t0 = r.train.front().time;
  for (const Point& p : r.train) series.push_back({p.step, p.time - t0});
  j["train_records"] = series;  // [step, seconds since the first record]
  return j;
}

// The numbers of one round from its three runs.
nlohmann::json RoundResult(const MigrateArgs& a, int64_t steps, const Run& clean, const Run& stay, const Run& move) {
  const int64_t planned = FaultStep(steps);
  nlohmann::json r = {{"clean", RunJson(clean, planned, a.log_every)},
                      {"stay", RunJson(stay, planned, a.log_every)},
                      {"move", RunJson(move, planned, a.log_every)}};
  const auto wall = [](const Run& x) { return Num(x.summary, "launcher_wall_seconds"); };
  if (wall(clean) && wall(stay)) r["stay_lost_seconds"] = *wall(stay) - *wall(clean);
  if (wall(clean) && wall(move)) r["move_lost_seconds"] = *wall(move) - *wall(clean);
  r["fault_step"] = move.fault ? move.fault->step : stay.fault ? stay.fault->step : planned;
  if (!stay.fault) r["stay_problem"] = "the slow_host fault did not fire in the stay run";
  if (!move.fault) r["move_problem"] = "the slow_host fault did not fire in the move run";
  // What the launcher did without a fault: a move there is a false alarm.
  int64_t clean_moves = 0, clean_skipped = 0;
  for (const auto& m : clean.summary.value("migrations", nlohmann::json::array())) {
    (m.is_object() && m.value("outcome", "") == "skipped" ? clean_skipped : clean_moves) += 1;
  }
  r["clean_migrations"] = clean_moves;
  r["clean_migrations_skipped"] = clean_skipped;

  // The check: stay against clean after the fault.
  {
    const int64_t from = (stay.fault ? stay.fault->step : planned) + kStaySkip;
    const auto s = StepSeconds(stay, from, steps), c = StepSeconds(clean, from, steps);
    r["stay_window"] = {from, steps};
    r["stay_step_seconds"] = s ? nlohmann::json(s->seconds_per_step) : nlohmann::json();
    r["clean_step_seconds_stay_window"] = c ? nlohmann::json(c->seconds_per_step) : nlohmann::json();
    if (s && c && s->steps >= kMinWindow && c->steps >= kMinWindow) {
      r["stay_vs_clean_step_seconds"] = s->seconds_per_step / c->seconds_per_step;
    } else {
      r["stay_vs_clean_step_seconds"] = nullptr;
      r["stay_window_problem"] = fmt::format("fewer than {} steps logged in steps {}-{}", kMinWindow, from, steps);
    }
  }

  // The move: the first "moved" entry of summary.json's migrations.
  nlohmann::json migration;
  int64_t moved = 0;
  for (const auto& m : move.summary.value("migrations", nlohmann::json::array())) {
    if (m.is_object() && m.value("outcome", "") == "moved" && moved++ == 0) migration = m;
  }
  r["migration"] = migration;
  r["moves"] = moved;
  if (migration.is_null()) {
    r["move_vs_clean_throughput"] = nullptr;
    r["move_problem"] =
        move.migration_notices.empty()
            ? std::string(
                  "no move: summary.json's migrations has no \"moved\" entry, and the "
                  "launcher said nothing about a migration")
            : "no move: summary.json's migrations has no \"moved\" entry; the launcher said: " + move.migration_notices;
    return r;
  }
  for (const char* key : {"warm_seconds", "member_seconds", "seconds", "at_seconds", "step"}) {
    r["move_" + std::string(key)] = OrNull(Num(migration, key));
  }
  if (move.fault && move.move_start) r["fault_to_move_start_seconds"] = *move.move_start - move.fault->time;
  if (move.fault && move.move_start && *move.move_start < move.fault->time) {
    // A false alarm: the launcher moved a worker off a host that was still
    // healthy (then the fault hit a host no member was on). Not the move
    // this bench measures.
    r["move_vs_clean_throughput"] = nullptr;
    r["move_problem"] = fmt::format("a false alarm: the move started {:.1f} s before the fault ({})",
                                    move.fault->time - *move.move_start, migration.value("reason", "?"));
    return r;
  }
  const std::optional<double> first_done =
      move.moves_done.empty() ? std::nullopt : std::optional<double>(move.moves_done.front());
  if (move.fault && first_done) r["fault_to_move_done_seconds"] = *first_done - move.fault->time;
  const int64_t first_done_step = first_done ? StepAt(move, *first_done) : -1;
  r["move_done_by_step"] = first_done_step >= 0 ? nlohmann::json(first_done_step) : nlohmann::json();
  // The job between the fault and the move's end: what the move saved it from.
  if (move.fault && first_done_step > move.fault->step) {
    const auto degraded = StepSeconds(move, move.fault->step, first_done_step);
    r["move_degraded_step_seconds"] = degraded ? nlohmann::json(degraded->seconds_per_step) : nlohmann::json();
  }
  // The window starts after the last move (more than one: the launcher
  // moved again, and each move costs the job a re-form).
  const int64_t done_step = move.moves_done.empty() ? -1 : StepAt(move, move.moves_done.back());
  r["last_move_done_by_step"] = done_step >= 0 ? nlohmann::json(done_step) : nlohmann::json();
  if (done_step < 0) {
    r["move_vs_clean_throughput"] = nullptr;
    r["move_problem"] = "the move was done after the last train record (no step to measure after it)";
    return r;
  }
  const int64_t from = std::max<int64_t>(2 * steps / 3, done_step + kAfterMoveSkip);
  const auto m = StepSeconds(move, from, steps), c = StepSeconds(clean, from, steps);
  r["move_window"] = {from, steps};
  r["move_step_seconds"] = m ? nlohmann::json(m->seconds_per_step) : nlohmann::json();
  r["clean_step_seconds_move_window"] = c ? nlohmann::json(c->seconds_per_step) : nlohmann::json();
  if (m && c && m->steps >= kMinWindow && c->steps >= kMinWindow) {
    r["move_vs_clean_throughput"] = c->seconds_per_step / m->seconds_per_step;
  } else {
    r["move_vs_clean_throughput"] = nullptr;
    r["move_problem"] =
        fmt::format("the move was done by step {}: fewer than {} steps logged after it (steps {}-{}); run more --steps",
                    done_step, kMinWindow, from, steps);
  }
  return r;
}

// The median of `key` over the rounds that have it; nullopt if none has.
std::optional<double> MedianOver(const nlohmann::json& rounds, const char* key) {
  std::vector<double> v;
  for (const auto& r : rounds) {
    if (auto x = Num(r, key)) v.push_back(*x);
  }
  if (v.empty()) return std::nullopt;
  return Median(v);
}

std::optional<double> MedianOfRun(const nlohmann::json& rounds, const char* run, const char* key) {
  std::vector<double> v;
  for (const auto& r : rounds) {
    if (r.contains(run)) {
      if (auto x = Num(r[run], key)) v.push_back(*x);
    }
  }
  if (v.empty()) return std::nullopt;
  return Median(v);
}

// ------------------------------------------------------------------ main

Status CheckArgs(const MigrateArgs& a, int64_t steps) {
  if (steps < kMinSteps) {
    return InvalidArgument(fmt::format(
        "--steps {}: at least {} (the fault hits at a third of the steps, and both windows after it need {} steps)",
        steps, kMinSteps, kMinWindow));
  }
  if (a.workers < 2 || a.workers > kHostCount - 1) {
    return InvalidArgument(
        fmt::format("--workers {}: 2..{} (worker {} is the one moved, and the {} hosts need one "
                    "free for the migrant)",
                    a.workers, kHostCount - 1, kSlowWorker, kHostCount));
  }
  if (a.model != "cnn" && a.model != "mlp") return InvalidArgument("--model " + a.model + ": cnn or mlp");
  if (a.factor < 2 || a.factor > 1000) return InvalidArgument(fmt::format("--factor {}: 2..1000", a.factor));
  if (a.delay_ms < 0 || a.delay_ms > 10000) return InvalidArgument(fmt::format("--delay-ms {}: 0..10000", a.delay_ms));
  if (a.log_every < 1 || a.log_every > steps / 6) {
    return InvalidArgument(fmt::format("--log-every {}: 1..{} (steps / 6)", a.log_every, steps / 6));
  }
  std::error_code ec;
  for (const char* f : {"train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"}) {
    if (!std::filesystem::exists(a.data_dir + "/" + f, ec)) {
      return NotFound(a.data_dir + "/" + f + ": no such file (--data: the Fashion-MNIST directory)");
    }
  }
  return Status::Ok();
}

Status RunMigrate(MigrateArgs a) {
  const int64_t steps = a.steps > 0 ? a.steps : a.quick ? kQuickSteps : kFullSteps;
  const int rounds = static_cast<int>(a.rounds > 0 ? a.rounds : a.quick ? 1 : 3);
  TENAX_RETURN_IF_ERROR(CheckArgs(a, steps));
  TENAX_ASSIGN_OR_RETURN(std::string tenax_bin, FindProgram("tenax"));

  // Where the runs go: --work-dir (kept), else a scratch directory (removed).
  std::optional<ScratchDir> scratch;
  std::string work = a.work_dir;
  if (a.reread && work.empty()) return InvalidArgument("--reread needs --work-dir (the runs to report)");
  if (work.empty()) {
    TENAX_ASSIGN_OR_RETURN(ScratchDir s, ScratchDir::Create("tenax-bench-migrate"));
    work = s.path();
    scratch.emplace(std::move(s));
  } else if (!a.reread) {
    std::error_code ec;
    if (std::filesystem::exists(work, ec) && !std::filesystem::is_empty(work, ec)) {
      return InvalidArgument("--work-dir " + work + ": not empty (each run writes its own directory there)");
    }
    TENAX_RETURN_IF_ERROR(EnsureWritableDir(work));
  }
  UseFreshSecret();

  const int64_t fault_step = FaultStep(steps);
  std::printf(
      "migrate: %lld workers, %s, %lld steps of batch %lld per worker, SGD lr %g momentum 0.9, flat ring allreduce\n"
      "topology: a1 a2 a3 in zone-a, b1 b2 b3 in zone-b, one slot each; same zone 0.05 ms 4 Gbit/s, across 1 ms "
      "0.2 Gbit/s; network-aware placement\n"
      "fault (stay, move): at step %lld worker %d's host is slowed for the rest of the job: every link x%g delay "
      "+ %g ms one way, bandwidth / %g\n"
      "%d round(s) of clean, stay (placement.migrate = false) and move (placement.migrate = true: a link with a "
      "round trip > 10 ms%s moves a worker); runs in %s\n",
      static_cast<long long>(a.workers), a.model.c_str(), static_cast<long long>(steps),
      static_cast<long long>(a.batch_size), a.lr, static_cast<long long>(fault_step), kSlowWorker, a.factor, a.delay_ms,
      a.factor, rounds, a.migrate_max_loss < 1 ? fmt::format(" or a loss > {:g}", a.migrate_max_loss).c_str() : "",
      scratch ? "a temporary directory (--work-dir keeps them)" : work.c_str());
  std::fflush(stdout);

  const auto bench_start = std::chrono::steady_clock::now();
  nlohmann::json round_results = nlohmann::json::array();
  std::vector<std::string> failures;
  for (int round = 0; round < rounds; ++round) {
    const std::string dir = work + "/round-" + std::to_string(round + 1);
    const std::string tag = rounds > 1 ? fmt::format(" (round {}/{})", round + 1, rounds) : "";
    // ABBA: a steady drift of the machine's speed does not favour one run.
    std::vector<Kind> order = {Kind::kClean, Kind::kStay, Kind::kMove};
    if (round % 2 == 1) std::reverse(order.begin(), order.end());
    std::map<Kind, Run> runs;
    bool failed = false;
    for (Kind k : order) {
      if (StopRequested()) return Cancelled("benchmark stopped");
      spdlog::info("{}{} ...", Name(k), tag);
      const auto t0 = std::chrono::steady_clock::now();
      auto r = a.reread ? ReadRun(Name(k), dir + "/" + Name(k)) : RunOne(a, tenax_bin, dir, k, steps);
      if (!r.ok()) {
        if (r.status().code() == StatusCode::kCancelled) return r.status();
        failures.push_back(std::string(Name(k)) + tag + ": " + r.status().message());
        spdlog::error("{}", failures.back());
        failed = true;
        continue;
      }
      spdlog::info("{}{}: {:.1f} s", Name(k), tag,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      runs.emplace(k, std::move(*r));
    }
    if (failed) {
      round_results.push_back({{"round", round + 1}, {"failed", true}});
      continue;
    }
    nlohmann::json rr = RoundResult(a, steps, runs.at(Kind::kClean), runs.at(Kind::kStay), runs.at(Kind::kMove));
    rr["round"] = round + 1;
    if (rr.contains("move_problem")) spdlog::warn("move{}: {}", tag, rr["move_problem"].get<std::string>());
    if (rr["clean_migrations"].get<int64_t>() > 0 || rr["clean_migrations_skipped"].get<int64_t>() > 0) {
      spdlog::warn("clean{}: the launcher judged a link degraded in the run without a fault: {}", tag,
                   runs.at(Kind::kClean).summary["migrations"].dump());
    }
    if (rr.value("moves", int64_t{0}) > 1) {
      spdlog::warn("move{}: the launcher moved {} times: {}", tag, rr["moves"].get<int64_t>(),
                   runs.at(Kind::kMove).summary["migrations"].dump());
    }
    round_results.push_back(rr);
  }
  const double bench_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - bench_start).count();

  // Medians over the rounds (one round: its numbers).
  const auto stay_ratio = MedianOver(round_results, "stay_vs_clean_step_seconds");
  const auto move_ratio = MedianOver(round_results, "move_vs_clean_throughput");
  nlohmann::json medians = {
      {"clean_wall_seconds", OrNull(MedianOfRun(round_results, "clean", "wall_seconds"))},
      {"stay_wall_seconds", OrNull(MedianOfRun(round_results, "stay", "wall_seconds"))},
      {"move_wall_seconds", OrNull(MedianOfRun(round_results, "move", "wall_seconds"))},
      {"stay_lost_seconds", OrNull(MedianOver(round_results, "stay_lost_seconds"))},
      {"move_lost_seconds", OrNull(MedianOver(round_results, "move_lost_seconds"))},
      {"clean_pre_fault_step_seconds", OrNull(MedianOfRun(round_results, "clean", "pre_fault_step_seconds"))},
      {"stay_pre_fault_step_seconds", OrNull(MedianOfRun(round_results, "stay", "pre_fault_step_seconds"))},
      {"move_pre_fault_step_seconds", OrNull(MedianOfRun(round_results, "move", "pre_fault_step_seconds"))},
      {"stay_step_seconds", OrNull(MedianOver(round_results, "stay_step_seconds"))},
      {"clean_step_seconds_stay_window", OrNull(MedianOver(round_results, "clean_step_seconds_stay_window"))},
      {"move_degraded_step_seconds", OrNull(MedianOver(round_results, "move_degraded_step_seconds"))},
      {"move_step_seconds", OrNull(MedianOver(round_results, "move_step_seconds"))},
      {"clean_step_seconds_move_window", OrNull(MedianOver(round_results, "clean_step_seconds_move_window"))},
      {"stay_vs_clean_step_seconds", OrNull(stay_ratio)},
      {"move_vs_clean_throughput", OrNull(move_ratio)},
      {"move_step", OrNull(MedianOver(round_results, "move_step"))},
      {"move_done_by_step", OrNull(MedianOver(round_results, "move_done_by_step"))},
      {"move_warm_seconds", OrNull(MedianOver(round_results, "move_warm_seconds"))},
      {"move_member_seconds", OrNull(MedianOver(round_results, "move_member_seconds"))},
      {"fault_to_move_start_seconds", OrNull(MedianOver(round_results, "fault_to_move_start_seconds"))},
      {"fault_to_move_done_seconds", OrNull(MedianOver(round_results, "fault_to_move_done_seconds"))}};

  // The table.
  auto m = [&](const char* key) { return Num(medians, key); };
  std::printf("\n%-6s %8s %8s %18s %22s %22s\n", "run", "wall s", "lost s", "pre-fault s/step", "after fault s/step",
              "after move s/step");
  std::printf("%-6s %8s %8s %18s %22s %22s\n", "clean", Cell(m("clean_wall_seconds"), "{:.1f}").c_str(), "",
              Cell(m("clean_pre_fault_step_seconds"), "{:.4f}").c_str(),
              Cell(m("clean_step_seconds_stay_window"), "{:.4f}").c_str(),
              Cell(m("clean_step_seconds_move_window"), "{:.4f}").c_str());
  std::printf("%-6s %8s %8s %18s %22s %22s\n", "stay", Cell(m("stay_wall_seconds"), "{:.1f}").c_str(),
              Cell(m("stay_lost_seconds"), "{:+.1f}").c_str(), Cell(m("stay_pre_fault_step_seconds"), "{:.4f}").c_str(),
              Cell(m("stay_step_seconds"), "{:.4f}").c_str(), "");
  std::printf("%-6s %8s %8s %18s %22s %22s\n", "move", Cell(m("move_wall_seconds"), "{:.1f}").c_str(),
              Cell(m("move_lost_seconds"), "{:+.1f}").c_str(), Cell(m("move_pre_fault_step_seconds"), "{:.4f}").c_str(),
              (Cell(m("move_degraded_step_seconds"), "{:.4f}") + " (to the move)").c_str(),
              Cell(m("move_step_seconds"), "{:.4f}").c_str());
  for (const auto& r : round_results) {
    const std::string tag = rounds > 1 ? fmt::format("round {}: ", r["round"].get<int>()) : "";
    if (r.value("failed", false)) {
      std::printf("%sa run failed (below)\n", tag.c_str());
      continue;
    }
    std::printf("%swindows: after the fault steps %s-%s, after the move steps %s-%s; fault at step %s\n", tag.c_str(),
                r["stay_window"][0].dump().c_str(), r["stay_window"][1].dump().c_str(),
                r.contains("move_window") ? r["move_window"][0].dump().c_str() : "-",
                r.contains("move_window") ? r["move_window"][1].dump().c_str() : "-", r["fault_step"].dump().c_str());
    const nlohmann::json& mig = r["migration"];
    if (mig.is_object()) {
      std::printf(
          "%smove: %s %s -> %s (%s) by %s: started at step %s, %s s after the fault; migrant warm after %s s, a "
          "member after %s s; done by step %s (%s s after the fault)\n",
          tag.c_str(), mig.value("member", "?").c_str(), mig.value("from", "?").c_str(), mig.value("to", "?").c_str(),
          mig.value("reason", "?").c_str(), mig.value("migrant", "?").c_str(), Cell(Num(mig, "step"), "{:.0f}").c_str(),
          Cell(Num(r, "fault_to_move_start_seconds"), "{:.1f}").c_str(),
          Cell(Num(mig, "warm_seconds"), "{:.1f}").c_str(), Cell(Num(mig, "member_seconds"), "{:.1f}").c_str(),
          Cell(Num(r, "move_done_by_step"), "{:.0f}").c_str(),
          Cell(Num(r, "fault_to_move_done_seconds"), "{:.1f}").c_str());
    }
    if (r.contains("move_problem"))
      std::printf("%smove: %s\n", tag.c_str(), r["move_problem"].get<std::string>().c_str());
    if (r.value("moves", int64_t{0}) > 1) {
      std::printf("%smove: the launcher moved %lld times (the window starts after the last move, done by step %s)\n",
                  tag.c_str(), static_cast<long long>(r["moves"].get<int64_t>()),
                  Cell(Num(r, "last_move_done_by_step"), "{:.0f}").c_str());
    }
    if (r["clean_migrations"].get<int64_t>() > 0 || r["clean_migrations_skipped"].get<int64_t>() > 0) {
      std::printf("%sclean: without a fault the launcher judged a link degraded: %lld move(s), %lld skipped\n",
                  tag.c_str(), static_cast<long long>(r["clean_migrations"].get<int64_t>()),
                  static_cast<long long>(r["clean_migrations_skipped"].get<int64_t>()));
    }
  }

  // The validity check and the target.
  nlohmann::json checks = nlohmann::json::array(), targets = nlohmann::json::array();
  const bool valid = stay_ratio && *stay_ratio >= kStayCheck;
  // More than one round: the seconds are medians, the ratio the median of the rounds' own.
  const std::string of_rounds = rounds > 1 ? " (median of the rounds' ratios)" : "";
  {
    const std::string text =
        stay_ratio
            ? fmt::format("stay's seconds per step >= {:.0f}x clean's after the fault: {:.4f} / {:.4f} s = {:.2f}x{}",
                          kStayCheck, m("stay_step_seconds").value_or(0),
                          m("clean_step_seconds_stay_window").value_or(0), *stay_ratio, of_rounds)
            : fmt::format("stay's seconds per step >= {:.0f}x clean's after the fault: not measured", kStayCheck);
    std::printf("check (scenario valid): %s: %s\n", text.c_str(), valid ? "valid" : "NOT VALID");
    checks.push_back({{"name", "stay_at_least_2x_slower_per_step"},
                      {"value", OrNull(stay_ratio)},
                      {"limit", kStayCheck},
                      {"met", valid},
                      {"text", text}});
  }
  {
    const bool met = move_ratio && *move_ratio >= kMoveTarget;
    const std::string text =
        move_ratio
            ? fmt::format(
                  "throughput after the move >= {:.1f}x clean's over the same steps: {:.4f} / {:.4f} s per "
                  "step = {:.3f}x{}",
                  kMoveTarget, m("clean_step_seconds_move_window").value_or(0), m("move_step_seconds").value_or(0),
                  *move_ratio, of_rounds)
            : fmt::format("throughput after the move >= {:.1f}x clean's: not measured (no move, or no steps after it)",
                          kMoveTarget);
    std::printf("target: %s: %s\n", text.c_str(), met ? "met" : "MISSED");
    targets.push_back({{"name", "move_throughput_at_least_0_9x_clean"},
                       {"value", OrNull(move_ratio)},
                       {"limit", kMoveTarget},
                       {"met", met},
                       {"text", text}});
  }
  std::printf("wall time: %.1f s\n", bench_wall);
  std::fflush(stdout);

  nlohmann::json hosts = nlohmann::json::array();
  for (const Host& h : kHosts) hosts.push_back({{"name", h.name}, {"zone", h.zone}, {"slots", 1}});
  const nlohmann::json report = {{"benchmark", "migrate"},
                                 {"quick", a.quick},
                                 {"model", a.model},
                                 {"workers", a.workers},
                                 {"steps", steps},
                                 {"batch_size_per_worker", a.batch_size},
                                 {"global_batch_size", a.batch_size * a.workers},
                                 {"optimizer", "sgd"},
                                 {"lr", a.lr},
                                 {"momentum", 0.9},
                                 {"allreduce", "ring"},
                                 {"log_every_steps", a.log_every},
                                 {"topology",
                                  {{"mode", "auto"},
                                   {"hosts", hosts},
                                   {"same_zone", {{"delay_ms", 0.05}, {"bandwidth_gbps", 4}}},
                                   {"cross_zone", {{"delay_ms", 1.0}, {"bandwidth_gbps", 0.2}}}}},
                                 {"placement",
                                  {{"policy", "network_aware"},
                                   {"probe_seconds", 2},
                                   {"link_half_life_seconds", 2},
                                   {"migrate_max_rtt_ms", 10},
                                   {"migrate_min_gbps", 0},
                                   {"migrate_max_loss", a.migrate_max_loss}}},
                                 {"fault",
                                  {{"action", "slow_host"},
                                   {"worker", kSlowWorker},
                                   {"factor", a.factor},
                                   {"delay_ms", a.delay_ms},
                                   {"seconds", 3600},
                                   {"at_step", fault_step}}},
                                 {"rounds", rounds},
                                 {"round_results", round_results},
                                 {"medians", medians},
                                 {"checks", checks},
                                 {"targets", targets},
                                 {"scenario_valid", valid},
                                 {"wall_seconds", bench_wall},
                                 {"failures", failures}};
  TENAX_RETURN_IF_ERROR(WriteJsonReport(a.json_path, report));
  if (!failures.empty()) {
    std::string msg = std::to_string(failures.size()) + " run(s) failed";
    for (const auto& f : failures) msg += "; " + f;
    if (scratch) msg += " (--work-dir DIR keeps the runs' output)";
    return Unavailable(msg);
  }
  if (!valid) {
    return Internal(
        "the scenario is not valid: the run that does not move is not >= 2x slower per step than the "
        "clean run (see the check above); the target's number means nothing");
  }
  return Status::Ok();
}

}  // namespace

void AddMigrateBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<MigrateArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "migrate",
      "Moving a live worker off a degraded host: on a 2-zone emulated topology, worker 1's host gets 20 ms added and "
      "a tenth of its bandwidth at a third of the steps; throughput after the move (placement.migrate) against a run "
      "that never had the bad link, and a run that does not move (must be >= 2x slower per step: the scenario check)",
      fmt::format("{} steps instead of {} (3 runs, about 1.5 minutes on 2 cores; the full run about 3 per round)", kQuickSteps,
                  kFullSteps),
      a->quick, a->json_path, [a] { return RunMigrate(*a); }, exit_code);
  cmd->footer(
      "Measured: seconds per step from each run's metrics.jsonl (the train records' times, epoch-end evaluations "
      "left out). Target: the move run's throughput over [max(2/3 of the steps, the move's end + 20), end] >= 0.9x the "
      "clean run's over the same steps. Check (the scenario is valid, not a target): the stay run's seconds per step "
      "over [fault + 50, end] >= 2x clean's. Also: the move's warm and member seconds, the fault's step, each run's "
      "wall time and the seconds lost (stay - clean, move - clean). Exit status: 0 whether the target is met or "
      "not, 1 when the scenario check fails, 2 bad flags, 3 a run failed. The runs get a fresh cluster secret in "
      "$TENAX_SECRET.");
  cmd->add_option("--steps", a->steps,
                  fmt::format("Optimizer steps per run, >= {} (default {} quick, {} full); the fault hits at a third",
                              kMinSteps, kQuickSteps, kFullSteps));
  cmd->add_option("--rounds", a->rounds, "Rounds of the three runs, in ABBA order; medians over them (default 3, --quick 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{100}));
  cmd->add_option("--workers", a->workers, "Workers of the job (2..5; worker 1 is slowed and moved)")
      ->capture_default_str();
  cmd->add_option("--model", a->model, "mlp or cnn")->capture_default_str();
  cmd->add_option("--batch-size", a->batch_size, "Samples per step per worker")
      ->check(CLI::Range(int64_t{1}, int64_t{15000}))
      ->capture_default_str();
  cmd->add_option("--lr", a->lr, "SGD learning rate (momentum 0.9)")
      ->check(CLI::Range(1e-9, 10.0))
      ->capture_default_str();
  cmd->add_option("--factor", a->factor, "The slowed host's links: delay x this, bandwidth / this (2..1000)")
      ->capture_default_str();
  cmd->add_option("--delay-ms", a->delay_ms, "The slowed host's links: one-way milliseconds added")
      ->capture_default_str();
  cmd->add_option("--migrate-max-loss", a->migrate_max_loss,
                  "placement.migrate_max_loss of the clean and move runs (0..1; 1, tenax's default, judges no loss): "
                  "the fault adds no loss, and the probes count a ping later than twice the median + 1 ms as lost, "
                  "which a loaded machine's scheduling does (0.07-0.21 seen)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--work-dir", a->work_dir,
                  "Empty or new directory for the runs' job files and outputs, kept (default: a temporary directory, "
                  "removed at the end)");
  cmd->add_option("--data", a->data_dir, "Fashion-MNIST directory")->capture_default_str();
  cmd->add_option("--timeout", a->timeout_seconds, "Time limit of one run, seconds")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}))
      ->capture_default_str();
  cmd->add_option("--log-every", a->log_every, "log.every_steps of the runs")->group("");
  cmd->add_flag("--reread", a->reread, "Report the runs already in --work-dir (same flags), run nothing")->group("");
}

}  // namespace tenax::bench

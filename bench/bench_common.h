// What every benchmark of tenax-bench repeats: where its programs and files
// are, the peer processes of a run (started, read, waited for with a
// deadline, stopped), a fresh secret, a scratch directory, the --quick and
// --json flags, and the JSON report. The drivers (train_single_bench.cc,
// train_bench.cc, allreduce_bench.cc, transport_bench.cc, elastic_bench.cc)
// keep only what they measure.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "median.h"
#include "tenax/core/deadline.h"
#include "tenax/core/status.h"
#include "tenax/data/fashion_mnist.h"

namespace tenax::bench {

using Seconds = std::chrono::duration<double>;

// ------------------------------------------------------ programs and files

// The running tenax-bench (/proc/self/exe), for starting its own hidden
// subcommands as peer processes.
Result<std::string> SelfExe();

// A loopback port nobody listens on right now (for a peer's rendezvous:
// PyTorch DDP, torchrun).
Result<int> FreePort();

// The build puts tenax-bench next to the tenax binary, with its peer programs
// beside it and the scripts and data files it reads in bench-files/ there.
// <dir of tenax-bench>/bench-files/<name> (a default shown in --help).
std::string BenchFile(const std::string& name);

// Replaces this process with `python script args...` (a bench whose
// measuring is a Python driver); returns only when that cannot start.
Status ExecPython(const std::string& python, const std::vector<std::string>& script_and_args);

// `override_path` if not empty, else the program `name` next to tenax-bench;
// NotFound naming the path, the CMake target `name` and `flag` (if any) when
// it is not executable.
Result<std::string> FindProgram(const std::string& name, const std::string& override_path = "",
                                const std::string& flag = "");

// Ok if `program` is an executable path, or a name found in $PATH; NotFound
// naming `flag` otherwise.
Status CheckOnPath(const std::string& program, const std::string& flag);

// ------------------------------------------------------- run environment

// Puts a fresh random secret (32 hex digits from the OS CSPRNG) into
// $TENAX_SECRET, where this process's Nodes and its children's find it: the
// environment, because other users can read argv.
void UseFreshSecret();

// Gives every process started after it (both sides of a benchmark alike) the
// OpenBLAS kernels this CPU's flags support, where the OpenBLAS loaded here
// fell back below them (tenax/core/blas_kernels.h: a CPU model OpenBLAS does
// not know runs its SSE3 kernels, several times slower): sets
// OPENBLAS_CORETYPE unless `keep` or the caller set it. Returns what the runs
// use and why, for the report.
std::string ChooseBlasCoreForBothSides(bool keep);

// A new private directory under the system's temp directory, removed with its
// contents when the owner goes out of scope (on every way out of a run).
class ScratchDir {
 public:
  static Result<ScratchDir> Create(const std::string& prefix);
  ScratchDir(ScratchDir&& other) noexcept;
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ~ScratchDir();
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// ------------------------------------------------------- peer processes

// The processes of one benchmark run. Each child's stdout is read by its own
// thread, so no child blocks on a full pipe while the caller measures or
// waits; stderr is inherited, so the peers' diagnostics reach the user.
// Every wait has a deadline and gives up on a stop signal (SIGINT/SIGTERM,
// see tenax/core/signals.h); a failed wait stops the whole group first.
// Stop (and the destructor) sends SIGTERM to whatever still runs (mpirun
// forwards it to its ranks; SIGKILL would orphan them), waits 3 s, then
// sends SIGKILL, and reaps every child. One thread drives a group.
class PeerGroup {
 public:
  PeerGroup();
  PeerGroup(const PeerGroup&) = delete;
  PeerGroup& operator=(const PeerGroup&) = delete;
  ~PeerGroup();

  // Starts argv[0] (a path, or a name searched in $PATH); `name` labels the
  // child in errors ("gloo rank 1").
  Status Start(const std::string& name, const std::vector<std::string>& argv);

  // The first line child `i` printed that `match` accepts (libraries may
  // print other lines). Fails if the child closes its output first.
  Result<std::string> WaitForLine(size_t i, const std::function<bool(const std::string&)>& match, Deadline deadline);

  // Waits until every child exited 0. A non-zero exit names the child; on a
  // stop signal Cancelled, at the deadline DeadlineExceeded "still running
  // at <limit>".
  Status Wait(Deadline deadline, const std::string& limit = "the time limit");

  // The lines child `i` printed so far (all of them once Wait returned Ok).
  std::vector<std::string> Lines(size_t i);

  // Has child `i` exited (without reaping it)?
  bool Exited(size_t i);

  void Stop();
  // SIGKILL to every child still running, then reaps them: a fault the
  // benchmark injects (a lost machine), not a shutdown.
  void Kill();

 private:
  struct Child;
  void Signal(int signal);          // to every child still running
  void WaitExited(Deadline deadline);  // until every child exited or the deadline
  void Reap();
  std::vector<std::unique_ptr<Child>> children_;
};

// Runs one program to its end and returns its stdout lines; fails as
// PeerGroup::Wait does.
Result<std::vector<std::string>> RunToEnd(const std::string& name, const std::vector<std::string>& argv,
                                          Deadline deadline);

// ----------------------------------------------------------------- report

// The lines that are JSON objects, in order (peers print one result per line
// among whatever their libraries print).
std::vector<nlohmann::json> JsonObjectLines(const std::vector<std::string>& lines);

// Writes `report`, indented, to `path` atomically; nothing if `path` is empty.
Status WriteJsonReport(const std::string& path, const nlohmann::json& report);

// ---------------------------------------------------------------- command

// Registers benchmark `name` under `bench` with the flags every benchmark has
// (--quick, described by `quick_help`, and --json FILE) and, when chosen,
// runs `run` with logging as "bench" and stop handlers installed; a failed
// Status is reported as "tenax bench <name>: error: ..." and sets its exit
// code (cli_app.h). Returns the subcommand for the benchmark's own flags.
CLI::App* AddBenchmark(CLI::App& bench, const std::string& name, const std::string& description,
                       const std::string& quick_help, bool& quick, std::string& json_path, std::function<Status()> run,
                       int& exit_code);

// The flags of the two training comparisons (train-single, train): the same
// model, data and SGD (momentum 0.9) on tenax's side and the PyTorch script's.
struct TrainingFlags {
  std::string model = "cnn";
  int64_t batch_size = 64;  // per process
  double lr = 0.02;
  int64_t rounds = 0;  // 0 = the benchmark's default for --quick or a full run
  std::string data_dir = kDefaultFashionMnistDir;
  std::string python = "/usr/bin/python3";
  std::string script;              // the PyTorch peer
  int64_t timeout_seconds = 3600;  // per run of either side
};
// What the two benchmarks say differently about those flags in --help.
struct TrainingFlagsHelp {
  std::string batch_size;
  int64_t max_batch_size;
  std::string lr, rounds, script, timeout;
};
void AddTrainingFlags(CLI::App& cmd, TrainingFlags& flags, const TrainingFlagsHelp& help);

// One side of a training comparison: `run` trains once and returns the
// steady samples per second.
struct TrainingSide {
  std::string name;     // "tenax", "pytorch", "ddp": also the prefix of its report keys
  std::string details;  // logged when a run starts
  std::function<Result<double>()> run;
  std::vector<double> samples_per_second = {};  // one per round, filled by RunAlternatingRounds
};

// Rounds that alternate the two sides (tenax first) so that drift on a noisy
// machine hits both; stops with Cancelled between runs on a stop signal.
Status RunAlternatingRounds(int64_t rounds, TrainingSide& tenax, TrainingSide& peer);

// The report fields both training comparisons have: the flags, each side's
// rounds and median ("<name>_samples_per_second", "<name>_rounds") and the
// ratio of the medians, tenax over the peer.
nlohmann::json TrainingReport(const std::string& benchmark, bool quick, const TrainingFlags& flags,
                              const TrainingSide& tenax, const TrainingSide& peer);

// Registers the benchmarks (each file defines its own).
void AddTrainSingleBenchmark(CLI::App& bench, int& exit_code);
void AddTrainBenchmark(CLI::App& bench, int& exit_code);
// `allreduce` and its hidden rank `allreduce-rank`.
void AddAllreduceBenchmark(CLI::App& bench, int& exit_code);
// `transport` and its hidden receiver `transport-peer`.
void AddTransportBenchmark(CLI::App& bench, int& exit_code);
// `elastic`: a lost and a new worker, tenax elastic sync vs torchrun.
void AddElasticBenchmark(CLI::App& bench, int& exit_code);
void AddPreemptionBenchmark(CLI::App& bench, int& exit_code);
// `soak`: rounds of jobs under seeded fault plans; nothing lost, duplicated, hung or leaked.
void AddSoakBenchmark(CLI::App& bench, int& exit_code);
// `coord-load`: one coordinator under many simulated members (async leases, elastic generations).
void AddCoordLoadBenchmark(CLI::App& bench, int& exit_code);
void AddStragglersBenchmark(CLI::App& bench, int& exit_code);
void AddEcBenchmark(CLI::App& bench, int& exit_code);
void AddRecoveryBenchmark(CLI::App& bench, int& exit_code);
// `migrate`: a live worker moved off a host whose links degrade (placement.migrate), against a clean run.
void AddMigrateBenchmark(CLI::App& bench, int& exit_code);
// `sched`: network-aware placement against Kubernetes' schedulers (simulated) and one pod's latency.
void AddSchedBenchmark(CLI::App& bench, int& exit_code);
void AddPythonBenchmark(CLI::App& bench, int& exit_code);
void AddGpuBenchmark(CLI::App& bench, int& exit_code);

}  // namespace tenax::bench

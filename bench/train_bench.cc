// tenax bench train: synchronous data-parallel training with 2 workers,
// tenax (`tenax run`: coordinator + 2 worker processes, allreduce over the
// transport) against PyTorch DDP (Gloo backend, 2 processes,
// bench/pytorch_ddp_train.py), on the same model, per-worker batch, data,
// data order, optimizer, epoch and thread count, in the same run. Rounds
// alternate the two so drift on a noisy 2-core machine hits both.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "bench_common.h"
#include "tenax/core/files.h"

namespace tenax::bench {
namespace {

struct TrainArgs {
  bool quick = false;
  std::string json_path;
  TrainingFlags t{.script = BenchFile("pytorch_ddp_train.py")};  // rounds: 0 = 1 with --quick, else 3
  int64_t epochs = 1;
  int64_t warmup_steps = 10;
};

constexpr int kWorkers = 2;

Deadline RoundDeadline(const TrainArgs& a) { return Deadline::After(std::chrono::seconds(a.t.timeout_seconds)); }

Result<nlohmann::json> RunTenax(const TrainArgs& a, const std::string& tenax_bin, const std::string& work) {
  const std::string job = work + "/job.toml", out = work + "/tenax";
  const std::string text = fmt::format(
      "mode = \"sync\"\n[cluster]\nworkers = {}\njob_id = \"bench-train\"\n[data]\ndir = \"{}\"\n"
      "[model]\nname = \"{}\"\n[train]\nepochs = {}\nbatch_size = {}\noptimizer = \"sgd\"\nlr = {}\n"
      "momentum = 0.9\nseed = 1\nthreads = 1\n[log]\nevery_steps = 100\n",
      kWorkers, a.t.data_dir, a.t.model, a.epochs, a.t.batch_size, a.t.lr);
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(job, text));
  auto run = RunToEnd("tenax run", {tenax_bin, "run", job, "--out", out}, RoundDeadline(a));
  if (!run.ok()) return Status(run.status().code(), run.status().message() + "; logs in " + out + "/logs");
  std::ifstream in(out + "/summary.json");
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return Internal(out + "/summary.json unreadable");
  return j;
}

Result<nlohmann::json> RunDdp(const TrainArgs& a) {
  TENAX_ASSIGN_OR_RETURN(int port, FreePort());
  PeerGroup ranks;
  for (int r = 0; r < kWorkers; ++r) {
    TENAX_RETURN_IF_ERROR(ranks.Start("PyTorch DDP rank " + std::to_string(r) + " (" + a.t.script + ")",
                                      {a.t.python,       a.t.script,
                                       "--rank",         std::to_string(r),
                                       "--world",        std::to_string(kWorkers),
                                       "--master-port",  std::to_string(port),
                                       "--model",        a.t.model,
                                       "--batch-size",   std::to_string(a.t.batch_size),
                                       "--threads",      "1",
                                       "--epochs",       std::to_string(a.epochs),
                                       "--lr",           fmt::format("{}", a.t.lr),
                                       "--momentum",     "0.9",
                                       "--seed",         "1",
                                       "--warmup-steps", std::to_string(a.warmup_steps),
                                       "--data",         a.t.data_dir}));
  }
  TENAX_RETURN_IF_ERROR(ranks.Wait(RoundDeadline(a)));
  const std::vector<nlohmann::json> results = JsonObjectLines(ranks.Lines(0));
  if (results.empty() || !results.back().contains("samples_per_second"))
    return Internal("DDP peer printed no JSON result");
  return results.back();
}

Status RunTrain(TrainArgs a) {
  if (a.t.rounds == 0) a.t.rounds = a.quick ? 1 : 3;
  std::error_code ec;
  if (!std::filesystem::exists(a.t.script, ec))
    return NotFound(a.t.script + ": DDP benchmark script not found (--script)");
  TENAX_ASSIGN_OR_RETURN(const std::string tenax_bin, FindProgram("tenax"));
  TENAX_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Create("tenax-bench-train"));
  const std::string details =
      fmt::format("sync, {} workers, {} epoch(s), batch {} per worker", kWorkers, a.epochs, a.t.batch_size);
  nlohmann::json tenax_last, ddp_last;
  TrainingSide tenax{.name = "tenax", .details = details, .run = [&]() -> Result<double> {
                       TENAX_ASSIGN_OR_RETURN(tenax_last, RunTenax(a, tenax_bin, work.path()));
                       spdlog::info("tenax test accuracy {:.4f}", tenax_last["final_test_accuracy"].get<double>());
                       return tenax_last["steady_samples_per_second"].get<double>();
                     }};
  TrainingSide ddp{.name = "ddp", .details = details, .run = [&]() -> Result<double> {
                     TENAX_ASSIGN_OR_RETURN(ddp_last, RunDdp(a));
                     spdlog::info("DDP test accuracy {:.4f}", ddp_last["test_accuracy"].get<double>());
                     return ddp_last["samples_per_second"].get<double>();
                   }};
  TENAX_RETURN_IF_ERROR(RunAlternatingRounds(a.t.rounds, tenax, ddp));

  nlohmann::json result = TrainingReport("train", a.quick, a.t, tenax, ddp);
  const double t = result["tenax_samples_per_second"].get<double>(), d = result["ddp_samples_per_second"].get<double>();
  const double ta = tenax_last["final_test_accuracy"].get<double>(), da = ddp_last["test_accuracy"].get<double>();
  result.update({{"workers", kWorkers},
                 {"batch_size_per_worker", a.t.batch_size},
                 {"epochs", a.epochs},
                 {"threads_per_worker", 1},
                 {"tenax_test_accuracy", ta},
                 {"ddp_test_accuracy", da},
                 {"accuracy_gap_points", (ta - da) * 100}});
  std::printf("%-34s %12s %10s\n", "train (2 workers, sync)", "samples/s", "accuracy");
  std::printf("%-34s %12.0f %10.4f\n", "tenax (tenax run)", t, ta);
  std::printf("%-34s %12.0f %10.4f\n", "pytorch DDP (gloo)", d, da);
  std::printf("ratio tenax/DDP %.3f (target >= 1.2 at equal accuracy within 1 point: gap %.2f points)\n", t / d,
              (ta - da) * 100);
  return WriteJsonReport(a.json_path, result);
}

}  // namespace

void AddTrainBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "train", "Data-parallel training, 2 workers: tenax sync vs PyTorch DDP (Gloo), same model, data and batch",
      "One round instead of three (under 4 minutes)", a->quick, a->json_path, [a] { return RunTrain(*a); }, exit_code);
  AddTrainingFlags(*cmd, a->t,
                   {.batch_size = "Samples per step per worker",
                    .max_batch_size = 30000,
                    .lr = "SGD learning rate (momentum 0.9)",
                    .rounds = "Alternating rounds per side (default 1 quick, 3 full)",
                    .script = "The DDP peer script",
                    .timeout = "Time limit of one run of either side, seconds"});
  cmd->add_option("--epochs", a->epochs, "Epochs per run")
      ->check(CLI::Range(int64_t{1}, int64_t{100}))
      ->capture_default_str();
}

}  // namespace tenax::bench

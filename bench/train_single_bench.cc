// tenax bench train-single: tenax's single-process trainer against PyTorch
// (Debian's python3-torch, bench/pytorch_train_single.py) on the same model,
// batch size, data, optimizer and thread count, in the same run. Rounds
// alternate tenax and PyTorch so drift on a noisy 2-core machine hits both.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "bench_common.h"
#include "tenax/train/single_trainer.h"

namespace tenax::bench {
namespace {

struct TrainSingleArgs {
  bool quick = false;
  std::string json_path;
  TrainingFlags t{.script = BenchFile("pytorch_train_single.py")};  // rounds: 0 = 3 with --quick, else 5
  int64_t threads = 0;
  int64_t steps = 0;  // 0 = 1000 with --quick, else 3000
  int64_t warmup_steps = 20;
};

Result<double> RunTenaxRound(const TrainSingleArgs& a, int64_t threads, const std::string& out_dir) {
  ConfigDoc doc;
  for (const std::string& kv : std::vector<std::string>{
           "model.name=" + a.t.model, "train.batch_size=" + std::to_string(a.t.batch_size),
           "train.lr=" + fmt::format("{}", a.t.lr), "train.momentum=0.9", "train.threads=" + std::to_string(threads),
           "train.max_steps=" + std::to_string(a.steps), "train.optimizer=sgd", "data.test_limit=1000",
           "log.every_steps=100", "data.dir=" + a.t.data_dir}) {
    TENAX_RETURN_IF_ERROR(doc.Override(kv));
  }
  TENAX_ASSIGN_OR_RETURN(TrainConfig config, ParseTrainConfig(doc));
  TrainRunOptions options;
  options.warmup_steps = a.warmup_steps;
  TENAX_ASSIGN_OR_RETURN(TrainOutcome outcome, TrainSingle(config, doc, out_dir, options));
  return outcome.steady_samples_per_second;
}

Result<nlohmann::json> RunPytorchRound(const TrainSingleArgs& a, int64_t threads) {
  const std::vector<std::string> argv = {a.t.python,       a.t.script,
                                         "--model",        a.t.model,
                                         "--batch-size",   std::to_string(a.t.batch_size),
                                         "--lr",           fmt::format("{}", a.t.lr),
                                         "--momentum",     "0.9",
                                         "--threads",      std::to_string(threads),
                                         "--steps",        std::to_string(a.steps),
                                         "--warmup-steps", std::to_string(a.warmup_steps),
                                         "--data",         a.t.data_dir};
  TENAX_ASSIGN_OR_RETURN(
      std::vector<std::string> lines,
      RunToEnd("PyTorch peer (" + a.t.script + ")", argv, Deadline::After(std::chrono::seconds(a.t.timeout_seconds))));
  for (auto& j : JsonObjectLines(lines)) {
    if (j.contains("samples_per_second")) return j;
  }
  return Internal("PyTorch peer printed no JSON result: " + (lines.empty() ? "" : lines[0].substr(0, 200)));
}

Status RunTrainSingle(TrainSingleArgs a) {
  if (a.steps == 0) a.steps = a.quick ? 1000 : 3000;
  if (a.t.rounds == 0) a.t.rounds = a.quick ? 3 : 5;
  if (a.warmup_steps >= a.steps) return InvalidArgument("--warmup-steps must be below --steps");
  const int64_t threads = ResolveThreads(a.threads);
  std::error_code ec;
  if (!std::filesystem::exists(a.t.script, ec))
    return NotFound(a.t.script + ": PyTorch benchmark script not found (--script)");

  TENAX_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Create("tenax-bench"));
  const std::string details = fmt::format("{} steps, batch {}, {} threads", a.steps, a.t.batch_size, threads);
  nlohmann::json torch_info;
  TrainingSide tenax{
      .name = "tenax", .details = details, .run = [&] { return RunTenaxRound(a, threads, work.path()); }};
  TrainingSide torch{.name = "pytorch", .details = details, .run = [&]() -> Result<double> {
                       TENAX_ASSIGN_OR_RETURN(torch_info, RunPytorchRound(a, threads));
                       return torch_info["samples_per_second"].get<double>();
                     }};
  TENAX_RETURN_IF_ERROR(RunAlternatingRounds(a.t.rounds, tenax, torch));

  nlohmann::json result = TrainingReport("train-single", a.quick, a.t, tenax, torch);
  result.update({{"batch_size", a.t.batch_size},
                 {"threads", threads},
                 {"steps", a.steps},
                 {"warmup_steps", a.warmup_steps},
                 {"pytorch_version", torch_info.value("torch_version", "")}});
  const double tenax_median = result["tenax_samples_per_second"].get<double>(),
               torch_median = result["pytorch_samples_per_second"].get<double>();
  std::printf("%-28s %12s\n", "train-single", "samples/s");
  std::printf("%-28s %12.0f\n", "tenax (C++ libtorch)", tenax_median);
  std::printf("%-28s %12.0f\n", "pytorch (python3-torch)", torch_median);
  std::printf("%-28s %12.3f\n", "ratio tenax/pytorch", tenax_median / torch_median);
  return WriteJsonReport(a.json_path, result);
}

}  // namespace

void AddTrainSingleBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<TrainSingleArgs>();
  CLI::App* ts = AddBenchmark(
      bench, "train-single", "Single-process training throughput: tenax vs PyTorch on the same kernels",
      "Fewer steps and rounds (under 3 minutes)", a->quick, a->json_path, [a] { return RunTrainSingle(*a); },
      exit_code);
  AddTrainingFlags(*ts, a->t,
                   {.batch_size = "Samples per step",
                    .max_batch_size = 60000,
                    .lr = "SGD learning rate for both",
                    .rounds = "Alternating rounds per side (default 3 quick, 5 full)",
                    .script = "The PyTorch peer script",
                    .timeout = "Time limit of one PyTorch round, seconds"});
  ts->add_option("--threads", a->threads, "Compute threads for both (0 = one per core)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
  ts->add_option("--steps", a->steps, "Training steps per round (default 1000 quick, 3000 full)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 30));
  ts->add_option("--warmup-steps", a->warmup_steps, "Steps excluded from the throughput")->capture_default_str();
}

}  // namespace tenax::bench

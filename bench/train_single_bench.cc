// tenax bench train-single: tenax's single-process trainer against PyTorch
// (Debian's python3-torch, bench/pytorch_train_single.py) on the same model,
// batch size, data, optimizer and thread count, in the same run. Rounds
// alternate tenax and PyTorch so drift on a noisy 2-core machine hits both.
//
// With accuracy seeds (5 by default in a full run, none with --quick unless
// --accuracy-seeds says so), both sides also train --epochs whole epochs per
// seed from scratch, each its own idiomatic way (tenax: its single mode;
// PyTorch: the script's own seeded init and randperm), and report the test
// accuracy on the whole test set: the mean over the same seeds must agree
// within half a point (accuracy spreads about one point across seeds).
//
// tenax bench train-script: the same single-process training of a TorchScript
// module (model.path) written by PyTorch from examples/own_model/make_model.py,
// against the built-in module of the same architecture: what a user pays for
// bringing their own model.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "bench_common.h"
#include "tenax/core/signals.h"
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
  int64_t accuracy_seeds = -1;  // -1 = 5 in a full run, 0 with --quick
  int64_t epochs = 2;           // per accuracy seed
};

// One tenax training run; `model_path` (a TorchScript file) replaces the
// built-in a.t.model when not empty.
// `seed` > 0: an accuracy run (a.epochs whole epochs, the whole test set).
Result<TrainOutcome> TrainTenax(const TrainSingleArgs& a, int64_t threads, const std::string& out_dir,
                                const std::string& model_path, int64_t seed) {
  ConfigDoc doc;
  const std::string model = model_path.empty() ? "model.name=" + a.t.model : "model.path=" + model_path;
  std::vector<std::string> settings = {model,
                                       "train.batch_size=" + std::to_string(a.t.batch_size),
                                       "train.lr=" + fmt::format("{}", a.t.lr),
                                       "train.momentum=0.9",
                                       "train.threads=" + std::to_string(threads),
                                       "train.optimizer=sgd",
                                       "log.every_steps=100",
                                       "data.dir=" + a.t.data_dir};
  if (seed > 0) {
    settings.insert(settings.end(), {"train.epochs=" + std::to_string(a.epochs), "train.seed=" + std::to_string(seed)});
  } else {
    settings.insert(settings.end(), {"train.max_steps=" + std::to_string(a.steps), "data.test_limit=1000"});
  }
  for (const std::string& kv : settings) TENAX_RETURN_IF_ERROR(doc.Override(kv));
  TENAX_ASSIGN_OR_RETURN(TrainConfig config, ParseTrainConfig(doc));
  TrainRunOptions options;
  options.warmup_steps = a.warmup_steps;
  return TrainSingle(config, doc, out_dir, options);
}

Result<double> RunTenaxRound(const TrainSingleArgs& a, int64_t threads, const std::string& out_dir,
                             const std::string& model_path = "") {
  TENAX_ASSIGN_OR_RETURN(TrainOutcome outcome, TrainTenax(a, threads, out_dir, model_path, 0));
  return outcome.steady_samples_per_second;
}

// `seed` > 0: an accuracy run, as TrainTenax's.
Result<nlohmann::json> RunPytorchRound(const TrainSingleArgs& a, int64_t threads, int64_t seed = 0) {
  std::vector<std::string> argv = {a.t.python,       a.t.script,
                                         "--model",        a.t.model,
                                         "--batch-size",   std::to_string(a.t.batch_size),
                                         "--lr",           fmt::format("{}", a.t.lr),
                                         "--momentum",     "0.9",
                                         "--threads",      std::to_string(threads),
                                         "--steps",        std::to_string(a.steps),
                                         "--warmup-steps", std::to_string(a.warmup_steps),
                                         "--data",         a.t.data_dir};
  if (seed > 0) argv.insert(argv.end(), {"--epochs", std::to_string(a.epochs), "--eval", "--seed", std::to_string(seed)});
  TENAX_ASSIGN_OR_RETURN(
      std::vector<std::string> lines,
      RunToEnd("PyTorch peer (" + a.t.script + ")", argv, Deadline::After(std::chrono::seconds(a.t.timeout_seconds))));
  for (auto& j : JsonObjectLines(lines)) {
    if (j.contains("samples_per_second") && (seed == 0 || j.contains("test_accuracy"))) return j;
  }
  return Internal("PyTorch peer printed no JSON result: " + (lines.empty() ? "" : lines[0].substr(0, 200)));
}

// The defaults of a run and the checks both benchmarks share.
Status Prepare(TrainSingleArgs& a, const std::string& what_script) {
  if (a.steps == 0) a.steps = a.quick ? 1000 : 3000;
  if (a.t.rounds == 0) a.t.rounds = a.quick ? 3 : 5;
  if (a.accuracy_seeds < 0) a.accuracy_seeds = a.quick ? 0 : 5;
  if (a.warmup_steps >= a.steps) return InvalidArgument("--warmup-steps must be below --steps");
  std::error_code ec;
  if (!std::filesystem::exists(a.t.script, ec)) return NotFound(a.t.script + ": " + what_script + " not found (--script)");
  return Status::Ok();
}

// Both sides' test accuracy after a.epochs epochs on seeds 1..accuracy_seeds,
// alternating sides per seed; {} when no seed is asked for.
Result<nlohmann::json> RunAccuracySeeds(const TrainSingleArgs& a, int64_t threads, const std::string& out_dir) {
  if (a.accuracy_seeds == 0) return nlohmann::json::object();
  std::vector<double> tenax, torch;
  for (int64_t seed = 1; seed <= a.accuracy_seeds; ++seed) {
    if (StopRequested()) return Cancelled("stopped by signal " + std::to_string(StopSignal()));
    spdlog::info("accuracy seed {}/{}: tenax, {} epoch(s)", seed, a.accuracy_seeds, a.epochs);
    TENAX_ASSIGN_OR_RETURN(TrainOutcome t, TrainTenax(a, threads, out_dir, "", seed));
    tenax.push_back(t.final_test_accuracy);
    spdlog::info("accuracy seed {}/{}: pytorch, {} epoch(s)", seed, a.accuracy_seeds, a.epochs);
    TENAX_ASSIGN_OR_RETURN(nlohmann::json p, RunPytorchRound(a, threads, seed));
    torch.push_back(p["test_accuracy"].get<double>());
    spdlog::info("seed {}: test accuracy tenax {:.4f}, pytorch {:.4f}", seed, tenax.back(), torch.back());
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  return nlohmann::json{{"epochs", a.epochs},
                        {"seeds", a.accuracy_seeds},
                        {"tenax_test_accuracy", tenax},
                        {"pytorch_test_accuracy", torch},
                        {"tenax_mean", mean(tenax)},
                        {"pytorch_mean", mean(torch)},
                        {"difference_points", 100.0 * (mean(tenax) - mean(torch))}};
}

Status RunTrainSingle(TrainSingleArgs a) {
  TENAX_RETURN_IF_ERROR(Prepare(a, "PyTorch benchmark script"));
  const int64_t threads = ResolveThreads(a.threads);

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
  TENAX_ASSIGN_OR_RETURN(nlohmann::json accuracy, RunAccuracySeeds(a, threads, work.path()));

  nlohmann::json result = TrainingReport("train-single", a.quick, a.t, tenax, torch);
  if (!accuracy.empty()) result["accuracy"] = accuracy;
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
  if (!accuracy.empty()) {
    std::printf("test accuracy after %lld epoch(s), seeds 1..%lld: tenax %.4f, pytorch %.4f (mean), difference %+.2f "
                "points (target: within 0.5)\n",
                static_cast<long long>(a.epochs), static_cast<long long>(a.accuracy_seeds),
                accuracy["tenax_mean"].get<double>(), accuracy["pytorch_mean"].get<double>(),
                accuracy["difference_points"].get<double>());
  }
  return WriteJsonReport(a.json_path, result);
}

Status RunTrainScript(TrainSingleArgs a) {
  if (a.t.model != "cnn") return InvalidArgument("--model: the TorchScript example is the cnn; only cnn compares");
  TENAX_RETURN_IF_ERROR(Prepare(a, "the script that writes the TorchScript model"));
  const int64_t threads = ResolveThreads(a.threads);
  TENAX_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Create("tenax-bench"));
  const std::string module = work.path() + "/cnn_script.pt";
  TENAX_RETURN_IF_ERROR(RunToEnd("TorchScript writer (" + a.t.script + ")", {a.t.python, a.t.script, module},
                                 Deadline::After(std::chrono::seconds(a.t.timeout_seconds)))
                            .status());
  const std::string details = fmt::format("{} steps, batch {}, {} threads", a.steps, a.t.batch_size, threads);
  TrainingSide script{.name = "torchscript",
                      .details = details + ", " + module,
                      .run = [&] { return RunTenaxRound(a, threads, work.path(), module); }};
  TrainingSide builtin{
      .name = "builtin", .details = details, .run = [&] { return RunTenaxRound(a, threads, work.path()); }};
  TENAX_RETURN_IF_ERROR(RunAlternatingRounds(a.t.rounds, script, builtin));

  nlohmann::json result = TrainingReport("train-script", a.quick, a.t, script, builtin);
  result.update({{"batch_size", a.t.batch_size}, {"threads", threads}, {"steps", a.steps},
                 {"warmup_steps", a.warmup_steps}});
  std::printf("%-28s %12s\n", "train-script (cnn)", "samples/s");
  std::printf("%-28s %12.0f\n", "tenax, TorchScript module", result["torchscript_samples_per_second"].get<double>());
  std::printf("%-28s %12.0f\n", "tenax, built-in module", result["builtin_samples_per_second"].get<double>());
  std::printf("ratio torchscript/builtin %.3f (target >= 0.9: within 10%%)\n", result["ratio"].get<double>());
  return WriteJsonReport(a.json_path, result);
}

// The flags both benchmarks take.
void AddSingleProcessFlags(CLI::App& cmd, TrainSingleArgs& a, const std::string& script_help) {
  AddTrainingFlags(cmd, a.t,
                   {.batch_size = "Samples per step",
                    .max_batch_size = 60000,
                    .lr = "SGD learning rate for both",
                    .rounds = "Alternating rounds per side (default 3 quick, 5 full)",
                    .script = script_help,
                    .timeout = "Time limit of one Python run, seconds"});
  cmd.add_option("--threads", a.threads, "Compute threads for both (0 = one per core)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
  cmd.add_option("--steps", a.steps, "Training steps per round (default 1000 quick, 3000 full)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 30));
  cmd.add_option("--warmup-steps", a.warmup_steps, "Steps excluded from the throughput")->capture_default_str();
}

// The accuracy half of train-single.
void AddAccuracyFlags(CLI::App& cmd, TrainSingleArgs& a) {
  cmd.add_option("--accuracy-seeds", a.accuracy_seeds,
                 "Seeds 1..N on which both sides train --epochs epochs and report the test accuracy (default 5; 0 "
                 "with --quick)")
      ->check(CLI::Range(int64_t{0}, int64_t{100}));
  cmd.add_option("--epochs", a.epochs, "Epochs per accuracy seed")->check(CLI::Range(int64_t{1}, int64_t{100}))->capture_default_str();
}

}  // namespace

void AddTrainSingleBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<TrainSingleArgs>();
  CLI::App* ts = AddBenchmark(
      bench, "train-single", "Single-process training throughput: tenax vs PyTorch on the same kernels",
      "Fewer steps and rounds (under 3 minutes)", a->quick, a->json_path, [a] { return RunTrainSingle(*a); },
      exit_code);
  AddSingleProcessFlags(*ts, *a, "The PyTorch peer script");
  AddAccuracyFlags(*ts, *a);

  auto sa = std::make_shared<TrainSingleArgs>();
  sa->t.script = BenchFile("make_model.py");
  CLI::App* tsc = AddBenchmark(
      bench, "train-script",
      "Single-process training throughput of a TorchScript cnn (model.path) vs the built-in cnn, same run",
      "Fewer steps and rounds (under 3 minutes)", sa->quick, sa->json_path, [sa] { return RunTrainScript(*sa); },
      exit_code);
  AddSingleProcessFlags(*tsc, *sa, "The Python script that writes the TorchScript cnn (examples/own_model/make_model.py)");
}

}  // namespace tenax::bench

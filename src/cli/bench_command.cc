// tenax bench train-single: tenax's single-process trainer against PyTorch
// (Debian's python3-torch, bench/pytorch_train_single.py) on the same model,
// batch size, data, optimizer and thread count, in the same run. Rounds
// alternate tenax and PyTorch so drift on a noisy 2-core machine hits both.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "command.h"
#include "tenax/core/files.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/core/subprocess.h"
#include "tenax/train/fashion_mnist.h"
#include "tenax/train/single_trainer.h"

#ifndef TENAX_SOURCE_DIR
#define TENAX_SOURCE_DIR "."
#endif

namespace tenax::cli {
namespace {

struct BenchTrainArgs {
  bool quick = false;
  std::string json_path;
  std::string model = "cnn";
  int64_t batch_size = 64;
  double lr = 0.02;  // SGD, momentum 0.9 on both sides
  int64_t threads = 0;
  int64_t steps = 0;   // 0 = 1000 with --quick, else 3000
  int64_t rounds = 0;  // 0 = 3 with --quick, else 5
  int64_t warmup_steps = 20;
  std::string data_dir = kDefaultFashionMnistDir;
  std::string python = "/usr/bin/python3";
  std::string script = std::string(TENAX_SOURCE_DIR) + "/bench/pytorch_train_single.py";
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Result<double> RunTenaxRound(const BenchTrainArgs& a, int64_t threads, const std::string& out_dir) {
  ConfigDoc doc;
  for (const std::string& kv : std::vector<std::string>{
           "model.name=" + a.model, "train.batch_size=" + std::to_string(a.batch_size),
           "train.lr=" + fmt::format("{}", a.lr), "train.momentum=0.9", "train.threads=" + std::to_string(threads),
           "train.max_steps=" + std::to_string(a.steps), "train.optimizer=sgd", "data.test_limit=1000",
           "log.every_steps=100", "data.dir=" + a.data_dir}) {
    TENAX_RETURN_IF_ERROR(doc.Override(kv));
  }
  TENAX_ASSIGN_OR_RETURN(TrainConfig config, ParseTrainConfig(doc));
  TrainRunOptions options;
  options.warmup_steps = a.warmup_steps;
  TENAX_ASSIGN_OR_RETURN(TrainOutcome outcome, TrainSingle(config, doc, out_dir, options));
  return outcome.steady_samples_per_second;
}

Result<nlohmann::json> RunPytorchRound(const BenchTrainArgs& a, int64_t threads) {
  std::vector<std::string> argv = {a.python,         a.script,
                                   "--model",        a.model,
                                   "--batch-size",   std::to_string(a.batch_size),
                                   "--lr",           fmt::format("{}", a.lr),
                                   "--momentum",     "0.9",
                                   "--threads",      std::to_string(threads),
                                   "--steps",        std::to_string(a.steps),
                                   "--warmup-steps", std::to_string(a.warmup_steps),
                                   "--data",         a.data_dir};
  TENAX_ASSIGN_OR_RETURN(ProcessOutput out, RunAndCapture(argv));
  if (out.exit_code != 0) {
    return Internal("PyTorch peer (" + a.script + ") exited with status " + std::to_string(out.exit_code));
  }
  auto j = nlohmann::json::parse(out.stdout_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("samples_per_second")) {
    return Internal("PyTorch peer printed no JSON result: " + out.stdout_text.substr(0, 200));
  }
  return j;
}

Status RunBenchTrainSingle(BenchTrainArgs a) {
  if (a.steps == 0) a.steps = a.quick ? 1000 : 3000;
  if (a.rounds == 0) a.rounds = a.quick ? 3 : 5;
  if (a.warmup_steps >= a.steps) return InvalidArgument("--warmup-steps must be below --steps");
  const int64_t threads = ResolveThreads(a.threads);
  std::error_code ec;
  if (!std::filesystem::exists(a.script, ec))
    return NotFound(a.script + ": PyTorch benchmark script not found (--script)");

  const std::string work =
      std::filesystem::temp_directory_path().string() + "/tenax-bench-" + std::to_string(::getpid());
  std::vector<double> tenax_sps, torch_sps;
  nlohmann::json torch_info;
  for (int64_t r = 1; r <= a.rounds; ++r) {
    if (StopRequested()) return Cancelled("benchmark stopped");
    spdlog::info("round {}/{}: tenax ({} steps, batch {}, {} threads)", r, a.rounds, a.steps, a.batch_size, threads);
    TENAX_ASSIGN_OR_RETURN(double t, RunTenaxRound(a, threads, work));
    tenax_sps.push_back(t);
    spdlog::info("round {}/{}: tenax {:.0f} samples/s; pytorch ...", r, a.rounds, t);
    TENAX_ASSIGN_OR_RETURN(torch_info, RunPytorchRound(a, threads));
    torch_sps.push_back(torch_info["samples_per_second"].get<double>());
    spdlog::info("round {}/{}: pytorch {:.0f} samples/s", r, a.rounds, torch_sps.back());
  }
  std::filesystem::remove_all(work, ec);

  const double tenax_median = Median(tenax_sps), torch_median = Median(torch_sps);
  nlohmann::json result = {
      {"benchmark", "train-single"},
      {"quick", a.quick},
      {"model", a.model},
      {"batch_size", a.batch_size},
      {"threads", threads},
      {"steps", a.steps},
      {"warmup_steps", a.warmup_steps},
      {"rounds", a.rounds},
      {"optimizer", "sgd"},
      {"lr", a.lr},
      {"momentum", 0.9},
      {"tenax_samples_per_second", tenax_median},
      {"pytorch_samples_per_second", torch_median},
      {"ratio", tenax_median / torch_median},
      {"tenax_rounds", tenax_sps},
      {"pytorch_rounds", torch_sps},
      {"pytorch_version", torch_info.value("torch_version", "")},
  };
  std::printf("%-28s %12s\n", "train-single", "samples/s");
  std::printf("%-28s %12.0f\n", "tenax (C++ libtorch)", tenax_median);
  std::printf("%-28s %12.0f\n", "pytorch (python3-torch)", torch_median);
  std::printf("%-28s %12.3f\n", "ratio tenax/pytorch", tenax_median / torch_median);
  if (!a.json_path.empty()) TENAX_RETURN_IF_ERROR(WriteFileAtomic(a.json_path, result.dump(2) + "\n"));
  return Status::Ok();
}

}  // namespace

void AddBenchCommand(CLI::App& root, int& exit_code) {
  CLI::App* bench = root.add_subcommand("bench", "Benchmarks that run tenax and its peer in the same run");
  bench->require_subcommand(1);
  AddBenchTransportCommands(*bench, exit_code);
  AddBenchTrainCommand(*bench, exit_code);
  AddBenchAllreduceCommands(*bench, exit_code);

  auto a = std::make_shared<BenchTrainArgs>();
  CLI::App* ts =
      bench->add_subcommand("train-single", "Single-process training throughput: tenax vs PyTorch on the same kernels");
  ts->add_flag("--quick", a->quick, "Fewer steps and rounds (under 3 minutes)");
  ts->add_option("--json", a->json_path, "Write the result as JSON to FILE")->type_name("FILE");
  ts->add_option("--model", a->model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}))->capture_default_str();
  ts->add_option("--batch-size", a->batch_size, "Samples per step")
      ->check(CLI::Range(int64_t{1}, int64_t{60000}))
      ->capture_default_str();
  ts->add_option("--lr", a->lr, "SGD learning rate for both")->check(CLI::Range(1e-9, 10.0))->capture_default_str();
  ts->add_option("--threads", a->threads, "Compute threads for both (0 = one per core)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
  ts->add_option("--steps", a->steps, "Training steps per round (default 1000 quick, 3000 full)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 30));
  ts->add_option("--rounds", a->rounds, "Alternating rounds per side (default 3 quick, 5 full)")
      ->check(CLI::Range(int64_t{1}, int64_t{100}));
  ts->add_option("--warmup-steps", a->warmup_steps, "Steps excluded from the throughput")->capture_default_str();
  ts->add_option("--data", a->data_dir, "Fashion-MNIST directory")->capture_default_str();
  ts->add_option("--python", a->python, "Python interpreter with torch")->capture_default_str();
  ts->add_option("--script", a->script, "The PyTorch peer script")->capture_default_str();
  ts->callback([a, &exit_code] {
    InitLogging("bench");
    InstallStopHandlers();
    Status st = RunBenchTrainSingle(*a);
    exit_code = st.ok() ? 0 : ReportError("bench train-single", st);
  });
}

}  // namespace tenax::cli

#include "tenax/train/single_trainer.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "tenax/core/files.h"
#include "tenax/core/metrics.h"
#include "tenax/core/signals.h"
#include "tenax/train/data_tensors.h"
#include "tenax/train/model.h"
#include "trainer_common.h"
#include "tenax/version.h"

namespace tenax {
namespace {

using namespace train_internal;

Result<TrainOutcome> TrainSingleImpl(const TrainConfig& c, const ConfigDoc& effective_config,
                                     const std::string& out_dir, const TrainRunOptions& options) {
  const auto wall_start = Clock::now();
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(out_dir));
  const std::string summary_path = out_dir + "/summary.json";
  std::error_code ec;
  std::filesystem::remove(summary_path, ec);
  if (ec) return IoError(summary_path + ": cannot remove the previous run's summary: " + ec.message());
  const int64_t threads = ResolveThreads(c.threads);
  torch::set_num_threads(static_cast<int>(threads));
  torch::manual_seed(static_cast<uint64_t>(c.seed));

  // Data first: a bad dataset fails before any output file is created.
  spdlog::info("loading Fashion-MNIST from {}", c.data_dir);
  TENAX_ASSIGN_OR_RETURN(DataTensors train, LoadSplit(c.data_dir, Split::kTrain, c.train_limit));
  TENAX_ASSIGN_OR_RETURN(DataTensors test, LoadSplit(c.data_dir, Split::kTest, c.test_limit));

  {
    std::ostringstream toml_text;
    toml_text << effective_config.table() << "\n";
    TENAX_RETURN_IF_ERROR(WriteFileAtomic(out_dir + "/config.toml", toml_text.str()));
  }
  TENAX_ASSIGN_OR_RETURN(JsonLinesWriter metrics, JsonLinesWriter::Open(out_dir + "/metrics.jsonl"));

  TENAX_ASSIGN_OR_RETURN(Classifier model, MakeModel(c.model));
  auto optimizer = MakeOptimizer(c, *model);
  model->train();

  const int64_t n = train.size();
  const int64_t steps_per_epoch = (n + c.batch_size - 1) / c.batch_size;
  int64_t total_steps = steps_per_epoch * c.epochs;
  if (c.max_steps > 0) total_steps = std::min(total_steps, c.max_steps);
  const int64_t epochs = (total_steps + steps_per_epoch - 1) / steps_per_epoch;
  spdlog::info(
      "model {} on {} training / {} test samples, {} epoch(s) of {} steps, batch {}, {} lr {:g}{}, {} thread(s)",
      c.model, n, test.size(), epochs, steps_per_epoch, c.batch_size, c.optimizer, c.lr,
      c.optimizer == "sgd" ? fmt::format(" momentum {:g}", c.momentum) : std::string(), threads);

  TrainOutcome outcome;
  double train_seconds = 0;   // excludes evaluation
  double steady_seconds = 0;  // excludes evaluation and warm-up steps
  int64_t steady_samples = 0;
  int64_t samples = 0;
  int64_t global_step = 0;
  double interval_loss = 0;
  int64_t interval_steps = 0;
  bool first_interval = true;
  double test_accuracy = 0;

  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    auto perm = torch::randperm(n, torch::kInt64);
    for (int64_t step = 1; step <= steps_per_epoch && global_step < total_steps; ++step) {
      if (StopRequested()) return Cancelled("training stopped by signal " + std::to_string(StopSignal()));
      const auto step_start = Clock::now();
      auto idx = perm.slice(0, (step - 1) * c.batch_size, std::min(n, step * c.batch_size));
      auto x = train.images.index_select(0, idx);
      auto y = train.labels.index_select(0, idx);
      optimizer->zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      optimizer->step();
      const double loss_value = loss.item<double>();
      const double step_seconds = SecondsSince(step_start);

      ++global_step;
      samples += idx.size(0);
      train_seconds += step_seconds;
      if (global_step > options.warmup_steps) {
        steady_seconds += step_seconds;
        steady_samples += idx.size(0);
      }
      if (!std::isfinite(loss_value)) {
        return InvalidArgument("loss became " + std::to_string(loss_value) + " at step " + std::to_string(global_step) +
                               "; lower train.lr (now " + std::to_string(c.lr) + ")");
      }
      interval_loss += loss_value;
      ++interval_steps;

      TrainProgress p = MakeProgress({epoch, epochs, step, steps_per_epoch, global_step, total_steps,
                                      c.log_every_steps, samples, train_seconds, interval_loss, interval_steps,
                                      wall_start});
      const bool epoch_done = EpochDone(p);
      if (p.log_point) {
        outcome.final_train_loss = p.loss;
        if (first_interval) outcome.first_train_loss = p.loss, first_interval = false;
        TENAX_RETURN_IF_ERROR(metrics.Write({{"event", "train"},
                                             {"epoch", epoch},
                                             {"step", global_step},
                                             {"loss", p.loss},
                                             {"samples_per_second", p.samples_per_second},
                                             {"elapsed_seconds", p.elapsed_seconds}}));
        interval_loss = 0;
        interval_steps = 0;
      }
      if (epoch_done) {
        test_accuracy = EvaluateAccuracy(*model, test);
        p.test_accuracy = test_accuracy;
        TENAX_RETURN_IF_ERROR(metrics.Write({{"event", "epoch"},
                                             {"epoch", epoch},
                                             {"step", global_step},
                                             {"train_loss", outcome.final_train_loss},
                                             {"test_accuracy", test_accuracy},
                                             {"elapsed_seconds", SecondsSince(wall_start)}}));
      }
      if (options.on_progress) options.on_progress(p);
    }
  }

  TENAX_RETURN_IF_ERROR(SaveModel(model, c.model, out_dir + "/model.pt"));

  outcome.final_test_accuracy = test_accuracy;
  outcome.samples_per_second = samples / std::max(train_seconds, 1e-9);
  outcome.steady_samples_per_second =
      steady_samples > 0 ? steady_samples / std::max(steady_seconds, 1e-9) : outcome.samples_per_second;
  outcome.summary = {
      {"mode", c.mode},
      {"model", c.model},
      {"epochs", epochs},
      {"steps", global_step},
      {"batch_size", c.batch_size},
      {"optimizer", c.optimizer},
      {"lr", c.lr},
      {"seed", c.seed},
      {"threads", threads},
      {"train_samples", n},
      {"test_samples", test.size()},
      {"final_test_accuracy", outcome.final_test_accuracy},
      {"final_train_loss", outcome.final_train_loss},
      {"wall_seconds", SecondsSince(wall_start)},
      {"train_seconds", train_seconds},
      {"samples_per_second", outcome.samples_per_second},
      {"model_path", out_dir + "/model.pt"},
      {"tenax_version", kTenaxVersion},
  };
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(summary_path, outcome.summary.dump(2) + "\n"));
  return outcome;
}

}  // namespace

int64_t ResolveThreads(int64_t configured) {
  if (configured > 0) return configured;
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

Result<TrainOutcome> TrainSingle(const TrainConfig& config, const ConfigDoc& effective_config,
                                 const std::string& out_dir, const TrainRunOptions& options) {
  return GuardTorch("training failed", [&]() -> Result<TrainOutcome> {
    return TrainSingleImpl(config, effective_config, out_dir, options);
  });
}

Result<EvalOutcome> EvaluateModelFile(const std::string& model_path, const std::string& data_dir, int64_t test_limit,
                                      int64_t threads) {
  return GuardTorch("evaluation failed", [&]() -> Result<EvalOutcome> {
    torch::set_num_threads(static_cast<int>(ResolveThreads(threads)));
    TENAX_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(model_path));
    TENAX_ASSIGN_OR_RETURN(DataTensors test, LoadSplit(data_dir, Split::kTest, test_limit));
    EvalOutcome out;
    out.model_name = loaded.name;
    out.samples = test.size();
    out.test_accuracy = EvaluateAccuracy(*loaded.model, test);
    return out;
  });
}

}  // namespace tenax

// Single-process training: the engine behind `tenax train`. This header is
// free of libtorch so the CLI compiles fast.
//
// Outputs in `out_dir`: metrics.jsonl (one record per log interval and per
// epoch), config.toml (the effective configuration), model.pt and, written
// last and atomically, summary.json. A run that fails or is stopped leaves no
// summary.json (an old one is removed at start), so a summary.json that
// exists always describes a finished run.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tenax/core/config.h"
#include "tenax/core/status.h"
#include "tenax/train/train_config.h"

namespace tenax {

struct TrainProgress {
  int64_t epoch = 0;  // 1-based
  int64_t epochs = 0;
  int64_t step_in_epoch = 0;  // 1-based, steps done in this epoch
  int64_t steps_per_epoch = 0;
  int64_t global_step = 0;
  int64_t total_steps = 0;
  double loss = 0;                // mean over the steps since the last log point
  double samples_per_second = 0;  // over training time so far (eval excluded)
  double elapsed_seconds = 0;
  double eta_seconds = 0;
  bool log_point = false;               // end of a log interval
  std::optional<double> test_accuracy;  // set on the event closing an epoch
};
using ProgressFn = std::function<void(const TrainProgress&)>;

struct TrainOutcome {
  nlohmann::json summary;  // what summary.json holds
  double final_test_accuracy = 0;
  double final_train_loss = 0;
  double first_train_loss = 0;           // mean loss of the first log interval
  double samples_per_second = 0;         // all training steps, eval excluded
  double steady_samples_per_second = 0;  // after the first `warmup_steps`
};

struct TrainRunOptions {
  ProgressFn on_progress;     // called after every step; may be empty
  int64_t warmup_steps = 10;  // excluded from steady_samples_per_second
};

// Loads the data, trains, evaluates and writes the outputs. Returns
// Cancelled when StopRequested() turns true (checked every step).
Result<TrainOutcome> TrainSingle(const TrainConfig& config, const ConfigDoc& effective_config,
                                 const std::string& out_dir, const TrainRunOptions& options);

// `train.threads` as used: the configured count, or one per core for 0.
int64_t ResolveThreads(int64_t configured);

struct EvalOutcome {
  std::string model_name;
  double test_accuracy = 0;
  int64_t samples = 0;
};
Result<EvalOutcome> EvaluateModelFile(const std::string& model_path, const std::string& data_dir, int64_t test_limit,
                                      int64_t threads);

}  // namespace tenax

// What every trainer reports while it runs and when it ends, whatever the
// mode (single, sync and the modes that plug into the training loop). This
// header is libtorch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

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
  // Seconds this step took: data read, compute and exchange (evaluation
  // excluded); 0 when not measured. A worker reports the mean over the
  // steps since its previous report.
  double step_seconds = 0;
  int64_t recovery_bytes = 0;  // bytes moved so far by a store recovery this rank started
};
using ProgressFn = std::function<void(const TrainProgress&)>;

struct TrainOutcome {
  nlohmann::json summary;  // what summary.json holds
  double final_test_accuracy = 0;
  double final_train_loss = 0;
  double first_train_loss = 0;           // mean loss of the first log interval
  double samples_per_second = 0;         // all training steps, eval excluded
  double steady_samples_per_second = 0;  // after the first `warmup_steps`
  // FNV-1a over the final parameters' bytes (as float32 on the host):
  // equal on every replica of a synchronous job.
  uint64_t parameter_hash = 0;
};

struct TrainRunOptions {
  ProgressFn on_progress;     // called after every step; may be empty
  int64_t warmup_steps = 10;  // excluded from steady_samples_per_second
  // When set, the model as initialised (before the first step) is saved
  // there too, so that another framework can start from the same weights
  // (`tenax train --save-initial-model`).
  std::string initial_model_path;
};

}  // namespace tenax

// Single-process training (mode "single"): the one training loop
// (train/training_loop.h) with the local exchange. The engine behind `tenax
// train`. This header is free of libtorch so the CLI compiles fast.
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
#include "tenax/train/progress.h"
#include "tenax/train/torch_runtime.h"
#include "tenax/job/train_config.h"

namespace tenax {

// Loads the data, trains, evaluates and writes the outputs. Returns
// Cancelled when StopRequested() turns true (checked every step).
Result<TrainOutcome> TrainSingle(const TrainConfig& config, const ConfigDoc& effective_config,
                                 const std::string& out_dir, const TrainRunOptions& options);


struct EvalOutcome {
  std::string model_name;
  double test_accuracy = 0;
  int64_t samples = 0;
};
// Evaluates a saved model (tenax model.pt or TorchScript) on the test split
// named by `data_config`'s [data] keys (data.test_limit applied).
Result<EvalOutcome> EvaluateModelFile(const std::string& model_path, const TrainConfig& data_config, int64_t threads);

}  // namespace tenax

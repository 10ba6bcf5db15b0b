// The configuration of a training run, read and validated from TOML.
//
//   mode = "single"
//   [data]   dir, train_limit, test_limit
//   [model]  name = "mlp" | "cnn"
//   [train]  epochs, max_steps, batch_size, optimizer = "sgd" | "adam", lr,
//            momentum, weight_decay, seed, threads
//   [log]    every_steps, level
//
// docs/config.md describes every key; ParseTrainConfig is the authority.
#pragma once

#include <cstdint>
#include <string>

#include "tenax/core/config.h"
#include "tenax/core/status.h"

namespace tenax {

struct TrainConfig {
  std::string mode = "single";
  std::string data_dir;
  int64_t train_limit = 0;  // 0 = the whole split
  int64_t test_limit = 0;
  std::string model = "cnn";
  int64_t epochs = 2;
  int64_t max_steps = 0;  // 0 = run all epochs
  int64_t batch_size = 64;
  std::string optimizer = "sgd";
  double lr = 0.02;  // sgd; adam defaults to 0.001
  double momentum = 0.9;
  double weight_decay = 0.0;
  int64_t seed = 1;
  int64_t threads = 0;  // 0 = one per core
  int64_t log_every_steps = 100;
  std::string log_level = "info";
};

// InvalidArgument naming file:line (or the --set) of the first bad or
// unknown key.
Result<TrainConfig> ParseTrainConfig(const ConfigDoc& doc);

}  // namespace tenax

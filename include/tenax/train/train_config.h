// The configuration of a training run, read and validated from TOML.
//
//   mode = "single" | "sync"
//   [cluster] (sync) workers, job_id, coordinator, host, secret,
//            transports, join_timeout_seconds, step_timeout_seconds,
//            peer_timeout_seconds, elastic, min_workers, max_workers,
//            shares = "measured" | "even" (elastic)
//   [[faults]], [faults.random] (sync) the launcher's fault plan
//            (train/fault_plan.h)
//   [data]   format = "fashion-mnist" | "npy", dir, train_images,
//            train_labels, test_images, test_labels, train_limit, test_limit
//   [model]  name = "mlp" | "cnn", or path = a TorchScript file
//   [train]  epochs, max_steps, batch_size, optimizer = "sgd" | "adam", lr,
//            momentum, weight_decay, seed, threads
//   [log]    every_steps, level
//
// docs/config.md describes every key; ParseTrainConfig is the authority.
#pragma once

#include <cstdint>
#include <string>

#include "tenax/coord/cluster_config.h"
#include "tenax/core/config.h"
#include "tenax/core/status.h"
#include "tenax/train/fault_plan.h"

namespace tenax {

// Where samples come from (see train/data_source.h).
inline constexpr const char* kFashionMnistFormat = "fashion-mnist";
inline constexpr const char* kNpyFormat = "npy";

struct TrainConfig {
  std::string mode = "single";
  std::string data_format = kFashionMnistFormat;
  std::string data_dir;      // fashion-mnist: the directory of the four idx files
  std::string train_images;  // npy: N x C x H x W (or N x H x W) images
  std::string train_labels;  // npy: N integer labels
  std::string test_images;
  std::string test_labels;
  int64_t train_limit = 0;  // 0 = the whole split
  int64_t test_limit = 0;
  std::string model = "cnn";  // a built-in model; ignored when model_path is set
  std::string model_path;     // a TorchScript module saved by PyTorch ("" = use `model`)
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
  coord::ClusterConfig cluster;  // mode "sync" only
  FaultPlan faults;              // mode "sync" only; executed by `tenax run`
};

// InvalidArgument naming file:line (or the --set) of the first bad or
// unknown key.
Result<TrainConfig> ParseTrainConfig(const ConfigDoc& doc);

}  // namespace tenax

// Loading a job file for the cluster commands (run, coordinator, worker):
// the TOML, the --set overrides, validation, and the text handed to workers.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "tenax/core/config.h"
#include "tenax/train/train_config.h"

namespace tenax::cli {

// Parses the config file and applies --set overrides in order.
Result<ConfigDoc> LoadConfigWithOverrides(const std::string& path, const std::vector<std::string>& overrides);

struct Job {
  ConfigDoc doc;
  TrainConfig config;
  std::string toml;  // the effective configuration, as handed to workers
};

// InvalidArgument unless the job is valid and of mode "sync".
Result<Job> LoadSyncJob(const std::string& path, const std::vector<std::string>& overrides);
Result<Job> ParseSyncJob(const std::string& toml_text, const std::string& source);

std::chrono::milliseconds Millis(double seconds);

}  // namespace tenax::cli

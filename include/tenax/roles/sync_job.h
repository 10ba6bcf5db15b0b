// A job file of a multi-process job (mode "sync" or "async") as every role reads it:
// the TOML, the --set overrides applied in order, validation, and the text
// the coordinator hands to every worker. Free of libtorch.
#pragma once

#include <string>
#include <vector>

#include "tenax/core/config.h"
#include "tenax/core/status.h"
#include "tenax/net/host_port.h"
#include "tenax/job/train_config.h"

namespace tenax {

// Parses the config file and applies `overrides` ("key=value") in order.
Result<ConfigDoc> LoadConfigWithOverrides(const std::string& path, const std::vector<std::string>& overrides);

struct SyncJob {
  ConfigDoc doc;
  TrainConfig config;
  std::string toml;  // the effective configuration, as handed to workers
};

// InvalidArgument unless the job is valid and of mode "sync" or "async".
Result<SyncJob> LoadSyncJob(const std::string& path, const std::vector<std::string>& overrides);
Result<SyncJob> ParseSyncJob(const std::string& toml_text, const std::string& source);

// The coordinator a role of the job connects to: `flag` (--coordinator)
// when set, else $TENAX_COORDINATOR, else the job's cluster.coordinator.
// InvalidArgument when the address chosen does not parse or has no port.
Result<net::HostPort> ResolveCoordinator(const std::string& flag, const TrainConfig& config);

// The steps of an async job, as its work queue covers them and the training
// loop counts them: whole batches of train.batch_size (a partial last batch
// is dropped) for train.epochs epochs, capped by train.max_steps. Needs the
// training set's size: Fashion-MNIST's 60000, or the npy labels' header.
Result<int64_t> AsyncTotalSteps(const TrainConfig& config);

}  // namespace tenax

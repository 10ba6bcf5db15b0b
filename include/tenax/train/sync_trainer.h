// Synchronous data-parallel training (mode = "sync"): every rank holds a
// replica of the model; each step, rank r trains on its slice of one global
// batch, gradients are averaged by allreduce over the group, and every rank
// applies the same optimizer step, so the replicas stay bitwise identical.
//
// Data: each epoch e (1-based) draws one permutation of the training set
// from a generator seeded with DeriveSeed(train.seed, e), the same on every rank;
// global batch s is perm[s*W*b, (s+1)*W*b) and rank r reads its own slice
// [r*b, (r+1)*b) of it (W ranks, per-rank batch b). Partial global batches
// are dropped. So W ranks with batch b follow exactly the trajectory of one
// rank with batch W*b (up to float rounding).
//
// Gradients: parameters' .grad are views into the allreduce buffer, laid
// out in reverse registration order (roughly the order backward produces
// them) and cut into buckets. A hook on each parameter's gradient
// accumulator counts ready parameters; a complete bucket starts its
// allreduce at once, while backward still runs (as PyTorch DDP's reducer).
//
// Outputs: rank 0 writes out_dir/{config.toml, metrics.jsonl, model.pt,
// summary.json}; other ranks write nothing. This header is libtorch-free.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "tenax/comm/group.h"
#include "tenax/ps/parameter_server.h"
#include "tenax/train/exchange/async_exchange.h"
#include "tenax/train/exchange/elastic_membership.h"
#include "tenax/train/single_trainer.h"

namespace tenax {

struct SyncRunOptions {
  TrainRunOptions run;                   // progress callback (every rank), warm-up steps
  std::function<Status()> interrupt;     // consulted while waiting for peers (coordinator failure, signals)
  double step_timeout_seconds = 60;      // a collective with no progress for this long fails
  size_t bucket_bytes = 0;               // gradient bucket size; 0: by where the gradients live (allreduce_exchange.h)
  int straggler_id = -1;                 // elastic: the launcher's worker index for [stragglers] (-1: a joiner)
  bool joined_running_job = false;       // elastic: admitted after the first generation (it holds no model yet)
  Status first_generation_unformed;      // elastic: ElasticExchangeOptions::first_generation_unformed
  std::function<void()> before_state_offer;  // elastic: AllreduceExchangeOptions' test seam; may be empty
  std::function<void(bool first_generation)> before_allreduce_offer;  // elastic: the same, before a generation's allreduce
  std::vector<std::string> allreduce_zones;  // sync: AllreduceExchangeOptions::zones
  bool hierarchical_allreduce = false;       // AllreduceExchangeOptions::hierarchical (elastic: per generation)
};

// Collective over `group`: every rank calls it with the same config.
Result<TrainOutcome> TrainSync(const TrainConfig& config, const ConfigDoc& effective_config, const std::string& out_dir,
                               comm::Group& group, const SyncRunOptions& options);

// Elastic training (cluster.elastic) prepares before it joins: the data is
// read and the model's plan fingerprint (parameter shapes and dtypes, model
// and optimizer) computed, so that the coordinator can refuse a joiner
// built for another model before anyone waits for it.
struct PreparedTraining {
  std::shared_ptr<void> data;  // the opened data splits (opaque here)
  std::string fingerprint;     // 16 hex digits
};
Result<PreparedTraining> PrepareTraining(const TrainConfig& config);

// Elastic synchronous training over `group` (this worker's first
// generation) whose later generations come from `membership`
// (train/exchange/elastic_membership.h, allreduce_exchange.h). Returns Cancelled
// when this worker left the job (a stop signal), FailedPrecondition when
// the coordinator removed it.
Result<TrainOutcome> TrainElastic(const TrainConfig& config, const ConfigDoc& effective_config,
                                  const std::string& out_dir, std::unique_ptr<comm::Group> group,
                                  ElasticMembership& membership, PreparedTraining prepared,
                                  const SyncRunOptions& options);

// Asynchronous training (mode "async", async_exchange.h): this worker
// trains the units the coordinator leases it until every unit is done.
// Returns Cancelled when it left on a stop signal (a preemption notice).
Result<TrainOutcome> TrainAsync(const TrainConfig& config, const ConfigDoc& effective_config, const std::string& out_dir,
                                net::Node& node, coord::CoordinatorClient& client, PreparedTraining prepared,
                                AsyncExchangeOptions exchange, const TrainRunOptions& options);

// The model a parameter server starts from: the job's model built as every
// worker builds it (under SeededModelInit(train.seed)), flattened in
// parameter order, with its plan fingerprint (PrepareTraining's).
Result<ps::InitialModel> InitialFlatModel(const TrainConfig& config);
// The same from data already opened by PrepareTraining.
Result<ps::InitialModel> InitialFlatModel(const TrainConfig& config, const PreparedTraining& prepared);

// Mode "coded" (docs/coded.md). A worker (rank < cluster.workers) trains
// through the coded exchange; the decoder (rank cluster.workers) decodes
// and applies every step (coding/coded_decoder.h), writing its events to
// out_dir/decoder.jsonl, and returns its statistics.
Result<TrainOutcome> TrainCoded(const TrainConfig& config, const ConfigDoc& effective_config, const std::string& out_dir,
                                comm::Group& group, const SyncRunOptions& options);
Result<nlohmann::json> DecodeCoded(const TrainConfig& config, const std::string& out_dir, comm::Group& group,
                                   const std::function<void(int64_t step, int64_t total)>& on_step);

}  // namespace tenax

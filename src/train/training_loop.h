// The one training loop every mode runs: epochs, steps, progress, metrics,
// evaluation, summary, model saving and stop signals, written once, over the
// two seams (train/exchange/gradient_exchange.h, train/input/data_source.h) and the model
// seam (train/trainable_model.h).
//
// Sampling: each epoch e (1-based) draws one permutation of the training set
// from a generator seeded with DeriveSeed(train.seed, e) (core/seeds.h), the
// same on every replica.
// Global batch s is perm[s*W*b, (s+1)*W*b) and replica r reads its slice
// [r*b, (r+1)*b) (W replicas, batch b per replica). With W = 1 the last
// partial batch of an epoch is kept; with W > 1 a partial global batch is
// dropped. So W replicas with batch b follow the trajectory of one replica
// with batch W*b (up to float rounding).
//
// Outputs: the replica of rank 0 writes out_dir/{config.toml, metrics.jsonl,
// model file, summary.json (last, atomically)}; an old summary.json is
// removed first, so a summary.json always belongs to a finished run.
// Returns Cancelled when StopRequested() turns true (checked every step), and
// the exchange's or the data source's error otherwise.
#pragma once

#include <string>
#include <vector>

#include "tenax/core/config.h"
#include "tenax/core/status.h"
#include "tenax/train/input/data_source.h"
#include "tenax/train/exchange/gradient_exchange.h"
#include "tenax/train/progress.h"
#include "tenax/train/trainable_model.h"
#include "tenax/job/train_config.h"

namespace tenax {

// The strategies a mode picks; the loop builds the model itself (from the
// job's [model] section and the training data's shape, under
// SeededModelInit) and sets libtorch's threads, so every mode gets the same
// model seam and process-global state.
struct TrainingParts {
  DataSource* train = nullptr;
  DataSource* test = nullptr;
  GradientExchange* exchange = nullptr;
};

// A device out of memory during set-up or a step (`step` = steps done),
// in one line: the device, the batch and sample shape, the model and its
// size, the fix, and libtorch's own first line.
Status OutOfMemoryStatus(const std::string& device, int64_t step, int64_t batch, const std::vector<int64_t>& sample_shape,
                         const std::string& model, const std::vector<int64_t>& parameter_counts, const std::string& what);

Result<TrainOutcome> RunTrainingLoop(const TrainConfig& config, const ConfigDoc& effective_config,
                                     const std::string& out_dir, const TrainingParts& parts,
                                     const TrainRunOptions& options);

}  // namespace tenax

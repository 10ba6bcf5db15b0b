// Training data from the erasure-coded store (data.format = "store",
// docs/store.md): the data-source seam's store strategy.
//
// - Opens the store's catalog (data.catalog) and the split's dataset
//   (data.train_dataset / data.test_dataset); sample count, shape and class
//   count come from its manifest.
// - Reads whole chunks on demand through the store (a chunk that is missing
//   or corrupt is decoded from its stripe: a degraded read, counted) and
//   keeps the last data.cache_chunks decoded chunks (least recently used
//   out first), so a rank reads only the chunks its samples lie in.
// - Epoch order: with data.shuffle_window_chunks = W > 0, an epoch visits
//   the chunks in a shuffled order and shuffles samples within windows of
//   W chunks (as sharded loaders do), so each chunk is read once per epoch
//   instead of on nearly every batch; W = 0 is the idx loader's uniform
//   shuffle (and its exact order).
// - Pixels are normalised with Fashion-MNIST's training statistics, the
//   same table as the idx loader, so a job trains bit-identically from the
//   store and from the idx files.
// - Failure: a sample in a stripe with more than m chunks lost is DataLoss
//   naming the stripe and samples (from Read), never other bytes.
// Threading: the training thread only.
#pragma once

#include <memory>

#include "tenax/core/status.h"
#include "tenax/store/dataset_store.h"
#include "tenax/train/input/data_source.h"
#include "tenax/job/train_config.h"

namespace tenax {

class StoreSource;

// `classes_from_train` (0 = unknown): the test split's labels must lie
// below it. FailedPrecondition for a dataset without a sample shape (put
// with an older tenax); NotFound naming the datasets there are.
Result<std::unique_ptr<DataSource>> OpenStoreSource(const TrainConfig& config, Split split, int64_t limit,
                                                    int64_t classes_from_train);

// What a store source has read so far (for logs and tests); nullopt-like
// zero stats for sources that are not store sources.
store::ReadStats StoreReadStats(const DataSource& source);

// Bytes the store recoveries this process ran have read and written so far
// (every dataset; 0 if it ran none): the worker's progress reports carry it
// to the coordinator's metrics. Thread-safe.
int64_t StoreRecoveryBytesMoved();

}  // namespace tenax

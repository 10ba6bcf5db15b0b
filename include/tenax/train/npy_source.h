// The user's own data as NumPy .npy files (see docs/config.md for why .npy):
// images N x C x H x W (or N x H x W, read as C = 1) of uint8 or float32 and
// N integer labels. Sample count, shape and class count come from the files.
#pragma once

#include <memory>

#include "tenax/core/status.h"
#include "tenax/train/data_source.h"
#include "tenax/train/fashion_mnist.h"
#include "tenax/train/train_config.h"

namespace tenax {

// Opens the split's pair of files named by data.{train,test}_{images,labels},
// trimmed to `limit` samples (0 = all). Errors name the file and what is
// wrong (truncated, mislabelled, oversized, mismatched counts or shapes).
Result<std::unique_ptr<DataSource>> OpenNpySource(const TrainConfig& config, Split split, int64_t limit,
                                                  int64_t classes_from_train);

}  // namespace tenax

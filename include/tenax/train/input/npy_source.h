// The user's own data as NumPy .npy files (see docs/config.md for why .npy):
// images N x C x H x W (or N x H x W, read as C = 1) of uint8 or float32 and
// N integer labels. Sample count, shape and class count come from the files.
//
// Normalisation: float32 images are used as given; uint8 images are scaled
// to [0, 1] and standardised by the mean and std of all pixels of the
// training images file, for both splits (so the test split, and `tenax eval`,
// see what training saw). The class count is the training labels' maximum
// + 1 (at least 2). Both are computed over the whole training files, before
// `limit` trims a split.
//
// Cost: the test split reads the training images' header, and for uint8 the
// training images once more for their statistics (and the training labels
// when `classes_from_train` is 0), so each split opens on its own.
#pragma once

#include <memory>

#include "tenax/core/status.h"
#include "tenax/train/input/data_source.h"
#include "tenax/data/fashion_mnist.h"
#include "tenax/job/train_config.h"

namespace tenax {

// Opens the split's pair of files named by data.{train,test}_{images,labels},
// trimmed to `limit` samples (0 = all). For the test split, every label must
// be below `classes_from_train` (0 = take it from data.train_labels) and the
// images must have the training images' element type. Errors are DataLoss
// (or NotFound/IoError from the file system) and name the file and what is
// wrong (truncated, mislabelled, oversized, mismatched counts or shapes).
Result<std::unique_ptr<DataSource>> OpenNpySource(const TrainConfig& config, Split split, int64_t limit,
                                                  int64_t classes_from_train);

}  // namespace tenax

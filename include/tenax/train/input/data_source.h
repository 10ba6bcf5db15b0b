// The data-source seam of the training loop: where a rank's samples come
// from. Today: in-memory Fashion-MNIST idx files and the user's own NumPy
// .npy files; later the erasure-coded store (degraded reads, PRM's partial
// view after a failure) plugs in behind the same interface.
//
// Contract
// - A DataSource serves one split. `info()` is fixed once opened: the sample
//   count, one sample's shape [C, H, W] and the class count all come from the
//   data (never from constants), so models are built for what was loaded.
// - `Read(indices)` returns the samples at those global indices, in that
//   order: images float32 [k, C, H, W] (normalised, ready for the model) and
//   labels int64 [k] in [0, classes). Indices are in [0, size()); asking for
//   others is a programmer error (InvalidArgument, never a crash).
// - A rank asks only for the samples of its own slices (the training loop's
//   sampler decides which); a source may load lazily and must not fetch more
//   than it is asked for, except whole units it cannot split (a file-backed
//   source reads its files once when opened; a chunked store reads whole
//   chunks).
// - Failure: a source whose backing storage misbehaves (a lost node, a
//   corrupt chunk) returns an error Status from Read; the loop stops the step
//   and reports it. Sources never throw.
// - Threading: one thread of control calls a source (the training thread).
// - Ownership: tensors returned by Read are owned by the caller; they may
//   alias the source's memory (in-memory sources return index_select copies).
#pragma once

#include <torch/torch.h>

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/data/fashion_mnist.h"
#include "tenax/job/train_config.h"

namespace tenax {

struct DatasetInfo {
  int64_t size = 0;
  std::vector<int64_t> sample_shape;  // [C, H, W]
  int64_t classes = 0;                // labels lie in [0, classes)
  std::string description;            // for logs, e.g. "fashion-mnist train (/usr/share/...)"
};

struct Batch {
  torch::Tensor images;  // float32 [k, C, H, W]
  torch::Tensor labels;  // int64 [k]
  int64_t size() const { return labels.size(0); }
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual const DatasetInfo& info() const = 0;
  virtual Result<Batch> Read(const torch::Tensor& indices) = 0;
  // Samples [begin, end) (evaluation reads contiguous ranges).
  virtual Result<Batch> ReadRange(int64_t begin, int64_t end) = 0;
  // Every sample's label in order (int64 [size]), e.g. to partition the
  // data by class. Default: reads every sample; a source that holds its
  // labels apart from the images returns them without touching an image.
  virtual Result<torch::Tensor> Labels();
  // The order in which an epoch visits the samples: a permutation of
  // [0, size) drawn from `gen` (the loop seeds it per epoch, the same on
  // every rank). Default: a uniform shuffle. A source that reads in units
  // (the store's chunks) may shuffle within windows of units, so that a
  // batch reads few units and each unit is read once per epoch.
  virtual torch::Tensor EpochOrder(at::Generator& gen) const;
  // True when every sample is already decoded in this process's memory
  // (the idx and npy sources), so that a copy of the whole set on a GPU
  // costs one pass (train/input/device_resident_source.h); false for a
  // source that fetches its samples (the store).
  virtual bool HeldInMemory() const { return false; }
  // What the source did, under its own key of summary.json (the store's
  // reads and degraded reads); nothing by default.
  virtual void AddToSummary(nlohmann::json& /*summary*/) const {}
};

// (p / 255 - mean) / std of Fashion-MNIST's training pixels for each of the
// 256 byte values (float32 [256]); uint8 sources map pixels through it.
torch::Tensor FashionMnistPixelTable();
// `table` applied to every byte of a uint8 tensor: float32 of its shape.
torch::Tensor MapPixels(const torch::Tensor& bytes, const torch::Tensor& table);

// A source over tensors already in memory (normalised images, int64 labels).
// `classes` is the class count of the dataset (labels are checked against it
// when the source is built from decoded files).
std::unique_ptr<DataSource> MakeInMemorySource(Batch data, int64_t classes, std::string description);

// Opens the split named by the job's [data] section (fashion-mnist idx files
// or npy files), trimmed to `limit` samples (0 = all). For the test split,
// `classes_from_train` (0 = unknown) must cover every test label: the class
// count comes from the training data. Errors name the file and what is wrong
// (truncated, mislabelled, oversized, wrong shape).
Result<std::unique_ptr<DataSource>> OpenDataSource(const TrainConfig& config, Split split, int64_t limit,
                                                   int64_t classes_from_train = 0);

// The job's training and test splits (data.train_limit, data.test_limit
// applied); the test labels are checked against the training data's classes.
struct DataSplits {
  std::unique_ptr<DataSource> train, test;
};
Result<DataSplits> OpenDataSplits(const TrainConfig& config);

}  // namespace tenax

// The Fashion-MNIST files of Debian's dataset-fashion-mnist package, read as
// raw bytes (no libtorch here, so the loader can be fuzzed and reused).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/data/idx.h"

namespace tenax {

inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int kFashionMnistClasses = 10;
// The split sizes its loader insists on.
inline constexpr int64_t kFashionMnistTrainSamples = 60000;
inline constexpr int64_t kFashionMnistTestSamples = 10000;

enum class Split { kTrain, kTest };

struct LabeledImages {
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, row-major
  std::vector<uint8_t> labels;  // count, each < kFashionMnistClasses
};

// Checks that `images` (rank 3) and `labels` (rank 1) describe the same
// number of 28x28 samples, that the count is `expected_count` (0 = any) and
// that every label is a class index. Names are used in messages.
Result<LabeledImages> MakeLabeledImages(IdxArray images, IdxArray labels, int64_t expected_count,
                                        const std::string& images_name, const std::string& labels_name);

// Reads `<dir>/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]`. The train
// split must hold 60000 samples and the test split 10000.
Result<LabeledImages> LoadFashionMnist(const std::string& dir, Split split);

// Returns the first `n` samples (or all when n <= 0 or n >= count).
LabeledImages TakeFirst(LabeledImages data, int64_t n);

}  // namespace tenax

#include "tenax/data/fashion_mnist.h"

#include <filesystem>

namespace tenax {
namespace {

constexpr int64_t kSide = 28;

// Prefers the .gz the Debian package ships; accepts an uncompressed copy.
std::string ResolveFile(const std::string& dir, const std::string& stem) {
  std::string gz = dir + "/" + stem + ".gz";
  std::error_code ec;
  if (std::filesystem::exists(gz, ec)) return gz;
  std::string plain = dir + "/" + stem;
  if (std::filesystem::exists(plain, ec)) return plain;
  return gz;  // report the name the package uses
}

}  // namespace

Result<LabeledImages> MakeLabeledImages(IdxArray images, IdxArray labels, int64_t expected_count,
                                        const std::string& images_name, const std::string& labels_name) {
  if (images.dims.size() != 3) {
    return DataLoss(images_name + ": expected 3 dimensions (count, rows, cols), found " +
                    std::to_string(images.dims.size()) + " (is this a labels file?)");
  }
  if (labels.dims.size() != 1) {
    return DataLoss(labels_name + ": expected 1 dimension (count), found " + std::to_string(labels.dims.size()) +
                    " (is this an images file?)");
  }
  if (images.dims[1] != kSide || images.dims[2] != kSide) {
    return DataLoss(images_name + ": images are " + std::to_string(images.dims[1]) + "x" +
                    std::to_string(images.dims[2]) + ", expected 28x28");
  }
  if (images.dims[0] != labels.dims[0]) {
    return DataLoss(images_name + " holds " + std::to_string(images.dims[0]) + " images but " + labels_name +
                    " holds " + std::to_string(labels.dims[0]) + " labels");
  }
  if (expected_count > 0 && images.dims[0] != static_cast<uint64_t>(expected_count)) {
    return DataLoss(images_name + ": holds " + std::to_string(images.dims[0]) + " samples, expected " +
                    std::to_string(expected_count));
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kFashionMnistClasses) {
      return DataLoss(labels_name + ": label " + std::to_string(labels.data[i]) + " at index " + std::to_string(i) +
                      " is not a class 0..9");
    }
  }
  LabeledImages out;
  out.count = images.dims[0];
  out.rows = kSide;
  out.cols = kSide;
  out.pixels = std::move(images.data);
  out.labels = std::move(labels.data);
  return out;
}

Result<LabeledImages> LoadFashionMnist(const std::string& dir, Split split) {
  const bool train = split == Split::kTrain;
  const std::string prefix = train ? "train" : "t10k";
  std::string images_path = ResolveFile(dir, prefix + "-images-idx3-ubyte");
  std::string labels_path = ResolveFile(dir, prefix + "-labels-idx1-ubyte");
  TENAX_ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path));
  TENAX_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path));
  return MakeLabeledImages(std::move(images), std::move(labels), train ? kFashionMnistTrainSamples : kFashionMnistTestSamples, images_path, labels_path);
}

LabeledImages TakeFirst(LabeledImages data, int64_t n) {
  if (n <= 0 || n >= data.count) return data;
  data.count = n;
  data.pixels.resize(static_cast<size_t>(n * data.rows * data.cols));
  data.labels.resize(static_cast<size_t>(n));
  return data;
}

}  // namespace tenax

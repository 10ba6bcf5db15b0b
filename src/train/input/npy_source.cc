#include "tenax/train/input/npy_source.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "tenax/data/npy.h"

namespace tenax {
namespace {

Result<NpySamples> LoadSamples(const std::string& images_path, const std::string& labels_path) {
  TENAX_ASSIGN_OR_RETURN(NpyArray images, ReadNpyFile(images_path));
  TENAX_ASSIGN_OR_RETURN(NpyArray labels, ReadNpyFile(labels_path));
  return MakeNpySamples(std::move(images), std::move(labels), images_path, labels_path);
}

// The class count is the training labels' maximum + 1, over the whole file
// (a data.train_limit does not change the model's outputs).
Result<int64_t> ClassesOf(const std::vector<int64_t>& train_labels, const std::string& train_labels_path) {
  const int64_t classes = train_labels.empty() ? 0 : *std::max_element(train_labels.begin(), train_labels.end()) + 1;
  if (classes < 2) {
    return DataLoss(train_labels_path + ": labels name " + std::to_string(classes) +
                    " class(es); training needs at least 2 (labels are class indices 0, 1, ...)");
  }
  return classes;
}

// What the test split takes from the training files: the same element type,
// and for uint8 the training pixels' statistics.
Result<PixelStatistics> TrainingStatistics(const TrainConfig& config, const NpyArray& test_images,
                                           const std::string& test_images_path) {
  TENAX_ASSIGN_OR_RETURN(NpyHeader train, ReadNpyFileHeader(config.train_images));
  if (train.dtype != test_images.dtype) {
    return DataLoss(test_images_path + ": images are " + NpyDtypeName(test_images.dtype) +
                    " but the training images (" + config.train_images + ") are " + NpyDtypeName(train.dtype) +
                    ": both splits need the same element type");
  }
  if (train.dtype != NpyDtype::kUint8) return PixelStatistics{};
  TENAX_ASSIGN_OR_RETURN(NpyArray train_images, ReadNpyFile(config.train_images));
  return Uint8PixelStatistics(train_images.data);
}

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

}  // namespace

Result<std::unique_ptr<DataSource>> OpenNpySource(const TrainConfig& config, Split split, int64_t limit,
                                                  int64_t classes_from_train) {
  const bool train = split == Split::kTrain;
  const std::string& images_path = train ? config.train_images : config.test_images;
  const std::string& labels_path = train ? config.train_labels : config.test_labels;
  TENAX_ASSIGN_OR_RETURN(NpySamples samples, LoadSamples(images_path, labels_path));
  if (samples.labels.empty()) return DataLoss(images_path + ": holds no samples");
  const bool uint8 = samples.images.dtype == NpyDtype::kUint8;

  int64_t classes = 0;
  PixelStatistics stats;
  if (train) {
    TENAX_ASSIGN_OR_RETURN(classes, ClassesOf(samples.labels, labels_path));
    if (uint8) stats = Uint8PixelStatistics(samples.images.data);
  } else {
    TENAX_ASSIGN_OR_RETURN(stats, TrainingStatistics(config, samples.images, images_path));
    classes = classes_from_train;
    if (classes <= 0) {
      TENAX_ASSIGN_OR_RETURN(NpyArray train_labels, ReadNpyFile(config.train_labels));
      TENAX_ASSIGN_OR_RETURN(std::vector<int64_t> widened, NpyLabels(train_labels, config.train_labels));
      TENAX_ASSIGN_OR_RETURN(classes, ClassesOf(widened, config.train_labels));
    }
    for (size_t i = 0; i < samples.labels.size(); ++i) {
      if (samples.labels[i] >= classes) {
        return DataLoss(labels_path + ": mislabelled: label " + std::to_string(samples.labels[i]) + " at index " +
                        std::to_string(i) + " is not one of the " + std::to_string(classes) +
                        " classes of the training labels (" + config.train_labels + ")");
      }
    }
  }

  const int64_t available = static_cast<int64_t>(samples.labels.size());
  const int64_t n = limit > 0 && limit < available ? limit : available;
  const std::vector<int64_t>& shape = samples.images.shape;  // [N, C, H, W]
  const std::vector<int64_t> sizes = {n, shape[1], shape[2], shape[3]};
  Batch b;
  if (uint8) {
    b.images = torch::from_blob(samples.images.data.data(), sizes, torch::kUInt8)
                   .to(torch::kFloat32)
                   .div_(255.0)
                   .sub_(stats.mean)
                   .div_(stats.std)
                   .contiguous();
  } else {
    b.images = torch::empty(sizes, torch::kFloat32);
    std::memcpy(b.images.data_ptr(), samples.images.data.data(), static_cast<size_t>(b.images.nbytes()));
  }
  b.labels = torch::from_blob(samples.labels.data(), {n}, torch::kInt64).clone();
  std::string what = std::string("npy ") + (train ? "train" : "test") + " (" + images_path + ", " + labels_path + "; " +
                     NpyDtypeName(samples.images.dtype) +
                     (uint8 ? " standardised by the training mean " + Fixed(stats.mean) + " and std " + Fixed(stats.std)
                            : " as given") +
                     ")";
  return MakeInMemorySource(std::move(b), classes, std::move(what));
}

}  // namespace tenax

#include "tenax/train/input/data_source.h"

#include "tenax/train/input/npy_source.h"
#include "tenax/train/input/store_source.h"

namespace tenax {
namespace {

// Per-pixel mean and standard deviation of the Fashion-MNIST training set.
constexpr double kFashionMnistMean = 0.2860;
constexpr double kFashionMnistStd = 0.3530;

class InMemorySource final : public DataSource {
 public:
  // With `pixel_table` (float[256]), images are uint8 and reads map each
  // pixel through it.
  InMemorySource(Batch data, int64_t classes, std::string description, torch::Tensor pixel_table = {})
      : data_(std::move(data)), table_(std::move(pixel_table)) {
    info_.size = data_.size();
    info_.sample_shape.assign(data_.images.sizes().begin() + 1, data_.images.sizes().end());
    info_.classes = classes;
    info_.description = std::move(description);
  }

  const DatasetInfo& info() const override { return info_; }

  Result<Batch> Read(const torch::Tensor& indices) override {
    if (indices.numel() > 0) {
      const int64_t lo = indices.min().item<int64_t>(), hi = indices.max().item<int64_t>();
      if (lo < 0 || hi >= info_.size) return OutOfRange(lo < 0 ? lo : hi);
    }
    return Batch{Decode(data_.images.index_select(0, indices)), data_.labels.index_select(0, indices)};
  }

  Result<Batch> ReadRange(int64_t begin, int64_t end) override {
    if (begin < 0 || end > info_.size || begin > end) return OutOfRange(begin < 0 || begin > end ? begin : end);
    return Batch{Decode(data_.images.slice(0, begin, end)), data_.labels.slice(0, begin, end)};
  }

  Result<torch::Tensor> Labels() override { return data_.labels; }
  bool HeldInMemory() const override { return true; }

 private:
  Status OutOfRange(int64_t index) const {
    return InvalidArgument(info_.description + ": sample " + std::to_string(index) + " is outside [0, " +
                           std::to_string(info_.size) + ")");
  }

  torch::Tensor Decode(const torch::Tensor& stored) const {
    return table_.defined() ? MapPixels(stored, table_) : stored;
  }

  Batch data_;
  torch::Tensor table_;
  DatasetInfo info_;
};

}  // namespace

Result<torch::Tensor> DataSource::Labels() {
  TENAX_ASSIGN_OR_RETURN(Batch all, ReadRange(0, info().size));
  return all.labels;
}

// Computed with the tensor ops a whole-array conversion would use (so the
// values are bit-identical to it).
torch::Tensor FashionMnistPixelTable() {
  return torch::arange(256, torch::TensorOptions().dtype(torch::kUInt8))
      .to(torch::kFloat32)
      .div_(255.0)
      .sub_(kFashionMnistMean)
      .div_(kFashionMnistStd);
}

torch::Tensor MapPixels(const torch::Tensor& bytes, const torch::Tensor& table) {
  const torch::Tensor in = bytes.contiguous();
  torch::Tensor out = torch::empty(in.sizes(), torch::TensorOptions().dtype(torch::kFloat32));
  const float* t = table.data_ptr<float>();
  const uint8_t* p = in.data_ptr<uint8_t>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0, n = in.numel(); i < n; ++i) o[i] = t[p[i]];
  return out;
}

namespace {

Result<std::unique_ptr<DataSource>> OpenFashionMnist(const std::string& dir, Split split, int64_t limit) {
  TENAX_ASSIGN_OR_RETURN(LabeledImages raw, LoadFashionMnist(dir, split));
  LabeledImages data = TakeFirst(std::move(raw), limit);
  // The pixels stay uint8 (a quarter of the memory, and no pass over the
  // whole set at start-up, which a worker joining a running job does on
  // the others' cores); each read maps them to floats.
  Batch b;
  auto* pixels = new std::vector<uint8_t>(std::move(data.pixels));  // the tensor owns it from here
  b.images = torch::from_blob(
      pixels->data(), {data.count, 1, data.rows, data.cols}, [pixels](void*) { delete pixels; }, torch::kUInt8);
  b.labels = torch::from_blob(data.labels.data(), {data.count}, torch::kUInt8).to(torch::kInt64);
  std::string what = std::string("fashion-mnist ") + (split == Split::kTrain ? "train" : "test") + " (" + dir + ")";
  return std::unique_ptr<DataSource>(
      std::make_unique<InMemorySource>(std::move(b), kFashionMnistClasses, std::move(what), FashionMnistPixelTable()));
}

}  // namespace

torch::Tensor DataSource::EpochOrder(at::Generator& gen) const {
  return torch::randperm(info().size, gen, torch::TensorOptions().dtype(torch::kInt64));
}

std::unique_ptr<DataSource> MakeInMemorySource(Batch data, int64_t classes, std::string description) {
  return std::make_unique<InMemorySource>(std::move(data), classes, std::move(description));
}

Result<std::unique_ptr<DataSource>> OpenDataSource(const TrainConfig& config, Split split, int64_t limit,
                                                   int64_t classes_from_train) {
  if (config.data_format == kNpyFormat) return OpenNpySource(config, split, limit, classes_from_train);
  if (config.data_format == kStoreFormat) return OpenStoreSource(config, split, limit, classes_from_train);
  return OpenFashionMnist(config.data_dir, split, limit);
}

Result<DataSplits> OpenDataSplits(const TrainConfig& config) {
  DataSplits d;
  TENAX_ASSIGN_OR_RETURN(d.train, OpenDataSource(config, Split::kTrain, config.train_limit));
  TENAX_ASSIGN_OR_RETURN(d.test, OpenDataSource(config, Split::kTest, config.test_limit, d.train->info().classes));
  if (d.test->info().sample_shape != d.train->info().sample_shape) {
    return InvalidArgument(d.test->info().description + ": samples have another shape than the training data's");
  }
  return d;
}

}  // namespace tenax

#include "tenax/train/input/device_resident_source.h"

#include <nlohmann/json.hpp>

#include "tenax/train/device.h"

namespace tenax {
namespace {

// Samples per host-to-device copy while the set is loaded: bounded host
// memory for the decoded floats of one chunk.
constexpr int64_t kLoadChunk = 4096;

class DeviceResidentSource final : public DataSource {
 public:
  DeviceResidentSource(DataSource& host, Batch resident, torch::Device device, std::optional<c10::Stream> copy_stream)
      : host_(host), data_(std::move(resident)), device_(device), copy_stream_(std::move(copy_stream)) {
    info_ = host.info();
    info_.description += " (held on " + device.str() + ")";
  }

  const DatasetInfo& info() const override { return info_; }

  Result<Batch> Read(const torch::Tensor& indices) override {
    if (indices.numel() > 0) {
      const int64_t lo = indices.min().item<int64_t>(), hi = indices.max().item<int64_t>();
      if (lo < 0 || hi >= info_.size) {
        return InvalidArgument(info_.description + ": sample " + std::to_string(lo < 0 ? lo : hi) +
                               " is outside [0, " + std::to_string(info_.size) + ")");
      }
    }
    const torch::Tensor on_device = ToDeviceAhead(indices, device_, copy_stream_);
    return Batch{data_.images.index_select(0, on_device), data_.labels.index_select(0, on_device)};
  }

  Result<Batch> ReadRange(int64_t begin, int64_t end) override {
    if (begin < 0 || end > info_.size || begin > end) {
      return InvalidArgument(info_.description + ": samples [" + std::to_string(begin) + ", " + std::to_string(end) +
                             ") are outside [0, " + std::to_string(info_.size) + ")");
    }
    return Batch{data_.images.slice(0, begin, end), data_.labels.slice(0, begin, end)};
  }

  Result<torch::Tensor> Labels() override { return host_.Labels(); }
  bool HeldInMemory() const override { return true; }
  torch::Tensor EpochOrder(at::Generator& gen) const override { return host_.EpochOrder(gen); }
  void AddToSummary(nlohmann::json& summary) const override {
    host_.AddToSummary(summary);
    summary["train_data_on"] = device_.str();
  }

 private:
  DataSource& host_;
  Batch data_;
  torch::Device device_;
  std::optional<c10::Stream> copy_stream_;
  DatasetInfo info_;
};

}  // namespace

int64_t ResidentBytes(const DataSource& source) {
  int64_t per_sample = 1;
  for (int64_t d : source.info().sample_shape) per_sample *= d;
  return source.info().size * (per_sample * static_cast<int64_t>(sizeof(float)) + static_cast<int64_t>(sizeof(int64_t)));
}

Result<std::unique_ptr<DataSource>> MakeDeviceResidentSource(DataSource& source, torch::Device device,
                                                             std::optional<c10::Stream> copy_stream) {
  if (!source.HeldInMemory()) {
    return InvalidArgument(source.info().description + " is not held in memory: it cannot be copied onto " +
                           device.str() + " whole");
  }
  const DatasetInfo& info = source.info();
  std::vector<int64_t> shape = {info.size};
  shape.insert(shape.end(), info.sample_shape.begin(), info.sample_shape.end());
  Batch resident;
  try {
    resident.images = torch::empty(shape, torch::TensorOptions().dtype(torch::kFloat32).device(device));
    resident.labels = torch::empty({info.size}, torch::TensorOptions().dtype(torch::kInt64).device(device));
  } catch (const c10::Error& e) {
    return Unavailable(info.description + ": " + std::to_string(ResidentBytes(source) >> 20) +
                             " MiB of samples do not fit on " + device.str() + " (" +
                             std::string(e.what_without_backtrace()).substr(0, 200) + ")");
  }
  torch::NoGradGuard no_grad;
  for (int64_t begin = 0; begin < info.size; begin += kLoadChunk) {
    const int64_t end = std::min(info.size, begin + kLoadChunk);
    TENAX_ASSIGN_OR_RETURN(Batch chunk, source.ReadRange(begin, end));
    resident.images.slice(0, begin, end).copy_(chunk.images);
    resident.labels.slice(0, begin, end).copy_(chunk.labels);
  }
  return std::unique_ptr<DataSource>(
      std::make_unique<DeviceResidentSource>(source, std::move(resident), device, std::move(copy_stream)));
}

}  // namespace tenax

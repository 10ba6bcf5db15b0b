#include "tenax/train/store_source.h"

#include <cstring>
#include <list>
#include <map>
#include <nlohmann/json.hpp>

#include "tenax/store/store_client.h"
#include "tenax/store/stripe_layout.h"

namespace tenax {

class StoreSource final : public DataSource {
 public:
  StoreSource(std::unique_ptr<store::StoreClient> store, store::DatasetManifest manifest, store::StripeLayout layout,
              int64_t size, size_t cache_chunks, std::string description)
      : store_(std::move(store)),
        manifest_(std::move(manifest)),
        layout_(std::move(layout)),
        cache_capacity_(cache_chunks),
        table_(FashionMnistPixelTable()) {
    info_.size = size;
    for (uint64_t d : manifest_.sample_shape) info_.sample_shape.push_back(static_cast<int64_t>(d));
    info_.classes = manifest_.classes;
    info_.description = std::move(description);
    sample_bytes_ = manifest_.layout.record_bytes - 1;
  }

  const DatasetInfo& info() const override { return info_; }

  Result<Batch> Read(const torch::Tensor& indices) override {
    const torch::Tensor idx = indices.to(torch::kInt64).contiguous();
    const int64_t k = idx.numel();
    const int64_t* ids = idx.data_ptr<int64_t>();
    std::vector<int64_t> shape = {k};
    shape.insert(shape.end(), info_.sample_shape.begin(), info_.sample_shape.end());
    torch::Tensor pixels = torch::empty(shape, torch::TensorOptions().dtype(torch::kUInt8));
    torch::Tensor labels = torch::empty({k}, torch::TensorOptions().dtype(torch::kInt64));
    uint8_t* px = pixels.data_ptr<uint8_t>();
    int64_t* lb = labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < k; ++i) {
      const int64_t r = ids[i];
      if (r < 0 || r >= info_.size) {
        return InvalidArgument(info_.description + ": sample " + std::to_string(r) + " is outside [0, " +
                               std::to_string(info_.size) + ")");
      }
      const store::ChunkRange c = layout_.ChunkOfRecord(static_cast<uint64_t>(r));
      TENAX_ASSIGN_OR_RETURN(const std::vector<uint8_t>* chunk, Chunk(c));
      const uint8_t* rec = chunk->data() + (static_cast<uint64_t>(r) - c.first_record) * manifest_.layout.record_bytes;
      std::memcpy(px + static_cast<uint64_t>(i) * sample_bytes_, rec, sample_bytes_);
      lb[i] = rec[sample_bytes_];
      if (lb[i] >= info_.classes) {
        return DataLoss(info_.description + ": sample " + std::to_string(r) + " has label " + std::to_string(lb[i]) +
                        ", outside the dataset's " + std::to_string(info_.classes) + " classes");
      }
    }
    return Batch{MapPixels(pixels, table_), labels};
  }

  Result<Batch> ReadRange(int64_t begin, int64_t end) override {
    if (begin < 0 || end > info_.size || begin > end) {
      return InvalidArgument(info_.description + ": samples [" + std::to_string(begin) + ", " + std::to_string(end) +
                             ") are outside [0, " + std::to_string(info_.size) + ")");
    }
    return Read(torch::arange(begin, end, torch::TensorOptions().dtype(torch::kInt64)));
  }

  const store::ReadStats& stats() const { return stats_; }

  void AddToSummary(nlohmann::json& summary) const override {
    const store::TransportBytes t = store_->transport_bytes();
    summary["store"] = {{"dataset", manifest_.dataset},
                        {"chunks_read", stats_.chunks_read},
                        {"degraded_chunks", stats_.degraded_chunks},
                        {"bytes_read", stats_.bytes_read},
                        {"transport_bytes_read", t.read}};
  }

 private:
  // The records of data chunk `c`, from the cache or the store.
  Result<const std::vector<uint8_t>*> Chunk(const store::ChunkRange& c) {
    const std::pair<uint64_t, uint32_t> key{c.stripe, c.index};
    if (auto it = cache_.find(key); it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      return &it->second.first;
    }
    TENAX_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                           store_->Read(manifest_, c.first_record, c.record_count, &stats_));
    while (cache_.size() >= cache_capacity_ && !lru_.empty()) {
      cache_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(key);
    auto [it, inserted] = cache_.emplace(key, std::make_pair(std::move(bytes), lru_.begin()));
    return &it->second.first;
  }

  std::unique_ptr<store::StoreClient> store_;
  store::DatasetManifest manifest_;
  store::StripeLayout layout_;
  size_t cache_capacity_;
  torch::Tensor table_;
  DatasetInfo info_;
  uint64_t sample_bytes_ = 0;
  store::ReadStats stats_;
  using Key = std::pair<uint64_t, uint32_t>;
  std::list<Key> lru_;  // most recent first
  std::map<Key, std::pair<std::vector<uint8_t>, std::list<Key>::iterator>> cache_;
};

Result<std::unique_ptr<DataSource>> OpenStoreSource(const TrainConfig& config, Split split, int64_t limit,
                                                    int64_t classes_from_train) {
  const std::string& dataset = split == Split::kTrain ? config.store_train_dataset : config.store_test_dataset;
  TENAX_ASSIGN_OR_RETURN(auto st, store::StoreClient::Open(config.store_catalog));
  TENAX_ASSIGN_OR_RETURN(store::DatasetManifest m, st->Manifest(dataset));
  if (m.sample_shape.empty()) {
    return FailedPrecondition("store dataset " + dataset + " in " + config.store_catalog +
                              " has no sample shape: put it again with this tenax");
  }
  if (m.sample_shape.size() == 2) m.sample_shape.insert(m.sample_shape.begin(), 1);
  if (m.sample_shape.size() != 3) {
    return InvalidArgument("store dataset " + dataset + ": samples of " + std::to_string(m.sample_shape.size()) +
                           " dimensions; the models take [C, H, W] images");
  }
  if (classes_from_train > 0 && m.classes > classes_from_train) {
    return InvalidArgument("store dataset " + dataset + " has " + std::to_string(m.classes) +
                           " classes, more than the training data's " + std::to_string(classes_from_train));
  }
  if (classes_from_train > 0) m.classes = static_cast<int>(classes_from_train);
  TENAX_ASSIGN_OR_RETURN(store::StripeLayout layout, store::StripeLayout::Create(m.layout));
  const int64_t records = static_cast<int64_t>(m.layout.records);
  const int64_t size = limit > 0 ? std::min(limit, records) : records;
  std::string what = "store dataset " + dataset + " (" + config.store_catalog + ")";
  return std::unique_ptr<DataSource>(std::make_unique<StoreSource>(
      std::move(st), std::move(m), std::move(layout), size, static_cast<size_t>(config.store_cache_chunks),
      std::move(what)));
}

store::ReadStats StoreReadStats(const DataSource& source) {
  const auto* s = dynamic_cast<const StoreSource*>(&source);
  return s ? s->stats() : store::ReadStats{};
}

}  // namespace tenax

#include "tenax/train/input/store_source.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "tenax/core/metrics.h"
#include "tenax/core/run_records.h"
#include "tenax/store/catalog.h"
#include "tenax/store/recovery_service.h"
#include "tenax/store/store_client.h"
#include "tenax/store/stripe_layout.h"

namespace tenax {

namespace {
std::atomic<int64_t> g_recovery_bytes{0};  // StoreRecoveryBytesMoved
}  // namespace

int64_t StoreRecoveryBytesMoved() { return g_recovery_bytes.load(); }

// A recovery a loader started (data.recovery_policy): its own store client
// and catalog handle on a thread of its own, so training goes on reading
// (degraded) meanwhile. One claim per dataset in the catalog makes the
// workers of a job start one recovery between them.
//
// With a recovery service (data.recovery_service), the claimant asks it
// instead of recovering itself: no store client of its own, nothing to
// start (store/recovery_service.h).
class LoaderRecovery {
 public:
  LoaderRecovery(std::string catalog, std::string dataset, store::RecoveryOptions options, std::string service)
      : catalog_(std::move(catalog)), dataset_(std::move(dataset)), options_(std::move(options)),
        service_(std::move(service)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~LoaderRecovery() { Join(); }
  bool done() const { return done_.load(); }
  // Waits for the recovery to end; its report.
  const nlohmann::json& Join() {
    if (thread_.joinable()) thread_.join();
    return report_;
  }

 private:
  void Run() {
    const auto start = std::chrono::steady_clock::now();
    records::Recovery rec;
    rec.phase = "done";
    rec.dataset = dataset_;
    rec.policy = options_.policy;
    std::string skipped, release_error;
    char host[256] = {0};
    ::gethostname(host, sizeof(host) - 1);
    const std::string owner = "pid " + std::to_string(::getpid()) + " on " + host;
    spdlog::warn("store dataset {}: a chunk was read around a lost one; starting a {} recovery", dataset_,
                 options_.policy);
    Recover(owner, rec, skipped, release_error);
    rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rec.bytes = rec.bytes_read + rec.bytes_written;
    if (!rec.error.empty()) rec.phase = "failed";
    report_ = records::ToJson(rec);
    report_.erase("event");
    if (!skipped.empty()) report_["skipped"] = skipped;
    if (!release_error.empty()) report_["release_error"] = release_error;
    if (skipped.empty()) {
      g_recovery_bytes += rec.bytes;
      RecordEvent(records::ToJson(rec));
    }
    if (!rec.error.empty()) {
      spdlog::error("store dataset {}: the {} recovery failed: {}", dataset_, options_.policy, rec.error);
    } else {
      spdlog::warn("store dataset {}: {} recovery done in {:.2f} s: {}", dataset_, options_.policy, rec.seconds,
                   report_.dump());
    }
    done_.store(true);
  }

  void Started() {
    records::Recovery started;
    started.phase = "started";
    started.dataset = dataset_;
    started.policy = options_.policy;
    RecordEvent(records::ToJson(started));
  }

  static void Fill(records::Recovery& rec, const store::RecoveryReport& r) {
    rec.lost_chunks = static_cast<int64_t>(r.lost.size());
    rec.first_chunks = static_cast<int64_t>(r.plan.first.size());
    rec.later_chunks = static_cast<int64_t>(r.plan.later.size());
    rec.chunks_rebuilt = static_cast<int64_t>(r.chunks_rebuilt + r.background.chunks_rebuilt);
    rec.bytes_read = static_cast<int64_t>(r.bytes_read + r.background.bytes_read);
    rec.bytes_written = static_cast<int64_t>(r.bytes_written + r.background.bytes_written);
    rec.first_pass_seconds = r.seconds;
    rec.background_seconds = r.background.seconds;
    rec.unrecoverable = r.unrecoverable;
  }

  // One worker of a job recovers (or asks the service): the one whose
  // claim in the catalog holds. The service takes the dataset's own claim
  // when it runs; the askers' claim has a key of its own.
  void Recover(const std::string& owner, records::Recovery& rec, std::string& skipped, std::string& release_error) {
    const std::string claim = service_.empty() ? dataset_ : dataset_ + " (asking " + service_ + ")";
    auto cat = store::StoreCatalog::Open(catalog_);
    auto holder = cat.ok() ? (*cat)->ClaimRecovery(claim, owner, 3600) : Result<std::string>(cat.status());
    if (!holder.ok()) {
      rec.error = holder.status().message();
      return;
    }
    if (*holder != owner) {
      skipped = "recovered by " + *holder;
      return;
    }
    Started();
    if (service_.empty()) {
      auto client = store::StoreClient::Open(catalog_);
      auto reports = client.ok() ? (*client)->Recover(dataset_, options_, /*verify=*/false)
                                 : Result<std::vector<store::RecoveryReport>>(client.status());
      if (!reports.ok()) {
        rec.error = reports.status().message();
      } else if (!reports->empty()) {
        Fill(rec, reports->front());
      }
    } else {
      AskService(rec);
    }
    if (Status st = (*cat)->ReleaseRecovery(claim, owner); !st.ok()) release_error = st.message();
  }

  // The resident service does the work, its catalog and connections open.
  void AskService(records::Recovery& rec) {
    auto client = store::RecoveryServiceClient::Connect(service_, "", std::chrono::milliseconds(5000));
    if (!client.ok()) {
      rec.error = client.status().message();
      return;
    }
    auto answer = (*client)->Recover({dataset_, options_, {}}, Deadline::After(std::chrono::hours(1)));
    if (!answer.ok()) {
      rec.error = answer.status().message();
      return;
    }
    const nlohmann::json& results = answer->report["results"];
    if (results.empty()) return;
    const nlohmann::json& r = results[0];
    const nlohmann::json bg = r.value("background", nlohmann::json::object());
    rec.lost_chunks = r.value("lost_chunks", int64_t{0});
    rec.first_chunks = r.value("first_chunks", int64_t{0});
    rec.later_chunks = r.value("later_chunks", int64_t{0});
    rec.chunks_rebuilt = r.value("chunks_rebuilt", int64_t{0}) + bg.value("chunks_rebuilt", int64_t{0});
    rec.bytes_read = r.value("bytes_read", int64_t{0}) + bg.value("bytes_read", int64_t{0});
    rec.bytes_written = r.value("bytes_written", int64_t{0}) + bg.value("bytes_written", int64_t{0});
    rec.first_pass_seconds = r.value("seconds", 0.0);
    rec.background_seconds = bg.value("seconds", 0.0);
    rec.unrecoverable = r.value("unrecoverable", std::vector<std::string>{});
  }

  // Under `tenax run`, the run's metrics.jsonl (kRunMetricsEnvVar): the
  // launcher shows the recovery as it happens, and the report draws it.
  static void RecordEvent(const nlohmann::json& e) {
    const char* path = std::getenv(kRunMetricsEnvVar);
    if (!path || !*path) return;
    auto w = JsonLinesWriter::Append(path);
    if (w.ok()) (void)w->Write(e);
  }

  std::string catalog_, dataset_;
  store::RecoveryOptions options_;
  std::string service_;
  nlohmann::json report_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

class StoreSource final : public DataSource {
 public:
  StoreSource(std::unique_ptr<store::StoreClient> store, store::DatasetManifest manifest, store::StripeLayout layout,
              int64_t size, size_t cache_chunks, int64_t shuffle_window, std::string description,
              std::string catalog, std::optional<store::RecoveryOptions> recovery, std::string recovery_service,
              bool stand_in_from_batch)
      : catalog_(std::move(catalog)),
        recovery_options_(std::move(recovery)),
        recovery_service_(std::move(recovery_service)),
        stand_in_from_batch_(stand_in_from_batch),
        store_(std::move(store)),
        manifest_(std::move(manifest)),
        layout_(std::move(layout)),
        cache_capacity_(cache_chunks),
        window_(shuffle_window),
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
    TENAX_RETURN_IF_ERROR(MaybeRefresh());
    std::vector<int64_t> records(ids, ids + k);
    for (int64_t r : records) {
      if (r < 0 || r >= info_.size) {
        return InvalidArgument(info_.description + ": sample " + std::to_string(r) + " is outside [0, " +
                               std::to_string(info_.size) + ")");
      }
    }
    if (stand_in_from_batch_ && !substitutes_.empty()) StandInFromBatch(records);
    for (int64_t i = 0; i < k; ++i) {
      int64_t r = records[static_cast<size_t>(i)];
      store::ChunkRange c = layout_.ChunkOfRecord(static_cast<uint64_t>(r));
      if (const auto sub = substitutes_.find({c.stripe, c.index}); sub != substitutes_.end()) {
        // PRM's partial view: a sample of a chunk left for later is
        // replaced by the sample at the same position of a live chunk.
        const store::ChunkRange& to = sub->second;
        r = static_cast<int64_t>(to.first_record + (static_cast<uint64_t>(r) - c.first_record) % to.record_count);
        c = to;
        ++substituted_;
      }
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
  uint64_t substituted() const { return substituted_; }

  // data.stand_in = "batch": each sample of a chunk left for later takes
  // the place of one of the batch's available samples, the missing ones
  // spread over the available ones in turn, so a step learns from
  // available samples only (as if the missing were skipped) and reads no
  // chunk the batch does not read anyway. A batch with no available sample
  // keeps the neighbour rule.
  void StandInFromBatch(std::vector<int64_t>& records) {
    std::vector<size_t> available, missing;
    for (size_t i = 0; i < records.size(); ++i) {
      const store::ChunkRange c = layout_.ChunkOfRecord(static_cast<uint64_t>(records[i]));
      (substitutes_.count({c.stripe, c.index}) ? missing : available).push_back(i);
    }
    if (available.empty()) return;
    for (size_t m = 0; m < missing.size(); ++m) {
      records[missing[m]] = records[available[m % available.size()]];
      ++substituted_;
    }
  }

  // Window 0: a uniform shuffle (the idx loader's order). Otherwise the data
  // chunks (clipped to the split's size) in a shuffled order, and the
  // samples of each window of `window_` consecutive chunks shuffled among
  // themselves: a batch then reads at most two windows' chunks, and with
  // the cache holding a window every chunk is read once per epoch.
  torch::Tensor EpochOrder(at::Generator& gen) const override {
    const auto i64 = torch::TensorOptions().dtype(torch::kInt64);
    if (window_ <= 0) return torch::randperm(info_.size, gen, i64);
    std::vector<std::pair<int64_t, int64_t>> chunks;  // [first, end) per data chunk
    for (int64_t first = 0; first < info_.size;) {
      const store::ChunkRange c = layout_.ChunkOfRecord(static_cast<uint64_t>(first));
      const int64_t end = std::min(info_.size, static_cast<int64_t>(c.first_record + c.record_count));
      chunks.emplace_back(first, end);
      first = end;
    }
    const torch::Tensor chunk_order = torch::randperm(static_cast<int64_t>(chunks.size()), gen, i64);
    const int64_t* co = chunk_order.data_ptr<int64_t>();
    std::vector<torch::Tensor> parts;
    for (size_t w = 0; w < chunks.size(); w += static_cast<size_t>(window_)) {
      std::vector<torch::Tensor> members;
      for (size_t j = w; j < std::min(chunks.size(), w + static_cast<size_t>(window_)); ++j) {
        const auto [first, end] = chunks[static_cast<size_t>(co[j])];
        members.push_back(torch::arange(first, end, i64));
      }
      const torch::Tensor samples = torch::cat(members);
      parts.push_back(samples.index_select(0, torch::randperm(samples.size(0), gen, i64)));
    }
    return torch::cat(parts);
  }

  // The job waits for a recovery it started (its report goes into the summary).
  void AddToSummary(nlohmann::json& summary) const override {
    if (recovery_) {
      recoveries_.push_back(recovery_->Join());
      recovery_.reset();
    }
    const store::TransportBytes t = store_->transport_bytes();
    summary["store"] = {{"dataset", manifest_.dataset},
                        {"chunks_read", stats_.chunks_read},
                        {"degraded_chunks", stats_.degraded_chunks},
                        {"bytes_read", stats_.bytes_read},
                        {"transport_bytes_read", t.read},
                        {"substituted_samples", substituted_},
                        {"manifest_refreshes", refreshes_},
                        {"recoveries", recoveries_}};
  }

 private:
  // Re-reads the manifest from the catalog at most once a second: a
  // recovery may have moved chunks (reads go to their new nodes) or left
  // some for later (their samples are substituted). A catalog that cannot
  // be read keeps the manifest we have.
  Status MaybeRefresh() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_refresh_ < std::chrono::seconds(1)) return Status::Ok();
    last_refresh_ = now;
    auto fresh = store_->Manifest(manifest_.dataset);
    if (!fresh.ok()) return Status::Ok();
    fresh->sample_shape = manifest_.sample_shape;
    fresh->classes = manifest_.classes;
    manifest_ = std::move(*fresh);
    ++refreshes_;
    // Every deferred data chunk maps to the next live one (in record order).
    substitutes_.clear();
    std::vector<store::ChunkRange> live, deferred;
    for (uint64_t s = 0; s < manifest_.stripes.size(); ++s) {
      const std::vector<store::ChunkRange> ranges = layout_.ChunksOf(s);
      for (int i = 0; i < manifest_.layout.k; ++i) {
        const store::ChunkRange& r = ranges[static_cast<size_t>(i)];
        if (r.record_count == 0 || r.first_record >= static_cast<uint64_t>(info_.size)) continue;
        (manifest_.stripes[s][static_cast<size_t>(i)].deferred ? deferred : live).push_back(r);
      }
    }
    if (live.empty()) return Status::Ok();  // nothing to substitute with: read (degraded) as before
    for (const store::ChunkRange& d : deferred) {
      auto next = std::find_if(live.begin(), live.end(),
                               [&](const store::ChunkRange& l) { return l.first_record > d.first_record; });
      store::ChunkRange to = next == live.end() ? live.front() : *next;
      // Clip to the split (a trimmed split never reads past its size).
      to.record_count = std::min<uint64_t>(to.record_count, static_cast<uint64_t>(info_.size) - to.first_record);
      substitutes_[{d.stripe, d.index}] = to;
    }
    return Status::Ok();
  }

  // A degraded read: start the job's recovery unless one runs, or one
  // started less than kRecoveryInterval ago (a chunk that is corrupt on a
  // live node is read around every epoch; a recovery of failed nodes does
  // not repair it, `tenax store scrub` does).
  void MaybeStartRecovery() {
    static constexpr auto kRecoveryInterval = std::chrono::seconds(30);
    if (!recovery_options_) return;
    if (recovery_) {
      if (!recovery_->done()) return;
      recoveries_.push_back(recovery_->Join());
      recovery_.reset();
    }
    const auto now = std::chrono::steady_clock::now();
    if (recovery_started_ && now - *recovery_started_ < kRecoveryInterval) return;
    recovery_started_ = now;
    recovery_ = std::make_unique<LoaderRecovery>(catalog_, manifest_.dataset, *recovery_options_, recovery_service_);
  }

  // The records of data chunk `c`, from the cache or the store.
  Result<const std::vector<uint8_t>*> Chunk(const store::ChunkRange& c) {
    const std::pair<uint64_t, uint32_t> key{c.stripe, c.index};
    if (auto it = cache_.find(key); it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      return &it->second.first;
    }
    TENAX_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                           store_->Read(manifest_, c.first_record, c.record_count, &stats_));
    if (stats_.degraded_chunks > degraded_seen_) {
      degraded_seen_ = stats_.degraded_chunks;
      MaybeStartRecovery();
    }
    while (cache_.size() >= cache_capacity_ && !lru_.empty()) {
      cache_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(key);
    auto [it, inserted] = cache_.emplace(key, std::make_pair(std::move(bytes), lru_.begin()));
    return &it->second.first;
  }

  std::string catalog_;
  std::optional<store::RecoveryOptions> recovery_options_;  // none: the loader starts no recovery
  std::string recovery_service_;  // data.recovery_service ("" = recover in-process)
  bool stand_in_from_batch_ = false;  // data.stand_in = "batch"
  mutable std::unique_ptr<LoaderRecovery> recovery_;        // the one running (or done, not yet reported)
  mutable std::vector<nlohmann::json> recoveries_;          // reports of those that ended
  std::optional<std::chrono::steady_clock::time_point> recovery_started_;
  uint64_t degraded_seen_ = 0;
  std::unique_ptr<store::StoreClient> store_;
  store::DatasetManifest manifest_;
  store::StripeLayout layout_;
  size_t cache_capacity_;
  int64_t window_;
  torch::Tensor table_;
  DatasetInfo info_;
  uint64_t sample_bytes_ = 0;
  store::ReadStats stats_;
  using Key = std::pair<uint64_t, uint32_t>;
  std::list<Key> lru_;  // most recent first
  std::map<Key, store::ChunkRange> substitutes_;  // deferred chunk -> the live chunk standing in
  uint64_t substituted_ = 0, refreshes_ = 0;
  std::chrono::steady_clock::time_point last_refresh_{};
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
  std::optional<store::RecoveryOptions> recovery;
  if (config.store_recovery_policy != "none") {
    recovery.emplace();
    // A test split is never evaluated on stand-ins: it comes back whole.
    recovery->policy = split == Split::kTrain ? config.store_recovery_policy : "full";
    recovery->prm.min_available = config.store_recovery_min_available;
    recovery->prm.class_tolerance = config.store_recovery_class_tolerance;
    recovery->background_bytes_per_second = config.store_recovery_background_gbps * 1e9 / 8;
  }
  return std::unique_ptr<DataSource>(std::make_unique<StoreSource>(
      std::move(st), std::move(m), std::move(layout), size, static_cast<size_t>(config.store_cache_chunks),
      split == Split::kTrain ? config.store_shuffle_window : 0, std::move(what), config.store_catalog,
      std::move(recovery), config.store_recovery_service, config.store_stand_in == "batch"));
}

store::ReadStats StoreReadStats(const DataSource& source) {
  const auto* s = dynamic_cast<const StoreSource*>(&source);
  return s ? s->stats() : store::ReadStats{};
}

}  // namespace tenax

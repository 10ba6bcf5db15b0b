#include "tenax/train/input/store_source.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "tenax/store/store_client.h"
#include "testing.h"

namespace tenax {
namespace {

// The Fashion-MNIST test split in a store of 6 node directories (RS 4+2,
// 250 records per chunk), read through the store and from the idx files.
class StoreSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto data = LoadFashionMnist(kDefaultFashionMnistDir, Split::kTest);
    ASSERT_TRUE(data.ok()) << data.status().message();
    const std::vector<uint8_t> records = testing::ImageLabelRecords(data->pixels, data->labels, 784);
    auto st = store::StoreClient::Open(dir_ / "store.db");
    ASSERT_TRUE(st.ok()) << st.status().message();
    store_ = std::move(*st);
    ASSERT_TRUE(store_->CreateNodes(dir_ / "nodes", 6, 3).ok());
    store::LayoutParams layout;
    layout.records = 10000;
    layout.record_bytes = 785;
    layout.chunk_bytes = 785 * 250;
    const auto& labels = data->labels;
    auto put = store_->Put("fashion-mnist-test", records, layout, 10, [&](uint64_t r) { return int{labels[r]}; },
                           {1, 28, 28});
    ASSERT_TRUE(put.ok()) << put.status().message();
    config_.data_format = kStoreFormat;
    config_.store_catalog = dir_ / "store.db";
    config_.store_cache_chunks = 4;
    files_.data_dir = kDefaultFashionMnistDir;
  }

  void ExpectSameSamples(DataSource& a, DataSource& b, const torch::Tensor& indices) {
    auto x = a.Read(indices);
    auto y = b.Read(indices);
    ASSERT_TRUE(x.ok()) << x.status().message();
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_TRUE(torch::equal(x->images, y->images));
    EXPECT_TRUE(torch::equal(x->labels, y->labels));
  }

  testing::ScratchDir dir_;
  std::unique_ptr<store::StoreClient> store_;
  TrainConfig config_, files_;
};

TEST_F(StoreSourceTest, ReadsTheSameTensorsAsTheIdxFilesAlsoWithTwoNodesFailed) {
  auto from_store = OpenDataSource(config_, Split::kTest, 0);
  auto from_files = OpenDataSource(files_, Split::kTest, 0);
  ASSERT_TRUE(from_store.ok()) << from_store.status().message();
  ASSERT_TRUE(from_files.ok()) << from_files.status().message();
  const DatasetInfo& info = (*from_store)->info();
  EXPECT_EQ(info.size, 10000);
  EXPECT_EQ(info.classes, 10);
  EXPECT_EQ(info.sample_shape, (std::vector<int64_t>{1, 28, 28}));
  const torch::Tensor picks = torch::randperm(10000, torch::TensorOptions().dtype(torch::kInt64)).slice(0, 0, 700);
  ExpectSameSamples(**from_store, **from_files, picks);
  EXPECT_EQ(StoreReadStats(**from_store).degraded_chunks, 0u);
  auto range = (*from_store)->ReadRange(4990, 5010);
  auto range_files = (*from_files)->ReadRange(4990, 5010);
  ASSERT_TRUE(range.ok() && range_files.ok());
  EXPECT_TRUE(torch::equal(range->images, range_files->images));
  // Every label in order: the store's (read through its samples) and the
  // files' (held apart from the images) agree with the files' own bytes.
  auto labels_store = (*from_store)->Labels();
  auto labels_files = (*from_files)->Labels();
  auto every = (*from_files)->ReadRange(0, 10000);
  ASSERT_TRUE(labels_store.ok() && labels_files.ok() && every.ok());
  EXPECT_TRUE(torch::equal(*labels_store, every->labels));
  EXPECT_TRUE(torch::equal(*labels_files, every->labels));
  EXPECT_EQ(10000, labels_files->numel());

  // Two wiped disks: a fresh source decodes what they held, bit-exact.
  ASSERT_TRUE(store_->Fail("node-1").ok());
  ASSERT_TRUE(store_->Fail("node-4").ok());
  auto degraded = OpenDataSource(config_, Split::kTest, 0);
  ASSERT_TRUE(degraded.ok()) << degraded.status().message();
  ExpectSameSamples(**degraded, **from_files, torch::arange(0, 10000, torch::TensorOptions().dtype(torch::kInt64)));
  const store::ReadStats s = StoreReadStats(**degraded);
  // 40 data chunks, a third of them on the two failed nodes.
  EXPECT_GT(s.degraded_chunks, 0u);
  EXPECT_LT(s.degraded_chunks, 40u);
  EXPECT_EQ(s.chunks_read, 40u - s.degraded_chunks + 4 * s.degraded_chunks);

  // A third: every stripe lost 3 chunks. Samples in chunks on live nodes
  // still read; the first one on a failed node is DataLoss naming its
  // stripe's samples.
  ASSERT_TRUE(store_->Fail("node-2").ok());
  auto lost = OpenDataSource(config_, Split::kTest, 0);
  ASSERT_TRUE(lost.ok());
  auto batch = (*lost)->ReadRange(0, 10000);
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(batch.status().message().find("is lost: only 3 of its 6 chunks are readable and 4 are needed; samples "),
            std::string::npos)
      << batch.status().message();
}

TEST_F(StoreSourceTest, ACachedChunkIsNotReadAgainAndTheCacheIsBounded) {
  auto src = OpenDataSource(config_, Split::kTest, 0);
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE((*src)->ReadRange(0, 250).ok());  // chunk 0
  ASSERT_TRUE((*src)->ReadRange(10, 20).ok());
  EXPECT_EQ(StoreReadStats(**src).chunks_read, 1u);
  ASSERT_TRUE((*src)->ReadRange(250, 1500).ok());  // chunks 1..5: chunk 0 falls out of 4
  EXPECT_EQ(StoreReadStats(**src).chunks_read, 6u);
  ASSERT_TRUE((*src)->ReadRange(0, 1).ok());
  EXPECT_EQ(StoreReadStats(**src).chunks_read, 7u);
  auto bad = (*src)->ReadRange(9990, 10001);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

// Reads an epoch in `order` in batches of 64; returns the chunks read.
uint64_t ChunksReadForAnEpoch(DataSource& src, const torch::Tensor& order) {
  for (int64_t b = 0; b < order.size(0); b += 64) {
    auto batch = src.Read(order.slice(0, b, std::min(order.size(0), b + 64)));
    EXPECT_TRUE(batch.ok()) << batch.status().message();
  }
  return StoreReadStats(src).chunks_read;
}

TEST_F(StoreSourceTest, AWindowedShuffleReadsEachChunkOncePerEpochAndVisitsEverySampleOnce) {
  config_.store_train_dataset = "fashion-mnist-test";  // the fixture's 40 chunks of 250 samples
  config_.store_cache_chunks = 4;
  config_.store_shuffle_window = 4;
  auto windowed = OpenDataSource(config_, Split::kTrain, 0);
  ASSERT_TRUE(windowed.ok()) << windowed.status().message();
  auto gen = at::detail::createCPUGenerator(7);
  const torch::Tensor order = (*windowed)->EpochOrder(gen);
  EXPECT_TRUE(torch::equal(std::get<0>(order.sort()), torch::arange(10000, torch::TensorOptions().dtype(torch::kInt64))));
  EXPECT_EQ(ChunksReadForAnEpoch(**windowed, order), 40u);
  auto gen2 = at::detail::createCPUGenerator(8);
  EXPECT_FALSE(torch::equal((*windowed)->EpochOrder(gen2), order));  // another epoch, another order

  // The uniform shuffle (window 0) with the same cache misses on nearly
  // every batch: what the window is for.
  config_.store_shuffle_window = 0;
  auto uniform = OpenDataSource(config_, Split::kTrain, 0);
  ASSERT_TRUE(uniform.ok());
  auto gen3 = at::detail::createCPUGenerator(7);
  const torch::Tensor flat = (*uniform)->EpochOrder(gen3);
  auto gen4 = at::detail::createCPUGenerator(7);
  EXPECT_TRUE(torch::equal(flat, torch::randperm(10000, gen4, torch::TensorOptions().dtype(torch::kInt64))));
  EXPECT_GT(ChunksReadForAnEpoch(**uniform, flat), 40u * 10);
}

// PRM's partial view: after a prm recovery the chunks it left for later
// are not decoded on every read; their samples are stood in for by live
// ones, and once everything is rebuilt nothing is substituted.
TEST_F(StoreSourceTest, AfterAPrmRecoveryDeferredChunksAreSubstitutedNotDecoded) {
  ASSERT_TRUE(store_->Fail("node-1").ok());
  store::RecoveryOptions prm;
  prm.policy = "prm";
  prm.prm.min_available = 0.9;
  auto first = store_->Recover("", prm, false);
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_EQ(first->size(), 1u);
  const store::RecoveryPlan& plan = (*first)[0].plan;
  uint64_t deferred_data = 0, deferred_samples = 0;
  for (size_t i : plan.later) {
    if ((*first)[0].lost[i].chunk.parity) continue;
    ++deferred_data;
    for (uint64_t c : (*first)[0].lost[i].chunk.class_counts) deferred_samples += c;
  }
  ASSERT_GT(deferred_data, 0u) << "the plan rebuilt everything: nothing to test";

  auto src = OpenDataSource(config_, Split::kTest, 0);
  ASSERT_TRUE(src.ok()) << src.status().message();
  auto all = (*src)->ReadRange(0, 10000);
  ASSERT_TRUE(all.ok()) << all.status().message();
  const store::ReadStats s = StoreReadStats(**src);
  EXPECT_EQ(s.degraded_chunks, 0u);  // nothing decoded: the first set is back, the rest is stood in for
  nlohmann::json summary;
  (*src)->AddToSummary(summary);
  EXPECT_EQ(summary["store"]["substituted_samples"].get<uint64_t>(), deferred_samples);
  // A substituted sample is a real sample of the dataset (the live chunk's).
  auto files = OpenDataSource(files_, Split::kTest, 0);
  ASSERT_TRUE(files.ok());
  auto truth = (*files)->ReadRange(0, 10000);
  ASSERT_TRUE(truth.ok());
  auto manifest = store_->Manifest("fashion-mnist-test");
  ASSERT_TRUE(manifest.ok());
  std::vector<bool> in_deferred(10000, false);
  for (const auto& stripe : manifest->stripes) {
    for (const store::StoredChunk& c : stripe) {
      if (!c.deferred) continue;
      for (uint64_t r = c.first_record; r < c.first_record + c.record_count; ++r) in_deferred[r] = true;
    }
  }
  auto bytes_of = [](const torch::Tensor& t) {
    const torch::Tensor c = t.contiguous();
    return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.element_size());
  };
  std::set<std::string> dataset_images;
  for (int64_t i = 0; i < 10000; ++i) dataset_images.insert(bytes_of(truth->images[i]));
  uint64_t kept = 0, stood_in = 0;
  for (int64_t i = 0; i < 10000; ++i) {
    if (!in_deferred[static_cast<size_t>(i)]) {
      kept += torch::equal(all->images[i], truth->images[i]) && torch::equal(all->labels[i], truth->labels[i]) ? 1 : 0;
    } else {
      stood_in += dataset_images.count(bytes_of(all->images[i]));
    }
  }
  EXPECT_EQ(kept, 10000 - deferred_samples);  // every other sample is itself
  EXPECT_EQ(stood_in, deferred_samples);      // each stand-in is a real sample of the dataset

  // The background pass rebuilds the rest: a loader substitutes nothing.
  prm.rebuild_later = true;
  ASSERT_TRUE(store_->Recover("", prm, false).ok());
  auto after = OpenDataSource(config_, Split::kTest, 0);
  ASSERT_TRUE(after.ok());
  auto again = (*after)->ReadRange(0, 10000);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(torch::equal(again->images, truth->images));
  nlohmann::json clean;
  (*after)->AddToSummary(clean);
  EXPECT_EQ(clean["store"]["substituted_samples"].get<uint64_t>(), 0u);
}

// data.stand_in = "batch": a sample of a chunk PRM left for later takes an
// available sample of its own batch (the batch learns from available
// samples only); every available sample is itself; batches come from a
// shuffled order, as training reads them.
TEST_F(StoreSourceTest, WithBatchStandInsAMissingSampleIsAnAvailableSampleOfItsOwnBatch) {
  ASSERT_TRUE(store_->Fail("node-1").ok());
  store::RecoveryOptions prm;
  prm.policy = "prm";
  prm.prm.min_available = 0.9;
  ASSERT_TRUE(store_->Recover("", prm, false).ok());
  auto manifest = store_->Manifest("fashion-mnist-test");
  ASSERT_TRUE(manifest.ok());
  std::vector<bool> in_deferred(10000, false);
  for (const auto& stripe : manifest->stripes) {
    for (const store::StoredChunk& c : stripe) {
      if (!c.deferred) continue;
      for (uint64_t r = c.first_record; r < c.first_record + c.record_count; ++r) in_deferred[r] = true;
    }
  }
  auto files = OpenDataSource(files_, Split::kTest, 0);
  ASSERT_TRUE(files.ok());
  auto truth = (*files)->ReadRange(0, 10000);
  ASSERT_TRUE(truth.ok());

  config_.store_stand_in = "batch";
  auto src = OpenDataSource(config_, Split::kTest, 0);
  ASSERT_TRUE(src.ok()) << src.status().message();
  auto gen = at::detail::createCPUGenerator(7);
  const torch::Tensor order = torch::randperm(10000, gen, torch::TensorOptions().dtype(torch::kInt64));
  uint64_t missing = 0, from_own_batch = 0, kept = 0, available = 0;
  for (int64_t b = 0; b < 10000; b += 64) {
    const torch::Tensor ids = order.slice(0, b, std::min<int64_t>(10000, b + 64));
    auto batch = (*src)->Read(ids);
    ASSERT_TRUE(batch.ok()) << batch.status().message();
    const int64_t* id = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      if (!in_deferred[static_cast<size_t>(id[i])]) {
        ++available;
        kept += torch::equal(batch->images[i], truth->images[id[i]]) ? 1 : 0;
        continue;
      }
      ++missing;
      for (int64_t j = 0; j < ids.numel(); ++j) {
        if (!in_deferred[static_cast<size_t>(id[j])] && torch::equal(batch->images[i], truth->images[id[j]]) &&
            torch::equal(batch->labels[i], truth->labels[id[j]])) {
          ++from_own_batch;
          break;
        }
      }
    }
  }
  ASSERT_GT(missing, 0u) << "the plan rebuilt everything: nothing to test";
  EXPECT_EQ(kept, available);
  EXPECT_EQ(from_own_batch, missing);
  nlohmann::json summary;
  (*src)->AddToSummary(summary);
  EXPECT_EQ(summary["store"]["substituted_samples"].get<uint64_t>(), missing);
  EXPECT_EQ(StoreReadStats(**src).degraded_chunks, 0u);
}

TEST_F(StoreSourceTest, AnUnknownDatasetNamesTheOnesThereAre) {
  config_.store_test_dataset = "cifar";
  auto src = OpenDataSource(config_, Split::kTest, 0);
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), StatusCode::kNotFound);
  EXPECT_NE(src.status().message().find("no dataset 'cifar' (it has: fashion-mnist-test)"), std::string::npos)
      << src.status().message();
}

}  // namespace
}  // namespace tenax

namespace tenax {
namespace {

TEST(StoreConfigTest, StoreKeysAreReadAndMisplacedOnesAreRefusedWithTheLine) {
  auto parse = [](std::string_view text) -> Result<TrainConfig> {
    auto doc = ConfigDoc::Parse(text, "job.toml");
    if (!doc.ok()) return doc.status();
    return ParseTrainConfig(*doc);
  };
  auto ok = parse("[data]\nformat = \"store\"\ncatalog = \"s.db\"\ntrain_dataset = \"a\"\ntest_dataset = \"b\"\n"
                  "cache_chunks = 3\n");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->store_catalog, "s.db");
  EXPECT_EQ(ok->store_train_dataset, "a");
  EXPECT_EQ(ok->store_test_dataset, "b");
  EXPECT_EQ(ok->store_cache_chunks, 3);
  EXPECT_EQ(parse("[data]\nformat = \"store\"\n").status().message(),
            "job.toml:2: 'data.format' is \"store\" but 'data.catalog' (the store's catalog file) is not set");
  EXPECT_EQ(parse("[data]\nformat = \"store\"\ncatalog = \"s.db\"\ndir = \"/tmp\"\n").status().message(),
            "job.toml:4: 'data.dir' does not apply to data.format = \"store\" (samples come from data.catalog)");
  EXPECT_EQ(parse("[data]\ncatalog = \"s.db\"\n").status().message(),
            "job.toml:2: 'data.catalog' only applies to data.format = \"store\"");
  EXPECT_EQ(parse("[data]\nformat = \"store\"\ncatalog = \"s.db\"\ncache_chunks = 0\n").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(parse("[data]\nformat = \"store\"\ncatalog = \"s.db\"\ncache_chunks = 4\nshuffle_window_chunks = 5\n")
                .status()
                .message(),
            "job.toml:5: 'data.shuffle_window_chunks' is 5, more than data.cache_chunks (4): a window must fit the "
            "cache or it evicts its own chunks");
  auto rec = parse("[data]\nformat = \"store\"\ncatalog = \"s.db\"\nrecovery_policy = \"prm\"\n"
                   "recovery_min_available = 0.8\nrecovery_class_tolerance = 0.02\nrecovery_background_gbps = 0.5\n");
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_EQ(rec->store_recovery_policy, "prm");
  EXPECT_EQ(rec->store_recovery_min_available, 0.8);
  EXPECT_EQ(rec->store_recovery_class_tolerance, 0.02);
  EXPECT_EQ(rec->store_recovery_background_gbps, 0.5);
  EXPECT_EQ(ok->store_recovery_policy, "none");
  const std::string bad =
      parse("[data]\nformat = \"store\"\ncatalog = \"s.db\"\nrecovery_policy = \"fast\"\n").status().message();
  EXPECT_NE(bad.find("job.toml:4"), std::string::npos) << bad;
  EXPECT_NE(bad.find("prm"), std::string::npos) << bad;
  EXPECT_EQ(parse("[data]\nrecovery_policy = \"full\"\n").status().message(),
            "job.toml:2: 'data.recovery_policy' only applies to data.format = \"store\"");
  // The recovery service and the stand-in rule.
  auto svc = parse("[data]\nformat = \"store\"\ncatalog = \"s.db\"\nrecovery_policy = \"prm\"\n"
                   "recovery_service = \"10.0.0.5:7700\"\nstand_in = \"batch\"\n");
  ASSERT_TRUE(svc.ok()) << svc.status().message();
  EXPECT_EQ(svc->store_recovery_service, "10.0.0.5:7700");
  EXPECT_EQ(svc->store_stand_in, "batch");
  EXPECT_EQ(ok->store_recovery_service, "");
  EXPECT_EQ(ok->store_stand_in, "neighbour");
  EXPECT_EQ(parse("[data]\nformat = \"store\"\ncatalog = \"s.db\"\nrecovery_service = \"h:1\"\n").status().message(),
            "job.toml:4: 'data.recovery_service' is set but data.recovery_policy is \"none\": name the policy the "
            "service runs");
  const std::string no_port = parse("[data]\nformat = \"store\"\ncatalog = \"s.db\"\nrecovery_policy = \"full\"\n"
                                    "recovery_service = \"host\"\n")
                                  .status()
                                  .message();
  EXPECT_EQ(no_port.rfind("job.toml:5: 'data.recovery_service' must be HOST:PORT of a 'tenax store serve'", 0), 0u)
      << no_port;
  const std::string rule =
      parse("[data]\nformat = \"store\"\ncatalog = \"s.db\"\nstand_in = \"skip\"\n").status().message();
  EXPECT_NE(rule.find("job.toml:4"), std::string::npos) << rule;
  EXPECT_NE(rule.find("neighbour"), std::string::npos) << rule;
  EXPECT_EQ(parse("[data]\nstand_in = \"batch\"\n").status().message(),
            "job.toml:2: 'data.stand_in' only applies to data.format = \"store\"");
}

}  // namespace
}  // namespace tenax

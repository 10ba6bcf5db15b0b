#include "tenax/store/catalog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "fashion_mnist_store_test.h"
#include "tenax/core/sqlite_db.h"

namespace tenax::store {
namespace {

class CatalogTest : public FashionMnistStoreTest {
 protected:
  std::string CatalogPath() { return dir_ / "store.db"; }
  std::vector<StoreNode> Nodes() {
    std::vector<StoreNode> out;
    for (int i = 0; i < 6; ++i) {
      out.push_back({i, "data-" + std::to_string(i), dirs_[static_cast<size_t>(i)]->dir(), "zone-" + std::to_string(i % 3),
                     NodeState::kLive});
    }
    return out;
  }
};

void ExpectSameManifest(const DatasetManifest& a, const DatasetManifest& b) {
  EXPECT_EQ(a.dataset, b.dataset);
  EXPECT_EQ(a.layout.records, b.layout.records);
  EXPECT_EQ(a.layout.record_bytes, b.layout.record_bytes);
  EXPECT_EQ(a.layout.chunk_bytes, b.layout.chunk_bytes);
  EXPECT_EQ(a.layout.k, b.layout.k);
  EXPECT_EQ(a.layout.m, b.layout.m);
  EXPECT_EQ(a.classes, b.classes);
  EXPECT_EQ(a.class_totals, b.class_totals);
  EXPECT_EQ(a.sample_shape, b.sample_shape);
  ASSERT_EQ(a.stripes.size(), b.stripes.size());
  for (size_t s = 0; s < a.stripes.size(); ++s) {
    ASSERT_EQ(a.stripes[s].size(), b.stripes[s].size());
    for (size_t i = 0; i < a.stripes[s].size(); ++i) {
      const StoredChunk &x = a.stripes[s][i], &y = b.stripes[s][i];
      EXPECT_EQ(x.index, y.index);
      EXPECT_EQ(x.node, y.node);
      EXPECT_EQ(x.first_record, y.first_record);
      EXPECT_EQ(x.record_count, y.record_count);
      EXPECT_EQ(x.payload_bytes, y.payload_bytes);
      EXPECT_EQ(x.payload_crc32c, y.payload_crc32c);
      EXPECT_EQ(x.class_counts, y.class_counts);
      EXPECT_EQ(x.deferred, y.deferred);
    }
  }
}

TEST_F(CatalogTest, AManifestAndTheNodesSurviveReopeningTheFile) {
  auto m = Put();
  ASSERT_TRUE(m.ok()) << m.status().message();
  m->sample_shape = {1, 28, 28};
  m->stripes[2][1].deferred = true;
  {
    auto cat = StoreCatalog::Open(CatalogPath());
    ASSERT_TRUE(cat.ok()) << cat.status().message();
    ASSERT_TRUE((*cat)->AddNodes(Nodes()).ok());
    ASSERT_TRUE((*cat)->PutManifest(*m).ok());
    ASSERT_TRUE((*cat)->SetNodeState(4, NodeState::kFailed).ok());
  }
  auto cat = StoreCatalog::Open(CatalogPath());
  ASSERT_TRUE(cat.ok()) << cat.status().message();
  auto back = (*cat)->Manifest("fmnist-test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ExpectSameManifest(*m, *back);
  // The manifest read back reads the records back.
  auto all = ReadRecords(*back, stores_, 0, 3000);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_TRUE(*all == records_);
  auto nodes = (*cat)->Nodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 6u);
  EXPECT_EQ((*nodes)[4].state, NodeState::kFailed);
  EXPECT_EQ((*nodes)[3].state, NodeState::kLive);
  EXPECT_EQ((*nodes)[5].zone, "zone-2");
  EXPECT_EQ((*nodes)[2].location, dirs_[2]->dir());
  // Replacing a manifest (after a recovery moved a chunk) keeps one copy.
  m->stripes[3][1].node = 5;
  ASSERT_TRUE((*cat)->PutManifest(*m).ok());
  auto moved = (*cat)->Manifest("fmnist-test");
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->stripes[3][1].node, 5);
  auto names = (*cat)->Datasets();
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"fmnist-test"});
}

// Two processes (two catalog handles on one file) claim one dataset's
// recovery: one wins until it releases, and a stale claim (its owner
// died) is taken over.
TEST_F(CatalogTest, OneRecoveryClaimPerDatasetAcrossHandlesAndAStaleOneIsTakenOver) {
  auto a = StoreCatalog::Open(CatalogPath());
  auto b = StoreCatalog::Open(CatalogPath());
  ASSERT_TRUE(a.ok() && b.ok());
  auto first = (*a)->ClaimRecovery("train", "worker-0", 600);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(*first, "worker-0");
  auto second = (*b)->ClaimRecovery("train", "worker-1", 600);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(*second, "worker-0");
  auto other_dataset = (*b)->ClaimRecovery("test", "worker-1", 600);
  ASSERT_TRUE(other_dataset.ok());
  EXPECT_EQ(*other_dataset, "worker-1");
  ASSERT_TRUE((*b)->ReleaseRecovery("train", "worker-1").ok());  // not its claim: no effect
  auto still = (*b)->ClaimRecovery("train", "worker-1", 600);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(*still, "worker-0");
  ASSERT_TRUE((*a)->ReleaseRecovery("train", "worker-0").ok());
  auto after = (*b)->ClaimRecovery("train", "worker-1", 600);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, "worker-1");
  // With a staleness bound below zero every claim is stale.
  auto taken = (*a)->ClaimRecovery("train", "worker-2", -1);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(*taken, "worker-2");
}

TEST_F(CatalogTest, MistakesAreClearErrors) {
  auto cat = StoreCatalog::Open(CatalogPath());
  ASSERT_TRUE(cat.ok());
  ASSERT_TRUE((*cat)->AddNodes(Nodes()).ok());
  EXPECT_EQ((*cat)->AddNodes(Nodes()).code(), StatusCode::kFailedPrecondition);
  auto missing = (*cat)->Manifest("imagenet");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no dataset 'imagenet' (it has: none)"), std::string::npos)
      << missing.status().message();
  EXPECT_EQ((*cat)->SetNodeState(9, NodeState::kFailed).code(), StatusCode::kNotFound);
  auto m = Put();
  ASSERT_TRUE(m.ok());
  m->stripes[0][0].node = 6;
  EXPECT_EQ((*cat)->PutManifest(*m).code(), StatusCode::kInvalidArgument);
}

TEST_F(CatalogTest, ADamagedRowIsDataLossNamingTheChunkNeverAManifestWithHoles) {
  auto m = Put();
  ASSERT_TRUE(m.ok());
  {
    auto cat = StoreCatalog::Open(CatalogPath());
    ASSERT_TRUE(cat.ok());
    ASSERT_TRUE((*cat)->AddNodes(Nodes()).ok());
    ASSERT_TRUE((*cat)->PutManifest(*m).ok());
  }
  {
    auto raw = SqliteDb::Open(CatalogPath(), "test");
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw->Exec("UPDATE store_chunk SET class_counts = '1,x' WHERE stripe = 2 AND idx = 3").ok());
  }
  auto cat = StoreCatalog::Open(CatalogPath());
  ASSERT_TRUE(cat.ok());
  auto back = (*cat)->Manifest("fmnist-test");
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(back.status().message().find("dataset fmnist-test stripe 2 chunk 3"), std::string::npos)
      << back.status().message();
  {
    auto raw = SqliteDb::Open(CatalogPath(), "test");
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw->Exec("DELETE FROM store_chunk WHERE stripe = 2 AND idx = 3").ok());
  }
  auto holes = (*cat)->Manifest("fmnist-test");
  ASSERT_FALSE(holes.ok());
  EXPECT_NE(holes.status().message().find("has 89 chunk rows of the 90"), std::string::npos)
      << holes.status().message();
  {
    auto raw = SqliteDb::Open(CatalogPath(), "test");
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw->Exec("UPDATE store_dataset SET sample_shape = '1,28,29'").ok());
  }
  auto shape = (*cat)->Manifest("fmnist-test");
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("sample shape '1,28,29' for records of 785 bytes"), std::string::npos)
      << shape.status().message();
}

TEST_F(CatalogTest, AnotherProgramsDatabaseIsRefusedUntouched) {
  {
    auto raw = SqliteDb::Open(CatalogPath(), "test");
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw->Exec("CREATE TABLE photos (id INTEGER); INSERT INTO photos VALUES (7);").ok());
  }
  auto cat = StoreCatalog::Open(CatalogPath());
  ASSERT_FALSE(cat.ok());
  EXPECT_EQ(cat.status().code(), StatusCode::kFailedPrecondition);
  auto raw = SqliteDb::Open(CatalogPath(), "test");
  ASSERT_TRUE(raw.ok());
  auto tables = raw->Tables();
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(*tables, std::set<std::string>{"photos"});
}


// A job's workers open the store's catalog at the same moment while
// another process writes to it (CI once failed a job with "database is
// locked" from a worker's open): every open and read succeeds and sees the
// nodes the catalog holds.
TEST_F(CatalogTest, ManyHandlesOpenAndReadAtOnceWhileAnotherWrites) {
  {
    auto cat = StoreCatalog::Open(CatalogPath());
    ASSERT_TRUE(cat.ok()) << cat.status().message();
    ASSERT_TRUE((*cat)->AddNodes(Nodes()).ok());
  }
  constexpr int kReaders = 6, kRounds = 15;
  std::atomic<int> failures{0}, opened{0};
  std::mutex mu;
  std::string first_error;
  auto fail = [&](const std::string& what) {
    ++failures;
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.empty()) first_error = what;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kReaders; ++t) {
    threads.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        auto cat = StoreCatalog::Open(CatalogPath());
        if (!cat.ok()) { fail(cat.status().message()); continue; }
        ++opened;
        auto nodes = (*cat)->Nodes();
        if (!nodes.ok()) { fail(nodes.status().message()); continue; }
        if (nodes->size() != 6 || (*nodes)[4].name != "data-4") fail("read back other nodes");
      }
    });
  }
  threads.emplace_back([&] {  // the writer: a recovery marking a node failed and live again
    auto cat = StoreCatalog::Open(CatalogPath());
    if (!cat.ok()) { fail(cat.status().message()); return; }
    for (int r = 0; r < kRounds * 2; ++r) {
      Status st = (*cat)->SetNodeState(2, r % 2 == 0 ? NodeState::kFailed : NodeState::kLive);
      if (!st.ok()) fail(st.message());
    }
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << first_error;
  EXPECT_EQ(opened.load(), kReaders * kRounds);
  auto cat = StoreCatalog::Open(CatalogPath());
  ASSERT_TRUE(cat.ok());
  auto nodes = (*cat)->Nodes();
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ((*nodes)[2].state, NodeState::kLive);  // the writer's last word
}

}  // namespace

// A value flipped on disk (the dataset's name, everywhere it is stored)
// leaves a valid SQLite file whose rows no longer match their checksums:
// the catalog refuses to open, naming the table and the row, rather than
// hand out chunk places it cannot vouch for.
TEST_F(CatalogTest, AValueFlippedOnDiskIsCaughtByItsRowChecksumAndNamed) {
  auto m = Put();
  ASSERT_TRUE(m.ok());
  {
    auto cat = StoreCatalog::Open(CatalogPath());
    ASSERT_TRUE(cat.ok());
    ASSERT_TRUE((*cat)->AddNodes(Nodes()).ok());
    ASSERT_TRUE((*cat)->PutManifest(*m).ok());
  }
  ASSERT_GE(tenax::testing::FlipLastByteOf(CatalogPath(), "fmnist-test"), 2);
  auto cat = StoreCatalog::Open(CatalogPath());
  ASSERT_FALSE(cat.ok());
  EXPECT_EQ(cat.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(cat.status().message().find("table store_dataset, dataset fmnist-tesu: its values do not match"),
            std::string::npos)
      << cat.status().message();
}

}  // namespace tenax::store

#include "tenax/store/dataset_store.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "fashion_mnist_store_test.h"
#include "tenax/core/files.h"

namespace tenax::store {
namespace {

using DatasetStoreTest = FashionMnistStoreTest;

TEST_F(DatasetStoreTest, EveryByteReadsBackAndTheManifestKnowsEveryClass) {
  auto m = Put();
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->stripes.size(), 15u);
  std::vector<uint64_t> expected(10, 0);
  for (uint8_t l : labels_) ++expected[l];
  EXPECT_EQ(m->class_totals, expected);
  uint64_t from_chunks = 0;
  for (const auto& stripe : m->stripes) {
    for (const StoredChunk& c : stripe) {
      for (uint64_t x : c.class_counts) from_chunks += x;
    }
  }
  EXPECT_EQ(from_chunks, 3000u);
  ReadStats stats;
  auto all = ReadRecords(*m, stores_, 0, 3000, &stats);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(*all, records_);
  EXPECT_EQ(stats.chunks_read, 60u);
  EXPECT_EQ(stats.degraded_chunks, 0u);
  // A range inside and across chunks.
  auto part = ReadRecords(*m, stores_, 123, 456);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(*part, std::vector<uint8_t>(records_.begin() + 123 * 785, records_.begin() + (123 + 456) * 785));
}

TEST_F(DatasetStoreTest, WipingMNodesStillReadsEveryByteThroughDegradedReads) {
  auto m = Put();
  ASSERT_TRUE(m.ok()) << m.status().message();
  Wipe(1);
  Wipe(4);
  ReadStats stats;
  auto all = ReadRecords(*m, stores_, 0, 3000, &stats);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(*all, records_);
  EXPECT_EQ(stats.degraded_chunks, static_cast<uint64_t>(DataChunksOn(*m, 1) + DataChunksOn(*m, 4)));
  EXPECT_GT(stats.degraded_chunks, 0u);
}

TEST_F(DatasetStoreTest, FlippedBitsOnDiskAreDetectedAndReadAroundBitExact) {
  auto m = Put();
  ASSERT_TRUE(m.ok());
  int flipped = 0;
  for (uint64_t s : {uint64_t{0}, uint64_t{7}, uint64_t{14}}) {
    const StoredChunk& c = m->stripes[s][1];
    FlipBit(c.node, {"fmnist-test", s, 1});
    ++flipped;
  }
  ReadStats stats;
  auto all = ReadRecords(*m, stores_, 0, 3000, &stats);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(*all, records_);
  EXPECT_EQ(stats.degraded_chunks, static_cast<uint64_t>(flipped));
}

// A chunk file that is intact but not the bytes the manifest records (a
// stale copy written over it) is read around too.
TEST_F(DatasetStoreTest, AnIntactButStaleChunkFileIsReadAround) {
  auto m = Put();
  ASSERT_TRUE(m.ok());
  const StoredChunk& c = m->stripes[3][2];
  ChunkMeta meta;
  meta.id = {"fmnist-test", 3, 2};
  meta.k = 4;
  meta.m = 2;
  std::vector<uint8_t> stale(c.payload_bytes, 0x11);
  ASSERT_TRUE(dirs_[static_cast<size_t>(c.node)]->Put(meta, stale).ok());
  ReadStats stats;
  auto all = ReadRecords(*m, stores_, 0, 3000, &stats);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(*all, records_);
  EXPECT_EQ(stats.degraded_chunks, 1u);
}

TEST_F(DatasetStoreTest, WipingMPlusOneNodesIsAClearErrorNamingTheLostSamples) {
  auto m = Put();
  ASSERT_TRUE(m.ok());
  Wipe(0);
  Wipe(2);
  Wipe(5);
  auto all = ReadRecords(*m, stores_, 0, 3000);
  ASSERT_FALSE(all.ok()) << "read " << all->size() << " bytes with 3 of 6 nodes wiped";
  EXPECT_EQ(all.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(all.status().message().find("fmnist-test stripe 0 is lost: only 3 of its 6 chunks are readable and 4 are "
                                        "needed; samples 0..199 cannot be read"),
            std::string::npos)
      << all.status().message();
}

TEST_F(DatasetStoreTest, BadInputIsRefusedBeforeAnythingIsWritten) {
  auto bad_label = PutDataset("fmnist-test", records_, layout_, 10, [](uint64_t r) { return r == 77 ? 10 : 0; },
                              nodes_, stores_);
  ASSERT_FALSE(bad_label.ok());
  EXPECT_NE(bad_label.status().message().find("record 77 has label 10"), std::string::npos);
  LayoutParams wrong = layout_;
  wrong.records = 2999;
  EXPECT_EQ(PutDataset("fmnist-test", records_, wrong, 10, [](uint64_t) { return 0; }, nodes_, stores_).status().code(),
            StatusCode::kInvalidArgument);
  std::vector<DataNodeInfo> five(nodes_.begin(), nodes_.begin() + 5);
  std::vector<ChunkStore*> five_stores(stores_.begin(), stores_.begin() + 5);
  auto few = PutDataset("fmnist-test", records_, layout_, 10, [](uint64_t) { return 0; }, five, five_stores);
  ASSERT_FALSE(few.ok());
  EXPECT_EQ(few.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(few.status().message().find("only 5 are available"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dirs_[0]->dir()));  // nothing written
}

}  // namespace
}  // namespace tenax::store

// Test fixture shared by the store's tests: real Fashion-MNIST records on
// six data-node directories.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tenax/core/files.h"
#include "tenax/store/dataset_store.h"
#include "tenax/data/fashion_mnist.h"
#include "testing.h"

namespace tenax::store {

// The first 3000 samples of Fashion-MNIST's test split as 785-byte records
// (image, then label), on 6 data nodes (directories), RS 4+2, 50 records
// per chunk: 60 data chunks in 15 stripes.
class FashionMnistStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto data = LoadFashionMnist(kDefaultFashionMnistDir, Split::kTest);
    ASSERT_TRUE(data.ok()) << data.status().message();
    const LabeledImages first = TakeFirst(std::move(*data), 3000);
    labels_ = first.labels;
    records_ = testing::ImageLabelRecords(first.pixels, first.labels, 784);
    layout_.records = 3000;
    layout_.record_bytes = 785;
    layout_.chunk_bytes = 785 * 50;
    for (int i = 0; i < 6; ++i) {
      nodes_.push_back({"data-" + std::to_string(i), ""});
      dirs_.push_back(std::make_unique<DirChunkStore>("data node " + std::to_string(i),
                                                      dir_ / ("node" + std::to_string(i))));
      stores_.push_back(dirs_.back().get());
    }
  }

  Result<DatasetManifest> Put() {
    return PutDataset("fmnist-test", records_, layout_, 10, [this](uint64_t r) { return int{labels_[r]}; }, nodes_,
                      stores_);
  }
  void Wipe(int node) { std::filesystem::remove_all(dirs_[static_cast<size_t>(node)]->dir()); }
  // Data chunks of the manifest held by `node`.
  // Flips one bit in the middle of a chunk file (a bad disk sector).
  void FlipBit(int node, const ChunkId& id) {
    const std::string path = dirs_[static_cast<size_t>(node)]->dir() + "/" + id.FileName();
    auto bytes = ReadFileBytes(path, 1 << 20);
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    (*bytes)[bytes->size() / 2] ^= 0x04;
    ASSERT_TRUE(WriteFileAtomic(path, std::string(bytes->begin(), bytes->end())).ok());
  }
  static int DataChunksOn(const DatasetManifest& m, int node) {
    int count = 0;
    for (const auto& stripe : m.stripes) {
      for (const StoredChunk& c : stripe) count += c.node == node && c.index < 4 ? 1 : 0;
    }
    return count;
  }

  testing::ScratchDir dir_;
  std::vector<uint8_t> records_, labels_;
  LayoutParams layout_;
  std::vector<DataNodeInfo> nodes_;
  std::vector<std::unique_ptr<DirChunkStore>> dirs_;
  std::vector<ChunkStore*> stores_;
};

}  // namespace tenax::store

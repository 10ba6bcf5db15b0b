#include "tenax/data/idx.h"

#include <gtest/gtest.h>

#include "tenax/train/input/data_source.h"
#include "tenax/data/fashion_mnist.h"
#include "tenax/job/train_config.h"
#include "testing.h"

namespace tenax {
namespace {

using testing::Gzip;
using testing::MakeIdx;

std::vector<uint8_t> Iota(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7);
  return v;
}

TEST(IdxTest, DecodesRawAndGzip) {
  auto raw = MakeIdx({3, 2, 2}, Iota(12));
  for (const auto& bytes : {raw, Gzip(raw)}) {
    auto r = DecodeIdx(bytes, "x.idx");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->dims, (std::vector<uint32_t>{3, 2, 2}));
    EXPECT_EQ(r->data, Iota(12));
  }
}

TEST(IdxTest, TruncatedPayloadIsDataLoss) {
  auto raw = MakeIdx({3, 2, 2}, Iota(12));
  raw.resize(raw.size() - 1);
  auto r = DecodeIdx(raw, "images.idx");
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(r.status().message(), "images.idx: truncated: header promises 12 data bytes, file has 11");
}

TEST(IdxTest, TruncatedHeaderAndEmptyFile) {
  EXPECT_EQ(DecodeIdx({}, "e").status().code(), StatusCode::kDataLoss);
  auto raw = MakeIdx({3, 2, 2}, {});
  raw.resize(9);
  EXPECT_EQ(DecodeIdx(raw, "h").status().code(), StatusCode::kDataLoss);
}

TEST(IdxTest, TrailingBytesAreRejected) {
  auto raw = MakeIdx({2}, {1, 2});
  raw.push_back(0);
  EXPECT_EQ(DecodeIdx(raw, "t").status().code(), StatusCode::kDataLoss);
}

TEST(IdxTest, WrongMagicIsNamed) {
  auto raw = MakeIdx({2}, {1, 2});
  raw[0] = 0x50;  // e.g. a PNG or text file
  auto r = DecodeIdx(raw, "labels.idx");
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("wrong magic number"), std::string::npos);
  raw[0] = 0;
  raw[2] = 0x0D;  // float data
  EXPECT_NE(DecodeIdx(raw, "l").status().message().find("unsupported IDX element type 0x0d"), std::string::npos);
}

TEST(IdxTest, CorruptAndTruncatedGzip) {
  auto gz = Gzip(MakeIdx({4096}, Iota(4096)));
  auto truncated = gz;
  truncated.resize(gz.size() / 2);
  auto r = DecodeIdx(truncated, "t.gz");
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();

  auto corrupt = gz;
  for (size_t i = 12; i < corrupt.size() - 8; i += 5) corrupt[i] ^= 0xA5;
  r = DecodeIdx(corrupt, "c.gz");
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("c.gz"), std::string::npos);
}

TEST(IdxTest, OutputLimitStopsGzipBombs) {
  auto gz = Gzip(std::vector<uint8_t>(1 << 20, 0));  // 1 MiB of zeros compresses to ~1 KiB
  auto r = Gunzip(gz, 4096, "bomb.gz");
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("more than 4096 bytes"), std::string::npos);
  // Dimensions that promise more than the limit are refused before allocating.
  auto huge = MakeIdx({60000, 28000, 28000}, {});
  EXPECT_EQ(DecodeIdx(huge, "huge", 1 << 20).status().code(), StatusCode::kDataLoss);
}

// The gzip trailer's size only sizes the buffer: a wrong one is reported
// as corrupt (zlib checks it), and a file of two members (the trailer holds
// the last one's size) decodes to both.
TEST(IdxTest, GzipTrailerSizeIsAHintThatIsChecked) {
  const auto raw = MakeIdx({4096}, Iota(4096));
  for (uint32_t isize : {0xFFFFFFFFu, 1u}) {
    auto gz = Gzip(raw);
    for (int i = 0; i < 4; ++i) gz[gz.size() - 4 + static_cast<size_t>(i)] = static_cast<uint8_t>(isize >> (8 * i));
    auto r = DecodeIdx(gz, "isize.gz");
    ASSERT_FALSE(r.ok()) << isize;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find("isize.gz: corrupt gzip data"), std::string::npos) << r.status().message();
  }
  const std::vector<uint8_t> head(raw.begin(), raw.begin() + 100), tail(raw.begin() + 100, raw.end());
  auto two = Gzip(head);
  const auto second = Gzip(tail);
  two.insert(two.end(), second.begin(), second.end());
  auto r = DecodeIdx(two, "two.gz");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->data, Iota(4096));
}

// The float images a run trains on are (p / 255 - mean) / std of the file's
// pixels, bit for bit what the four whole-tensor ops give.
TEST(FashionMnistTest, OpenedImagesAreTheNormalisedPixelsBitForBit) {
  auto raw = LoadFashionMnist(testing::kFashionMnistDir, Split::kTest);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  TrainConfig c;
  c.data_dir = testing::kFashionMnistDir;
  auto source = OpenDataSource(c, Split::kTest, 0);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto all = (*source)->ReadRange(0, raw->count);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  const auto expected = torch::from_blob(raw->pixels.data(), {raw->count, 1, raw->rows, raw->cols}, torch::kUInt8)
                            .to(torch::kFloat32)
                            .div_(255.0)
                            .sub_(0.2860)
                            .div_(0.3530);
  EXPECT_TRUE(torch::equal(expected, all->images));
  EXPECT_NEAR(-0.2860 / 0.3530, all->images.min().item<double>(), 1e-6);  // a black pixel
}

TEST(FashionMnistTest, LoadsTheInstalledDataset) {
  auto train = LoadFashionMnist(testing::kFashionMnistDir, Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_EQ(train->count, 60000);
  EXPECT_EQ(train->pixels.size(), 60000u * 28 * 28);
  std::vector<int> per_class(10);
  for (uint8_t l : train->labels) per_class[l]++;
  for (int c : per_class) EXPECT_EQ(c, 6000);  // Fashion-MNIST is balanced
  auto test = LoadFashionMnist(testing::kFashionMnistDir, Split::kTest);
  ASSERT_TRUE(test.ok());
  EXPECT_EQ(test->count, 10000);
  EXPECT_EQ(TakeFirst(*test, 100).labels.size(), 100u);
}

TEST(FashionMnistTest, CrossChecksImagesAgainstLabels) {
  auto images = *DecodeIdx(MakeIdx({2, 28, 28}, std::vector<uint8_t>(2 * 28 * 28)), "i");
  auto labels = *DecodeIdx(MakeIdx({3}, {1, 2, 3}), "l");
  auto r = MakeLabeledImages(images, labels, 0, "i", "l");
  EXPECT_EQ(r.status().message(), "i holds 2 images but l holds 3 labels");
  labels = *DecodeIdx(MakeIdx({2}, {1, 10}), "l");
  EXPECT_NE(MakeLabeledImages(images, labels, 0, "i", "l").status().message().find("label 10 at index 1"),
            std::string::npos);
  labels = *DecodeIdx(MakeIdx({2}, {1, 9}), "l");
  EXPECT_EQ(MakeLabeledImages(images, labels, 60000, "i", "l").status().message(),
            "i: holds 2 samples, expected 60000");
  EXPECT_TRUE(MakeLabeledImages(images, labels, 2, "i", "l").ok());
  // Swapped files.
  EXPECT_FALSE(MakeLabeledImages(labels, images, 0, "l", "i").ok());
}

TEST(FashionMnistTest, MissingDirectoryNamesTheFile) {
  auto r = LoadFashionMnist("/nonexistent-data", Split::kTrain);
  ASSERT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent-data/train-images-idx3-ubyte.gz"), std::string::npos);
}

}  // namespace
}  // namespace tenax

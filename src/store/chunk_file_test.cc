#include "tenax/store/chunk_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "tenax/core/checksum.h"
#include "tenax/core/files.h"
#include "testing.h"

namespace tenax::store {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

ChunkMeta Meta(uint64_t stripe, uint32_t index) {
  ChunkMeta m;
  m.id = {"fashion-mnist", stripe, index};
  m.k = 4;
  m.m = 2;
  return m;
}

std::span<const uint8_t> Span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(ChunkFile, RoundTripsTheBytesAndTheirIdentity) {
  const std::vector<uint8_t> payload = RandomBytes(10000, 1);
  auto file = EncodeChunkFile(Meta(12, 5), payload);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto v = DecodeChunkFile(Span(*file), "test");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(std::vector<uint8_t>(v->payload.begin(), v->payload.end()), payload);
  EXPECT_EQ(v->meta.id, (ChunkId{"fashion-mnist", 12, 5}));
  EXPECT_EQ(v->meta.k, 4u);
  EXPECT_EQ(v->meta.m, 2u);
  EXPECT_EQ(v->meta.payload_bytes, payload.size());
  EXPECT_EQ(v->meta.payload_crc32c, Crc32c(payload));
  // An empty chunk is a chunk too (the tail of a stripe).
  auto empty = EncodeChunkFile(Meta(0, 0), {});
  ASSERT_TRUE(empty.ok());
  auto e = DecodeChunkFile(Span(*empty), "empty");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_TRUE(e->payload.empty());
}

// Any flipped bit anywhere in the file (magic, header, its CRC, payload)
// is DataLoss, never other bytes.
TEST(ChunkFile, EveryFlippedBitIsDetected) {
  const std::vector<uint8_t> payload = RandomBytes(3000, 2);
  auto file = EncodeChunkFile(Meta(3, 1), payload);
  ASSERT_TRUE(file.ok());
  std::string bytes = *file;
  int flips = 0;
  for (size_t bit = 0; bit < bytes.size() * 8; bit += (bit < 800 ? 1 : 61)) {
    bytes[bit / 8] = static_cast<char>(bytes[bit / 8] ^ (1 << (bit % 8)));
    auto v = DecodeChunkFile(Span(bytes), "flipped");
    ASSERT_FALSE(v.ok()) << "bit " << bit << " went unnoticed";
    EXPECT_EQ(v.status().code(), StatusCode::kDataLoss) << "bit " << bit << ": " << v.status().message();
    bytes[bit / 8] = static_cast<char>(bytes[bit / 8] ^ (1 << (bit % 8)));
    ++flips;
  }
  EXPECT_GT(flips, 1000);
  EXPECT_TRUE(DecodeChunkFile(Span(bytes), "restored").ok());
}

TEST(ChunkFile, TruncatedOverlongAndForeignFilesAreDataLoss) {
  auto file = EncodeChunkFile(Meta(3, 1), RandomBytes(500, 3));
  ASSERT_TRUE(file.ok());
  for (size_t len : {size_t{0}, size_t{7}, size_t{12}, size_t{30}, file->size() - 1}) {
    auto v = DecodeChunkFile(Span(file->substr(0, len)), "short");
    ASSERT_FALSE(v.ok()) << len;
    EXPECT_EQ(v.status().code(), StatusCode::kDataLoss) << len;
  }
  auto longer = DecodeChunkFile(Span(*file + "x"), "long");
  ASSERT_FALSE(longer.ok());
  EXPECT_NE(longer.status().message().find("truncated or overlong"), std::string::npos) << longer.status().message();
  auto text = DecodeChunkFile(Span(std::string("hello, this is not a chunk file at all")), "text.txt");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("text.txt: not a tenax chunk file"), std::string::npos);
}

TEST(ChunkFile, BadNamesAndShapesAreRefusedBeforeWriting) {
  for (const char* name : {"", ".hidden", "a/b", "../up", "sp ace", "tab\t"}) {
    ChunkMeta m = Meta(0, 0);
    m.id.dataset = name;
    auto f = EncodeChunkFile(m, {});
    ASSERT_FALSE(f.ok()) << name;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  }
  ChunkMeta m = Meta(0, 6);  // 4+2 has chunks 0..5
  EXPECT_FALSE(EncodeChunkFile(m, {}).ok());
  m = Meta(0, 0);
  m.k = 0;
  EXPECT_FALSE(EncodeChunkFile(m, {}).ok());
}

TEST(ChunkFile, WritesDurablyAndReadsBackOnlyTheExpectedChunk) {
  testing::ScratchDir dir;
  const std::vector<uint8_t> payload = RandomBytes(5000, 4);
  auto path = WriteChunkFile(dir.path(), Meta(7, 2), payload);
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(*path, dir.path() + "/fashion-mnist/s00000007.c2.chunk");
  // Only the final name is left: no temporary file.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/fashion-mnist")) {
    ++files;
    EXPECT_EQ(e.path().filename(), "s00000007.c2.chunk");
  }
  EXPECT_EQ(files, 1);
  auto chunk = ReadChunkFile(*path, {"fashion-mnist", 7, 2});
  ASSERT_TRUE(chunk.ok()) << chunk.status().message();
  EXPECT_EQ(chunk->payload, payload);

  // The file of another chunk under this name (a misplaced copy) is DataLoss.
  auto other = ReadChunkFile(*path, {"fashion-mnist", 7, 3});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(other.status().message().find("expected fashion-mnist stripe 7 chunk 3"), std::string::npos)
      << other.status().message();

  // A byte flipped on disk is found on the next read.
  auto bytes = ReadFileBytes(*path, 1 << 20);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() - 100] ^= 0x10;
  ASSERT_TRUE(WriteFileAtomic(*path, std::string(bytes->begin(), bytes->end())).ok());
  auto flipped = ReadChunkFile(*path, {"fashion-mnist", 7, 2});
  ASSERT_FALSE(flipped.ok());
  EXPECT_EQ(flipped.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(flipped.status().message().find("fails its payload CRC-32C"), std::string::npos);

  // A wiped disk: NotFound, naming the file.
  std::filesystem::remove_all(dir.path() + "/fashion-mnist");
  auto gone = ReadChunkFile(*path, {"fashion-mnist", 7, 2});
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_NE(gone.status().message().find("s00000007.c2.chunk"), std::string::npos);
}

}  // namespace
}  // namespace tenax::store

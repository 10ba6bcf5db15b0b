#include "tenax/ps/shard_checkpoint.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "testing.h"

namespace tenax::ps {
namespace {

using tenax::testing::ScratchDir;

ShardCheckpoint Make(uint64_t merges, float base) {
  ShardCheckpoint c;
  c.job_id = "job";
  c.plan_fingerprint = "0123456789abcdef";
  c.shard = 1;
  c.shards = 2;
  c.param_offset = 100;
  c.version = merges;
  c.merges = merges;
  c.rule = "vc_asgd";
  c.written_unix_ms = 1234;
  c.params = {base, -0.0f, std::numeric_limits<float>::quiet_NaN(), 1e-30f, base * 2};
  return c;
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ShardCheckpointTest, EncodeDecodeRoundTripsEveryBit) {
  const ShardCheckpoint c = Make(7, 3.5f);
  const std::string bytes = EncodeShardCheckpoint(c);
  auto d = DecodeShardCheckpoint({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "mem");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ("job", d->job_id);
  EXPECT_EQ(c.plan_fingerprint, d->plan_fingerprint);
  EXPECT_EQ(1u, d->shard);
  EXPECT_EQ(2u, d->shards);
  EXPECT_EQ(100u, d->param_offset);
  EXPECT_EQ(7u, d->version);
  EXPECT_EQ(7u, d->merges);
  EXPECT_EQ("vc_asgd", d->rule);
  EXPECT_EQ(1234, d->written_unix_ms);
  EXPECT_TRUE(SameBits(c.params, d->params));
  EXPECT_EQ(bytes, EncodeShardCheckpoint(*d));
}

// Tail averaging's sums travel with the model: a shard restarted inside
// the job's tail goes on averaging from where its checkpoint was, and a
// file cut inside the sums is damaged, not a checkpoint without them.
TEST(ShardCheckpointTest, TailSumsRoundTripAndACutInsideThemIsDataLoss) {
  ShardCheckpoint c = Make(9, 1.25f);
  c.tail_merges = 3;
  c.tail_sum = {0.1, -2.5, 1e300, -0.0, 3.0 + 1e-12};
  const std::string bytes = EncodeShardCheckpoint(c);
  // Five float64 sums and the header's two bytes for tail_merges = 3.
  EXPECT_EQ(EncodeShardCheckpoint(Make(9, 1.25f)).size() + 5 * sizeof(double) + 2, bytes.size());
  auto d = DecodeShardCheckpoint({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "mem");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(3u, d->tail_merges);
  ASSERT_EQ(c.tail_sum.size(), d->tail_sum.size());
  EXPECT_EQ(0, std::memcmp(c.tail_sum.data(), d->tail_sum.data(), c.tail_sum.size() * sizeof(double)));
  EXPECT_TRUE(SameBits(c.params, d->params));

  // Without tail merges no sums are written or read.
  auto plain = EncodeShardCheckpoint(Make(9, 1.25f));
  auto p = DecodeShardCheckpoint({reinterpret_cast<const uint8_t*>(plain.data()), plain.size()}, "plain");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(0u, p->tail_merges);
  EXPECT_TRUE(p->tail_sum.empty());

  // Cut 8 bytes out of the sums (the CRC moved up to stay at the end).
  std::string cut = bytes.substr(0, bytes.size() - 4 - 8);
  cut += bytes.substr(bytes.size() - 4);
  auto bad = DecodeShardCheckpoint({reinterpret_cast<const uint8_t*>(cut.data()), cut.size()}, "cut.ckpt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(StatusCode::kDataLoss, bad.status().code());
  EXPECT_NE(std::string::npos, bad.status().message().find("cut.ckpt")) << bad.status().message();
}

TEST(ShardCheckpointTest, WritesNamedFilesAndKeepsTheNewestTwo) {
  ScratchDir dir;
  const std::string d = dir / "ck";
  for (uint64_t m : {4, 8, 12, 16}) ASSERT_TRUE(WriteShardCheckpoint(d, Make(m, static_cast<float>(m))).ok());
  EXPECT_EQ((std::vector<std::string>{"shard-1-000000000012.ckpt", "shard-1-000000000016.ckpt"}), Files(d));
  auto loaded = LoadNewestShardCheckpoint(d, Make(0, 0));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ(16u, (*loaded)->checkpoint.merges);
  EXPECT_FLOAT_EQ(32.0f, (*loaded)->checkpoint.params[4]);
  EXPECT_TRUE((*loaded)->skipped.empty());
  EXPECT_FALSE(WriteShardCheckpoint(d, Make(20, 0), 1).ok());
}

TEST(ShardCheckpointTest, ATruncatedNewestFileFallsBackToThePreviousOne) {
  ScratchDir dir;
  const std::string d = dir / "ck";
  ASSERT_TRUE(WriteShardCheckpoint(d, Make(4, 4)).ok());
  ASSERT_TRUE(WriteShardCheckpoint(d, Make(8, 8)).ok());
  const std::string newest = d + "/shard-1-000000000008.ckpt";
  std::filesystem::resize_file(newest, std::filesystem::file_size(newest) - 7);
  auto loaded = LoadNewestShardCheckpoint(d, Make(0, 0));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ(4u, (*loaded)->checkpoint.merges);
  ASSERT_EQ(1u, (*loaded)->skipped.size());
  EXPECT_NE(std::string::npos, (*loaded)->skipped[0].find("000000000008.ckpt")) << (*loaded)->skipped[0];
  EXPECT_NE(std::string::npos, (*loaded)->skipped[0].find("truncated")) << (*loaded)->skipped[0];
}

TEST(ShardCheckpointTest, AFlippedByteFailsTheCrc) {
  ScratchDir dir;
  const std::string d = dir / "ck";
  ASSERT_TRUE(WriteShardCheckpoint(d, Make(4, 4)).ok());
  ASSERT_TRUE(WriteShardCheckpoint(d, Make(8, 8)).ok());
  const std::string newest = d + "/shard-1-000000000008.ckpt";
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-10, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-10, std::ios::end);
    f.put(static_cast<char>(c ^ 0x40));
  }
  auto loaded = LoadNewestShardCheckpoint(d, Make(0, 0));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ(4u, (*loaded)->checkpoint.merges);
  ASSERT_EQ(1u, (*loaded)->skipped.size());
  EXPECT_NE(std::string::npos, (*loaded)->skipped[0].find("CRC")) << (*loaded)->skipped[0];
}

TEST(ShardCheckpointTest, OnlyDamagedCheckpointsAreDataLossNotAFreshStart) {
  ScratchDir dir;
  const std::string d = dir / "ck";
  ASSERT_TRUE(WriteShardCheckpoint(d, Make(4, 4)).ok());
  std::filesystem::resize_file(d + "/shard-1-000000000004.ckpt", 20);
  auto loaded = LoadNewestShardCheckpoint(d, Make(0, 0));
  EXPECT_EQ(StatusCode::kDataLoss, loaded.status().code());
}

TEST(ShardCheckpointTest, ACheckpointOfAnotherJobOrLayoutIsRefused) {
  ScratchDir dir;
  const std::string d = dir / "ck";
  ASSERT_TRUE(WriteShardCheckpoint(d, Make(4, 4)).ok());
  ShardCheckpoint other = Make(0, 0);
  other.job_id = "other";
  auto r = LoadNewestShardCheckpoint(d, other);
  EXPECT_EQ(StatusCode::kFailedPrecondition, r.status().code());
  EXPECT_NE(std::string::npos, r.status().message().find("other")) << r.status().message();
  ShardCheckpoint layout = Make(0, 0);
  layout.params.resize(9);
  EXPECT_EQ(StatusCode::kFailedPrecondition, LoadNewestShardCheckpoint(d, layout).status().code());
  ShardCheckpoint plan = Make(0, 0);
  plan.plan_fingerprint = "ffffffffffffffff";
  EXPECT_EQ(StatusCode::kFailedPrecondition, LoadNewestShardCheckpoint(d, plan).status().code());
}

TEST(ShardCheckpointTest, NoDirectoryIsAFreshStart) {
  ScratchDir dir;
  auto r = LoadNewestShardCheckpoint(dir / "none", Make(0, 0));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
}

TEST(ShardCheckpointTest, GarbageIsDataLoss) {
  const std::string bytes = EncodeShardCheckpoint(Make(1, 1));
  auto decode = [](const std::string& b) {
    return DecodeShardCheckpoint({reinterpret_cast<const uint8_t*>(b.data()), b.size()}, "f").status();
  };
  EXPECT_EQ(StatusCode::kDataLoss, decode("").code());
  EXPECT_EQ(StatusCode::kDataLoss, decode("TNXPSCK2" + bytes.substr(8)).code());
  std::string huge_header = bytes;
  huge_header[8] = '\xff';
  huge_header[9] = '\xff';
  EXPECT_EQ(StatusCode::kDataLoss, decode(huge_header).code());
  EXPECT_EQ(StatusCode::kDataLoss, decode(bytes + "x").code());
}

}  // namespace

// A shard's checkpoint directory on a disk that fills (a 192 KiB tmpfs the
// test mounts; root only): two 80 KB checkpoints fit, the third does not.
// Its write fails naming the directory and the disk's reason, leaves no
// temporary or torn file, and the shard restarts from the newest whole
// checkpoint, bit for bit. Once space is freed, writing goes on.
TEST(ShardCheckpointTest, AFullDiskFailsTheWriteNamingThePathAndKeepsTheLastCheckpoint) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  ScratchDir dir;
  const std::string disk = dir / "disk";
  std::filesystem::create_directories(disk);
  ASSERT_EQ(::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=192k"), 0) << std::strerror(errno);
  struct Unmount {
    std::string at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{disk};
  auto big = [](uint64_t merges) {
    ShardCheckpoint c = Make(merges, static_cast<float>(merges));
    c.params.resize(20000);
    for (size_t i = 0; i < c.params.size(); ++i) c.params[i] = static_cast<float>(merges * 100000 + i);
    return c;
  };
  const std::string ckpt = disk + "/server-1";
  ASSERT_OK(WriteShardCheckpoint(ckpt, big(1)));
  ASSERT_OK(WriteShardCheckpoint(ckpt, big(2)));
  Status full = WriteShardCheckpoint(ckpt, big(3));
  ASSERT_FALSE(full.ok()) << "the disk never filled";
  EXPECT_EQ(StatusCode::kIoError, full.code()) << full.ToString();
  EXPECT_NE(std::string::npos, full.message().find(ckpt)) << full.ToString();
  EXPECT_NE(std::string::npos, full.message().find("No space left on device")) << full.ToString();
  // Only the two whole checkpoints: no temporary file, no torn third one.
  EXPECT_EQ((std::vector<std::string>{"shard-1-000000000001.ckpt", "shard-1-000000000002.ckpt"}), Files(ckpt));
  ShardCheckpoint expect = big(0);
  auto loaded = LoadNewestShardCheckpoint(ckpt, expect);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ(2u, (*loaded)->checkpoint.merges);
  EXPECT_TRUE(SameBits(big(2).params, (*loaded)->checkpoint.params));
  EXPECT_TRUE((*loaded)->skipped.empty());
  // Space freed (the older checkpoint removed): the next write fits.
  std::filesystem::remove(ckpt + "/shard-1-000000000001.ckpt");
  ASSERT_OK(WriteShardCheckpoint(ckpt, big(3)));
  EXPECT_EQ((std::vector<std::string>{"shard-1-000000000002.ckpt", "shard-1-000000000003.ckpt"}), Files(ckpt));
}

}  // namespace tenax::ps

#include "tenax/store/recovery.h"

#include <gtest/gtest.h>

#include <set>

#include "fashion_mnist_store_test.h"

namespace tenax::store {
namespace {

class RecoveryTest : public FashionMnistStoreTest {
 protected:
  std::vector<bool> AliveWithout(std::initializer_list<int> failed) {
    std::vector<bool> alive(6, true);
    for (int f : failed) alive[static_cast<size_t>(f)] = false;
    return alive;
  }
  // Reads everything back and returns how many reads were degraded.
  uint64_t ExpectEveryByte(const DatasetManifest& m) {
    ReadStats stats;
    auto all = ReadRecords(m, stores_, 0, 3000, &stats);
    EXPECT_TRUE(all.ok()) << all.status().message();
    if (all.ok()) {
      EXPECT_TRUE(*all == records_) << "records differ after recovery";
    }
    return stats.degraded_chunks;
  }
};

TEST_F(RecoveryTest, FullRecoveryOfTwoWipedNodesRebuildsEveryChunkOntoLiveNodesBitExact) {
  auto m = Put();
  ASSERT_TRUE(m.ok()) << m.status().message();
  Wipe(1);
  Wipe(4);
  const auto alive = AliveWithout({1, 4});
  auto lost = FindLostChunks(*m, stores_, alive, /*verify=*/false);
  uint64_t lost_bytes = 0, lost_on_1_and_4 = 0;
  for (const auto& f : lost) lost_bytes += f.chunk.bytes;
  for (const auto& stripe : m->stripes) {
    for (const StoredChunk& c : stripe) lost_on_1_and_4 += (c.node == 1 || c.node == 4) ? 1 : 0;
  }
  ASSERT_EQ(lost.size(), lost_on_1_and_4);
  std::set<uint64_t> stripes_hit;
  for (const auto& f : lost) stripes_hit.insert(f.chunk.stripe);

  auto report = RecoverChunks(*m, stores_, nodes_, alive, lost, {"full", {}, false});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->dataset, "fmnist-test");
  EXPECT_EQ(report->chunks_rebuilt, lost.size());
  EXPECT_EQ(report->bytes_written, lost_bytes);
  EXPECT_TRUE(report->unrecoverable.empty());
  // Each stripe hit is decoded once from k = 4 survivors.
  uint64_t expected_read = 0;
  for (uint64_t s : stripes_hit) {
    std::vector<bool> gone(6, false);
    for (const auto& f : lost) {
      if (f.chunk.stripe == s) gone[f.chunk.index] = true;
    }
    int taken = 0;
    for (uint32_t i = 0; i < 6 && taken < 4; ++i) {
      if (gone[i]) continue;
      expected_read += m->stripes[s][i].payload_bytes;
      ++taken;
    }
  }
  EXPECT_EQ(report->bytes_read, expected_read);
  for (const auto& stripe : m->stripes) {
    for (const StoredChunk& c : stripe) EXPECT_TRUE(c.node != 1 && c.node != 4) << "a chunk left on a failed node";
  }
  // 4 live nodes for 6 chunks per stripe: stripes must now share nodes.
  EXPECT_TRUE(report->shares_a_node);
  EXPECT_EQ(ExpectEveryByte(*m), 0u);  // nothing degraded: every chunk is back
  EXPECT_TRUE(FindLostChunks(*m, stores_, alive, /*verify=*/true).empty());
}

TEST_F(RecoveryTest, AScrubFindsFlippedBitsAndRepairsThemInPlace) {
  auto m = Put();
  ASSERT_TRUE(m.ok());
  std::set<std::pair<uint64_t, uint32_t>> flipped = {{0, 1}, {7, 5}, {14, 2}};
  std::vector<int> nodes_before;
  for (auto [s, i] : flipped) {
    FlipBit(m->stripes[s][i].node, {"fmnist-test", s, i});
    nodes_before.push_back(m->stripes[s][i].node);
  }
  const auto alive = AliveWithout({});
  EXPECT_TRUE(FindLostChunks(*m, stores_, alive, /*verify=*/false).empty());  // only a scrub reads the bytes
  auto lost = FindLostChunks(*m, stores_, alive, /*verify=*/true);
  std::set<std::pair<uint64_t, uint32_t>> found;
  for (const auto& f : lost) {
    found.insert({f.chunk.stripe, f.chunk.index});
    EXPECT_NE(f.reason.find("CRC"), std::string::npos) << f.reason;
  }
  EXPECT_EQ(found, flipped);
  auto report = RecoverChunks(*m, stores_, nodes_, alive, lost, {"full", {}, false});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->chunks_rebuilt, 3u);
  size_t n = 0;
  for (auto [s, i] : flipped) EXPECT_EQ(m->stripes[s][i].node, nodes_before[n++]) << "a repaired chunk moved";
  EXPECT_FALSE(report->shares_a_node);
  EXPECT_TRUE(FindLostChunks(*m, stores_, alive, /*verify=*/true).empty());
  EXPECT_EQ(ExpectEveryByte(*m), 0u);
}

TEST_F(RecoveryTest, PrmRebuildsOnlyItsFirstSetAndLeavesTheRestDegradedButReadable) {
  auto m = Put();
  ASSERT_TRUE(m.ok());
  Wipe(2);
  const auto alive = AliveWithout({2});
  auto lost = FindLostChunks(*m, stores_, alive, false);
  ASSERT_FALSE(lost.empty());
  // Keep 99% of the samples: one lost node holds about a sixth of them, so
  // some but not all of its data chunks must come back first.
  PrmParams prm;
  prm.min_available = 0.99;
  prm.class_tolerance = 0.01;
  auto report = RecoverChunks(*m, stores_, nodes_, alive, lost, {"prm", prm, false});
  ASSERT_TRUE(report.ok()) << report.status().message();
  const RecoveryPlan& plan = report->plan;
  EXPECT_FALSE(plan.first.empty());
  EXPECT_FALSE(plan.later.empty());
  EXPECT_EQ(report->chunks_rebuilt, plan.first.size());
  EXPECT_EQ(report->bytes_written, plan.first_bytes);
  EXPECT_GE(plan.available_share, 0.99);
  // The first set is on live nodes now, the later set still on node 2.
  for (size_t i : plan.first) {
    const auto& c = report->lost[i].chunk;
    EXPECT_NE(m->stripes[c.stripe][c.index].node, 2);
  }
  for (size_t i : plan.later) {
    const auto& c = report->lost[i].chunk;
    EXPECT_EQ(m->stripes[c.stripe][c.index].node, 2);
  }
  // Every byte still reads back; only the later data chunks are degraded.
  uint64_t later_data = 0;
  for (size_t i : plan.later) later_data += report->lost[i].chunk.parity ? 0 : 1;
  EXPECT_EQ(ExpectEveryByte(*m), later_data);
  // The background pass rebuilds the rest.
  auto rest = RecoverChunks(*m, stores_, nodes_, alive, FindLostChunks(*m, stores_, alive, false),
                            {"prm", prm, /*rebuild_later=*/true});
  ASSERT_TRUE(rest.ok()) << rest.status().message();
  EXPECT_EQ(rest->chunks_rebuilt, plan.later.size());
  EXPECT_EQ(ExpectEveryByte(*m), 0u);
}

TEST_F(RecoveryTest, ThreeWipedNodesNameTheStripesThatCannotComeBackAndRebuildTheOthers) {
  auto m = Put();
  ASSERT_TRUE(m.ok());
  Wipe(0);
  Wipe(2);
  Wipe(5);
  const auto alive = AliveWithout({0, 2, 5});
  auto report = RecoverChunks(*m, stores_, nodes_, alive, FindLostChunks(*m, stores_, alive, false),
                              {"full", {}, false});
  ASSERT_TRUE(report.ok()) << report.status().message();
  // Stripes with 3 chunks on the wiped nodes are gone; with 6 nodes and 6
  // chunks per stripe every stripe has exactly 3 there.
  ASSERT_EQ(report->unrecoverable.size(), 15u);
  EXPECT_EQ(report->unrecoverable[0], "stripe 0 (samples 0..199): only 3 of its 6 chunks are readable, 4 are needed");
  EXPECT_EQ(report->unrecoverable_samples, 3000u);
  EXPECT_EQ(report->chunks_rebuilt, 0u);
}

TEST_F(RecoveryTest, ABadPolicyOrNoLiveNodeIsRefusedWithoutWriting) {
  auto m = Put();
  ASSERT_TRUE(m.ok());
  const DatasetManifest before = *m;
  auto bad = RecoverChunks(*m, stores_, nodes_, AliveWithout({1}), FindLostChunks(*m, stores_, AliveWithout({1}), false),
                           {"fastest", {}, false});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  auto none = RecoverChunks(*m, stores_, nodes_, std::vector<bool>(6, false),
                            FindLostChunks(*m, stores_, std::vector<bool>(6, false), false), {"full", {}, false});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  for (size_t s = 0; s < m->stripes.size(); ++s) {
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(m->stripes[s][i].node, before.stripes[s][i].node);
  }
}

}  // namespace
}  // namespace tenax::store

#include "tenax/store/reed_solomon.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace tenax::store {
namespace {

struct Stripe {
  std::vector<std::vector<uint8_t>> chunks;
  std::vector<uint8_t*> Pointers() {
    std::vector<uint8_t*> p;
    for (auto& c : chunks) p.push_back(c.data());
    return p;
  }
};

Stripe Encoded(const ReedSolomon& rs, size_t len, uint32_t seed) {
  std::mt19937 rng(seed);
  Stripe s;
  s.chunks.assign(static_cast<size_t>(rs.k() + rs.m()), std::vector<uint8_t>(len));
  for (int i = 0; i < rs.k(); ++i) {
    for (auto& b : s.chunks[static_cast<size_t>(i)]) b = static_cast<uint8_t>(rng());
  }
  auto p = s.Pointers();
  rs.Encode(len, p.data(), p.data() + rs.k());
  return s;
}

// Every pattern of up to m lost chunks of k+m, for several (k, m), is
// rebuilt bit-exact (data and parity) from the rest.
TEST(ReedSolomon, EveryLossOfUpToMChunksIsRebuiltBitExact) {
  int patterns = 0;
  for (auto [k, m] : std::vector<std::pair<int, int>>{{4, 2}, {1, 1}, {2, 3}, {6, 3}, {10, 4}, {3, 0}}) {
    auto rs = ReedSolomon::Create(k, m);
    ASSERT_TRUE(rs.ok()) << rs.status().message();
    const size_t len = 1000 + static_cast<size_t>(k);  // not a multiple of any vector width
    const Stripe original = Encoded(*rs, len, static_cast<uint32_t>(k * 31 + m));
    const int n = k + m;
    for (unsigned mask = 0; mask < (1u << n); ++mask) {
      if (__builtin_popcount(mask) > m) continue;
      Stripe damaged = original;
      std::vector<bool> present(static_cast<size_t>(n), true);
      for (int i = 0; i < n; ++i) {
        if ((mask >> i) & 1u) {
          present[static_cast<size_t>(i)] = false;
          std::fill(damaged.chunks[static_cast<size_t>(i)].begin(), damaged.chunks[static_cast<size_t>(i)].end(), 0xEE);
        }
      }
      auto p = damaged.Pointers();
      ASSERT_TRUE(rs->Reconstruct(len, present, p.data()).ok()) << k << "+" << m << " mask " << mask;
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(damaged.chunks[static_cast<size_t>(i)], original.chunks[static_cast<size_t>(i)])
            << k << "+" << m << " lost mask " << mask << ", chunk " << i;
      }
      ++patterns;
    }
  }
  EXPECT_EQ(patterns, 22 + 3 + 26 + 130 + 1471 + 1);  // sum over (k, m) of sum_{j<=m} C(k+m, j)
}

TEST(ReedSolomon, ParityIsNotACopyAndChangesWithEveryDataByte) {
  auto rs = ReedSolomon::Create(4, 2);
  ASSERT_TRUE(rs.ok());
  Stripe s = Encoded(*rs, 256, 7);
  EXPECT_NE(s.chunks[4], s.chunks[5]);
  for (int i = 0; i < 4; ++i) EXPECT_NE(s.chunks[4], s.chunks[static_cast<size_t>(i)]);
  Stripe t = s;
  t.chunks[2][100] ^= 1;
  auto p = t.Pointers();
  rs->Encode(256, p.data(), p.data() + 4);
  EXPECT_NE(t.chunks[4][100], s.chunks[4][100]);
  EXPECT_NE(t.chunks[5][100], s.chunks[5][100]);
  for (size_t b = 0; b < 256; ++b) {
    if (b == 100) continue;
    EXPECT_EQ(t.chunks[4][b], s.chunks[4][b]);  // bytewise code: only that column changes
  }
}

TEST(ReedSolomon, TooManyLossesAndBadParametersAreClearErrors) {
  auto rs = ReedSolomon::Create(4, 2);
  ASSERT_TRUE(rs.ok());
  Stripe s = Encoded(*rs, 64, 1);
  const Stripe before = s;
  auto p = s.Pointers();
  auto st = rs->Reconstruct(64, {false, true, false, true, false, true}, p.data());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("only 3 of 6 chunks survive, at least 4"), std::string::npos) << st.message();
  EXPECT_EQ(s.chunks, before.chunks);  // nothing written
  EXPECT_EQ(rs->Reconstruct(64, {true, true}, p.data()).code(), StatusCode::kInvalidArgument);
  for (auto [k, m] : std::vector<std::pair<int, int>>{{0, 2}, {4, -1}, {200, 56}}) {
    auto bad = ReedSolomon::Create(k, m);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("k + m <= 255"), std::string::npos) << bad.status().message();
  }
  EXPECT_TRUE(ReedSolomon::Create(200, 55).ok());
}

}  // namespace
}  // namespace tenax::store

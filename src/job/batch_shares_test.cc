#include "tenax/job/batch_shares.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

namespace tenax {
namespace {

int64_t Sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

TEST(BatchShares, EvenSplitGivesTheRemainderToTheFirstMembers) {
  EXPECT_EQ((std::vector<int64_t>{86, 85, 85}), EvenShares(256, 3));
  EXPECT_EQ((std::vector<int64_t>{64, 64, 64, 64}), EvenShares(256, 4));
}

// The case that motivated it: 3 processes on 2 cores, one alone on a core
// (0.1 ms per sample) and two sharing the other (0.2 ms each).
TEST(BatchShares, AMemberTwiceAsFastGetsTwiceTheSamples) {
  const std::vector<float> s{1e-4f, 2e-4f, 2e-4f};
  EXPECT_EQ((std::vector<int64_t>{128, 64, 64}), BalancedShares(s, 256));
}

TEST(BatchShares, EqualSpeedsGiveTheEvenSplit) {
  const std::vector<float> s(3, 3e-4f);
  EXPECT_EQ(EvenShares(256, 3), BalancedShares(s, 256));
}

TEST(BatchShares, RoundingRemaindersGoToTheLargestFractionsAndTheSumIsExact) {
  // Ideal shares 100 x (1, 1/3, 1/7) / (31/21) = 67.74, 22.58, 9.68.
  const std::vector<float> s{1.0f, 3.0f, 7.0f};
  const auto shares = BalancedShares(s, 100);
  EXPECT_EQ((std::vector<int64_t>{68, 22, 10}), shares);
  EXPECT_EQ(100, Sum(shares));
}

TEST(BatchShares, AVerySlowMemberKeepsTheMinimumShare) {
  // 256 / (8 x 4) = 8 samples at least, taken back from the largest share.
  const std::vector<float> s{1e-4f, 1e-4f, 1e-4f, 1.0f};
  const auto shares = BalancedShares(s, 256);
  EXPECT_EQ(8, shares[3]);
  EXPECT_EQ(256, Sum(shares));
  EXPECT_EQ((std::vector<int64_t>{82, 83, 83, 8}), shares);
}

TEST(BatchShares, AMissingOrCorruptMeasurementGivesTheEvenSplit) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float bad : {0.0f, -1e-4f, nan, inf}) {
    const std::vector<float> s{1e-4f, bad, 2e-4f};
    EXPECT_EQ(EvenShares(96, 3), BalancedShares(s, 96)) << bad;
  }
  // A denormal time (an absurd rate) still gives an exact split, with the minimum.
  const std::vector<float> tiny{std::numeric_limits<float>::denorm_min(), 1e-4f};
  EXPECT_EQ((std::vector<int64_t>{60, 4}), BalancedShares(tiny, 64));
}

TEST(BatchShares, FewerSamplesThanMembersIsTheEvenSplit) {
  const std::vector<float> s{1e-4f, 2e-4f, 3e-4f};
  EXPECT_EQ((std::vector<int64_t>{1, 1, 0}), BalancedShares(s, 2));
}

}  // namespace
}  // namespace tenax

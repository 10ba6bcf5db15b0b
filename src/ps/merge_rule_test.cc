#include "tenax/ps/merge_rule.h"

#include <gtest/gtest.h>

#include <vector>

namespace tenax::ps {
namespace {

std::unique_ptr<MergeRule> Rule(MergeParams p) {
  auto r = MakeMergeRule(p);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : nullptr;
}

// MergeInput holds a span: `result` must outlive it.
MergeInput In(const std::vector<float>& result, int64_t staleness, int64_t done = 10, int64_t steps = 10) {
  return MergeInput{result, staleness, done, steps};
}

TEST(MergeRuleTest, VcAsgdAtStalenessZeroTakesTheReturnedModel) {
  auto r = Rule({.rule = "vc_asgd"});
  ASSERT_TRUE(r);
  EXPECT_EQ(ResultKind::kModel, r->expects());
  std::vector<float> w = {1, 2, 3};
  r->Apply(w, In({5, 6, 7}, 0));
  EXPECT_EQ((std::vector<float>{5, 6, 7}), w);
}

TEST(MergeRuleTest, VcAsgdKeepsThreeQuartersOfTheServerModelAtStalenessThree) {
  auto r = Rule({.rule = "vc_asgd"});
  ASSERT_TRUE(r);
  std::vector<float> w = {4, -8}, result = {0, 8};
  const auto in = In(result, 3);
  EXPECT_DOUBLE_EQ(0.25, r->Weight(in));
  r->Apply(w, in);
  EXPECT_FLOAT_EQ(3.0f, w[0]);   // 0.75*4 + 0.25*0
  EXPECT_FLOAT_EQ(-4.0f, w[1]);  // 0.75*-8 + 0.25*8
}

TEST(MergeRuleTest, VcAsgdWeighsAPartialResultByItsSteps) {
  auto r = Rule({.rule = "vc_asgd"});
  ASSERT_TRUE(r);
  std::vector<float> w = {0}, result = {10};
  const auto in = In(result, 0, 5, 10);
  EXPECT_DOUBLE_EQ(0.5, r->Weight(in));
  r->Apply(w, in);
  EXPECT_FLOAT_EQ(5.0f, w[0]);
}

TEST(MergeRuleTest, VcAsgdAlphaAndPowerShapeTheWeight) {
  auto r = Rule({.rule = "vc_asgd", .alpha = 0.5, .staleness_power = 2});
  ASSERT_TRUE(r);
  EXPECT_DOUBLE_EQ(0.5 / 4.0, r->Weight(In({1}, 1)));  // (1-alpha) / (1+1)^2
  std::vector<float> w = {8};
  r->Apply(w, In({0}, 1));
  EXPECT_FLOAT_EQ(7.0f, w[0]);  // 8 * (1 - 0.125)
}

TEST(MergeRuleTest, DeltaAddsTheDeltaScaledByStaleness) {
  auto r = Rule({.rule = "delta"});
  ASSERT_TRUE(r);
  EXPECT_EQ(ResultKind::kDelta, r->expects());
  std::vector<float> w = {1, 1};
  r->Apply(w, In({2, -4}, 1));
  EXPECT_FLOAT_EQ(2.0f, w[0]);   // 1 + 2/2
  EXPECT_FLOAT_EQ(-1.0f, w[1]);  // 1 - 4/2
  EXPECT_DOUBLE_EQ(1.0 / 3.0, r->Weight(In({0}, 2)));
}

TEST(MergeRuleTest, AsgdStepsAgainstTheGradientSum) {
  auto r = Rule({.rule = "asgd", .lr = 0.5});
  ASSERT_TRUE(r);
  EXPECT_EQ(ResultKind::kGradientSum, r->expects());
  std::vector<float> w = {1, 1};
  r->Apply(w, In({2, -2}, 0));
  EXPECT_FLOAT_EQ(0.0f, w[0]);
  EXPECT_FLOAT_EQ(2.0f, w[1]);
  std::vector<float> stale = {1};
  r->Apply(stale, In({2}, 3));
  EXPECT_FLOAT_EQ(0.75f, stale[0]);  // 1 - 0.5*2/4
}

TEST(MergeRuleTest, ParametersOutOfRangeNameTheirKey) {
  struct Case {
    MergeParams p;
    const char* key;
  };
  for (const Case& c : {Case{{.rule = "sum"}, "async.rule"}, Case{{.alpha = 1.0}, "async.alpha"},
                        Case{{.alpha = -0.1}, "async.alpha"}, Case{{.staleness_power = 5}, "async.staleness_power"},
                        Case{{.lr = 0}, "async.server_lr"}, Case{{.lr = 11}, "async.server_lr"}}) {
    Status st = ValidateMergeParams(c.p);
    EXPECT_EQ(StatusCode::kInvalidArgument, st.code());
    EXPECT_NE(std::string::npos, st.message().find(c.key)) << st.message();
    EXPECT_FALSE(MakeMergeRule(c.p).ok());
  }
}

TEST(MergeRuleTest, KindsHaveTheirNames) {
  EXPECT_STREQ("model", ToString(ResultKind::kModel));
  EXPECT_STREQ("delta", ToString(ResultKind::kDelta));
  EXPECT_STREQ("gradient_sum", ToString(ResultKind::kGradientSum));
}

}  // namespace
}  // namespace tenax::ps

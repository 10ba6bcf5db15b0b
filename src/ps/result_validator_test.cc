#include "tenax/ps/result_validator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace tenax::ps {
namespace {

TEST(ResultValidatorTest, RejectsAWrongSizeFirst) {
  ResultValidator v;
  std::vector<float> r = {1, 2};
  Status st = v.Check(r, 3, 1.0);
  EXPECT_EQ(StatusCode::kInvalidArgument, st.code());
  EXPECT_NE(std::string::npos, st.message().find("2 floats, expected 3")) << st.message();
}

TEST(ResultValidatorTest, RejectsNanAndInfNamingTheIndex) {
  ResultValidator v;
  std::vector<float> nan = {0, 0, 0, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_NE(std::string::npos, v.Check(nan, 4, 1.0).message().find("NaN at index 3"));
  std::vector<float> inf = {0, std::numeric_limits<float>::infinity()};
  EXPECT_NE(std::string::npos, v.Check(inf, 2, 1.0).message().find("Inf at index 1"));
  std::vector<float> fine = {0, 1};
  EXPECT_TRUE(v.Check(fine, 2, 1.0).ok());
  EXPECT_FALSE(v.Check(fine, 2, std::nan("")).ok());
}

TEST(ResultValidatorTest, RejectsANormFarAboveTheMedianOnlyAfterWarmUp) {
  ResultValidator v({.norm_factor = 10, .warmup = 3, .window = 5});
  std::vector<float> r = {1};
  EXPECT_TRUE(v.Check(r, 1, 1e6).ok());  // no distribution yet
  for (double n : {1.0, 2.0, 3.0}) v.RecordAccepted(n);
  EXPECT_DOUBLE_EQ(2.0, v.median());
  EXPECT_TRUE(v.Check(r, 1, 19.9).ok());
  Status st = v.Check(r, 1, 20.1);
  EXPECT_EQ(StatusCode::kInvalidArgument, st.code());
  EXPECT_NE(std::string::npos, st.message().find("median 2")) << st.message();
  EXPECT_TRUE(v.Check(r, 1, 0.001).ok());  // small updates never harm
}

TEST(ResultValidatorTest, TheWindowForgetsOldNorms) {
  ResultValidator v({.norm_factor = 10, .warmup = 1, .window = 3});
  for (double n : {1.0, 1.0, 1.0}) v.RecordAccepted(n);
  std::vector<float> r = {1};
  EXPECT_FALSE(v.Check(r, 1, 50).ok());
  for (double n : {10.0, 10.0, 10.0}) v.RecordAccepted(n);  // the model moves faster now
  EXPECT_DOUBLE_EQ(10.0, v.median());
  EXPECT_TRUE(v.Check(r, 1, 50).ok());
  EXPECT_EQ(6, v.accepted());
}

TEST(ResultValidatorTest, OptionsOutOfRangeAreRefused) {
  EXPECT_NE(std::string::npos, ValidateValidatorOptions({.norm_factor = 0.5}).message().find("async.norm_factor"));
  EXPECT_FALSE(ValidateValidatorOptions({.warmup = 0}).ok());
  EXPECT_FALSE(ValidateValidatorOptions({.warmup = 5, .window = 4}).ok());
  EXPECT_TRUE(ValidateValidatorOptions({}).ok());
}

TEST(UpdateNormTest, ModelResultsMeasureTheirDistanceToTheServerModel) {
  std::vector<float> server = {1, 1}, client = {4, 5};
  EXPECT_DOUBLE_EQ(5.0, UpdateNorm(ResultKind::kModel, client, server));
  EXPECT_DOUBLE_EQ(std::sqrt(41.0), UpdateNorm(ResultKind::kDelta, client, server));
  EXPECT_DOUBLE_EQ(std::sqrt(41.0), UpdateNorm(ResultKind::kGradientSum, client, {}));
  std::vector<float> bad = {std::numeric_limits<float>::infinity(), 0};
  EXPECT_TRUE(std::isnan(UpdateNorm(ResultKind::kDelta, bad, {})));
  std::vector<float> shorter = {1};
  EXPECT_TRUE(std::isnan(UpdateNorm(ResultKind::kModel, shorter, server)));
}

}  // namespace
}  // namespace tenax::ps

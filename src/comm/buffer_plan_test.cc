#include "tenax/comm/buffer_plan.h"

#include <gtest/gtest.h>

#include "torch_views.h"
#include "tenax/train/model.h"
#include "testing.h"

namespace tenax::comm {
using tenax::MakeModel;
}

namespace tenax::comm {
namespace {

TEST(BufferPlanTest, AlignedAscendingLayoutWithSignalAfterData) {
  ASSERT_OK_AND_ASSIGN(
      BufferPlan plan,
      PlanBuffers({{"a", DType::kFloat32, {3}}, {"b", DType::kUInt8, {5}}, {"c", DType::kFloat64, {2, 2}}}));
  ASSERT_EQ(plan.tensors.size(), 3u);
  EXPECT_EQ(plan.tensors[0].offset, 0u);
  EXPECT_EQ(plan.tensors[0].nbytes, 12u);
  EXPECT_EQ(plan.tensors[1].offset, 64u);
  EXPECT_EQ(plan.tensors[1].nbytes, 5u);
  EXPECT_EQ(plan.tensors[2].offset, 128u);
  EXPECT_EQ(plan.tensors[2].nbytes, 32u);
  EXPECT_EQ(plan.data_bytes, 160u);
  EXPECT_EQ(plan.signal_offset % 64, 0u);
  EXPECT_GE(plan.signal_offset, plan.data_bytes);
  EXPECT_EQ(plan.total_bytes, plan.signal_offset + 64);
  ASSERT_NE(plan.Find("b"), nullptr);
  EXPECT_EQ(plan.Find("b")->offset, 64u);
  EXPECT_EQ(plan.Find("zzz"), nullptr);
}

TEST(BufferPlanTest, FingerprintIdentifiesTheTensorList) {
  std::vector<TensorSpec> specs = {{"w", DType::kFloat32, {4, 4}}, {"b", DType::kFloat32, {4}}};
  auto fingerprint = [&](size_t alignment) -> uint64_t {
    ASSIGN_OK_OR_RETURN(BufferPlan plan, PlanBuffers(specs, alignment), 0);
    return plan.fingerprint;
  };
  const uint64_t a = fingerprint(64);
  EXPECT_EQ(fingerprint(64), a);
  specs[1].shape = {5};
  EXPECT_NE(fingerprint(64), a);
  specs[1].shape = {4};
  specs[1].dtype = DType::kFloat64;
  EXPECT_NE(fingerprint(64), a);
  specs[1].dtype = DType::kFloat32;
  specs[1].name = "bias";
  EXPECT_NE(fingerprint(64), a);
  EXPECT_NE(fingerprint(128), fingerprint(64));
}

TEST(BufferPlanTest, DynamicTensorsStayOutOfTheArena) {
  ASSERT_OK_AND_ASSIGN(BufferPlan plan,
                       PlanBuffers({{"w", DType::kFloat32, {10}}, {"tokens", DType::kInt64, {0}, true}}));
  ASSERT_EQ(plan.tensors.size(), 1u);
  EXPECT_EQ(plan.tensors[0].spec.name, "w");
  ASSERT_EQ(plan.dynamic.size(), 1u);
  EXPECT_EQ(plan.dynamic[0].name, "tokens");
  EXPECT_EQ(plan.data_bytes, 40u);
}

TEST(BufferPlanTest, RejectsBadLists) {
  auto error = [](const std::vector<TensorSpec>& specs, size_t alignment = 64) {
    return PlanBuffers(specs, alignment).status().ToString();
  };
  EXPECT_EQ(error({{"a", DType::kFloat32, {1}}, {"a", DType::kFloat32, {1}}}),
            "invalid_argument: tensor 'a' is listed twice");
  EXPECT_EQ(error({{"", DType::kFloat32, {1}}}), "invalid_argument: a tensor without a name");
  EXPECT_EQ(error({{"a", DType::kFloat32, {-1}}}), "invalid_argument: tensor 'a' has a negative dimension");
  EXPECT_EQ(error({{"a", DType::kFloat32, {1 << 30, 1 << 30}}}),
            "invalid_argument: tensor 'a' is larger than 2^48 bytes");
  EXPECT_EQ(error({{"a", DType::kFloat32, {1}}}, 48), "invalid_argument: alignment 48 is not a power of two");
  ASSERT_OK_AND_ASSIGN(BufferPlan empty, PlanBuffers({}));
  EXPECT_TRUE(empty.tensors.empty());
  EXPECT_EQ(empty.data_bytes, 0u);
}

TEST(BufferPlanTest, PlansAModelAndViewsAliasTheArena) {
  ASSERT_OK_AND_ASSIGN(auto model, MakeModel("cnn"));
  ASSERT_OK_AND_ASSIGN(std::vector<TensorSpec> specs, SpecsOf(*model));
  EXPECT_EQ(specs.size(), 8u);  // 2 conv + 2 linear, weight and bias each
  ASSERT_OK_AND_ASSIGN(BufferPlan plan, PlanBuffers(specs));
  std::vector<uint8_t> arena(plan.total_bytes);
  auto params = model->parameters();
  ASSERT_EQ(params.size(), plan.tensors.size());
  for (size_t i = 0; i < params.size(); ++i) {
    torch::Tensor view = View(plan.tensors[i], arena.data());
    EXPECT_EQ(view.sizes(), params[i].sizes());
    view.copy_(params[i].detach());
    EXPECT_EQ(view.data_ptr(), arena.data() + plan.tensors[i].offset);  // no copy: the arena itself
    EXPECT_TRUE(torch::equal(View(plan.tensors[i], arena.data()), params[i]));
  }
}

}  // namespace
}  // namespace tenax::comm

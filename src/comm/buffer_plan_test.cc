#include "tenax/comm/buffer_plan.h"

#include <gtest/gtest.h>

#include "tenax/comm/torch_views.h"
#include "tenax/train/model.h"

namespace tenax::comm {
using tenax::MakeModel;
}

namespace tenax::comm {
namespace {

TEST(BufferPlanTest, AlignedAscendingLayoutWithSignalAfterData) {
  auto plan = PlanBuffers({{"a", DType::kFloat32, {3}}, {"b", DType::kUInt8, {5}}, {"c", DType::kFloat64, {2, 2}}});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->tensors.size(), 3u);
  EXPECT_EQ(plan->tensors[0].offset, 0u);
  EXPECT_EQ(plan->tensors[0].nbytes, 12u);
  EXPECT_EQ(plan->tensors[1].offset, 64u);
  EXPECT_EQ(plan->tensors[2].offset, 128u);
  EXPECT_EQ(plan->tensors[2].nbytes, 32u);
  EXPECT_EQ(plan->data_bytes, 160u);
  EXPECT_EQ(plan->signal_offset % 64, 0u);
  EXPECT_GE(plan->signal_offset, plan->data_bytes);
  EXPECT_EQ(plan->total_bytes, plan->signal_offset + 64);
  EXPECT_EQ(plan->Find("b")->offset, 64u);
  EXPECT_EQ(plan->Find("zzz"), nullptr);
}

TEST(BufferPlanTest, FingerprintIdentifiesTheTensorList) {
  std::vector<TensorSpec> specs = {{"w", DType::kFloat32, {4, 4}}, {"b", DType::kFloat32, {4}}};
  auto a = PlanBuffers(specs), b = PlanBuffers(specs);
  EXPECT_EQ(a->fingerprint, b->fingerprint);
  specs[1].shape = {5};
  EXPECT_NE(PlanBuffers(specs)->fingerprint, a->fingerprint);
  specs[1].shape = {4};
  specs[1].name = "bias";
  EXPECT_NE(PlanBuffers(specs)->fingerprint, a->fingerprint);
  EXPECT_NE(PlanBuffers(specs, 128)->fingerprint, PlanBuffers(specs, 64)->fingerprint);
}

TEST(BufferPlanTest, DynamicTensorsStayOutOfTheArena) {
  auto plan = PlanBuffers({{"w", DType::kFloat32, {10}}, {"tokens", DType::kInt64, {0}, true}});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->tensors.size(), 1u);
  ASSERT_EQ(plan->dynamic.size(), 1u);
  EXPECT_EQ(plan->dynamic[0].name, "tokens");
  EXPECT_EQ(plan->data_bytes, 40u);
}

TEST(BufferPlanTest, RejectsBadLists) {
  EXPECT_EQ(PlanBuffers({{"a", DType::kFloat32, {1}}, {"a", DType::kFloat32, {1}}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(PlanBuffers({{"", DType::kFloat32, {1}}}).ok());
  EXPECT_FALSE(PlanBuffers({{"a", DType::kFloat32, {-1}}}).ok());
  EXPECT_FALSE(PlanBuffers({{"a", DType::kFloat32, {1 << 30, 1 << 30}}}).ok());
  EXPECT_FALSE(PlanBuffers({{"a", DType::kFloat32, {1}}}, 48).ok());
  auto empty = PlanBuffers({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data_bytes, 0u);
}

TEST(BufferPlanTest, PlansAModelAndViewsAliasTheArena) {
  auto model = MakeModel("cnn");
  ASSERT_TRUE(model.ok());
  auto specs = SpecsOf(**model);
  ASSERT_TRUE(specs.ok());
  EXPECT_EQ(specs->size(), 8u);  // 2 conv + 2 linear, weight and bias each
  auto plan = PlanBuffers(*specs);
  ASSERT_TRUE(plan.ok());
  std::vector<uint8_t> arena(plan->total_bytes);
  auto params = (*model)->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    torch::Tensor view = View(plan->tensors[i], arena.data());
    EXPECT_EQ(view.sizes(), params[i].sizes());
    view.copy_(params[i].detach());
    EXPECT_EQ(view.data_ptr(), arena.data() + plan->tensors[i].offset);  // no copy: the arena itself
    EXPECT_TRUE(torch::equal(View(plan->tensors[i], arena.data()), params[i]));
  }
}

}  // namespace
}  // namespace tenax::comm

#include "tenax/train/model.h"

#include <gtest/gtest.h>

#include "testing.h"

namespace tenax {
namespace {

TEST(ModelTest, OutputShapesAreBatchByTenClasses) {
  for (const auto& name : ModelNames()) {
    auto model = MakeModel(name);
    ASSERT_TRUE(model.ok()) << name;
    for (int64_t batch : {1, 7, 64}) {
      auto out = (*model)->forward(torch::randn({batch, 1, 28, 28}));
      EXPECT_EQ(out.sizes(), (std::vector<int64_t>{batch, 10})) << name;
    }
  }
}

// Shapes and class counts come from the data: 3 x 32 x 32 images, 7 classes.
TEST(ModelTest, BuiltinsTakeTheDataShapeAndSaveIt) {
  testing::ScratchDir dir;
  for (const auto& name : ModelNames()) {
    auto model = MakeModel(name, {3, 32, 32}, 7);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto out = (*model)->forward(torch::randn({5, 3, 32, 32}));
    EXPECT_EQ(out.sizes(), (std::vector<int64_t>{5, 7})) << name;
    ASSERT_TRUE(SaveModel(*model, name, {3, 32, 32}, 7, dir / (name + ".pt")).ok());
    auto loaded = LoadModel(dir / (name + ".pt"));
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ(loaded->sample_shape, (std::vector<int64_t>{3, 32, 32}));
    EXPECT_EQ(loaded->classes, 7);
    auto x = torch::randn({2, 3, 32, 32});
    EXPECT_TRUE(torch::equal((*model)->forward(x), loaded->model->forward(x))) << name;
  }
  auto tiny = MakeModel("cnn", {1, 8, 8}, 10);
  ASSERT_EQ(tiny.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("at least 12 x 12"), std::string::npos) << tiny.status().message();
}

TEST(ModelTest, UnknownNameIsInvalidArgument) {
  auto r = MakeModel("resnet");
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("resnet"), std::string::npos);
}

TEST(ModelTest, SaveLoadRoundTripKeepsNameAndWeights) {
  testing::ScratchDir dir;
  torch::manual_seed(3);
  auto model = *MakeModel("cnn");
  ASSERT_TRUE(SaveModel(model, "cnn", kFashionMnistShape, kFashionMnistClassCount, dir / "model.pt").ok());
  auto loaded = LoadModel(dir / "model.pt");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->name, "cnn");
  EXPECT_EQ(loaded->sample_shape, kFashionMnistShape);
  EXPECT_EQ(loaded->classes, kFashionMnistClassCount);
  auto a = model->parameters();
  auto b = loaded->model->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i]));
}

TEST(ModelTest, LoadRejectsMissingAndCorruptFiles) {
  testing::ScratchDir dir;
  EXPECT_EQ(LoadModel(dir / "absent.pt").status().code(), StatusCode::kNotFound);
  testing::WriteBytes(dir / "junk.pt", {'n', 'o', 't', ' ', 'a', ' ', 'm', 'o', 'd', 'e', 'l'});
  auto r = LoadModel(dir / "junk.pt");
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << "one line, no backtrace";
  // A valid archive without the tenax name entry.
  torch::serialize::OutputArchive archive;
  archive.write("w", torch::ones({2}));
  archive.save_to(dir / "foreign.pt");
  EXPECT_EQ(LoadModel(dir / "foreign.pt").status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace tenax

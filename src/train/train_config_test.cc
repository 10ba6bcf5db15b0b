#include "tenax/train/train_config.h"

#include <gtest/gtest.h>

namespace tenax {
namespace {

Result<TrainConfig> Parse(std::string_view text) {
  auto doc = ConfigDoc::Parse(text, "job.toml");
  if (!doc.ok()) return doc.status();
  return ParseTrainConfig(*doc);
}

TEST(TrainConfigTest, DefaultsAreTheDocumentedOnes) {
  auto c = Parse("");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->mode, "single");
  EXPECT_EQ(c->model, "cnn");
  EXPECT_EQ(c->data_dir, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(c->optimizer, "sgd");
  EXPECT_GT(c->lr, 0);
  EXPECT_EQ(c->threads, 0);
}

TEST(TrainConfigTest, TheShippedExampleIsValid) {
  auto doc = ConfigDoc::Load(std::string(TENAX_SOURCE_DIR) + "/examples/single.toml");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto c = ParseTrainConfig(*doc);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model, "cnn");
  EXPECT_EQ(c->epochs, 2);
}

TEST(TrainConfigTest, AdamGetsItsOwnDefaultLrAndRejectsMomentum) {
  auto c = Parse("[train]\noptimizer = \"adam\"\n");
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->lr, 1e-3);
  auto bad = Parse("[train]\noptimizer = \"adam\"\nmomentum = 0.9\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("job.toml:3: 'train.momentum' only applies"), std::string::npos)
      << bad.status().message();
}

TEST(TrainConfigTest, RejectsImpossibleValues) {
  EXPECT_EQ(Parse("[model]\nname = \"resnet\"\n").status().message(),
            "job.toml:2: 'model.name' must be one of mlp, cnn, got 'resnet'");
  EXPECT_FALSE(Parse("[train]\nbatch_size = 0\n").ok());
  EXPECT_FALSE(Parse("[train]\nlr = 0.0\n").ok());
  EXPECT_FALSE(Parse("[train]\nepochs = 2.5\n").ok());
  EXPECT_FALSE(Parse("mode = \"async\"\n").ok());
  auto big_batch = Parse("[data]\ntrain_limit = 100\n[train]\nbatch_size = 200\n");
  ASSERT_FALSE(big_batch.ok());
  EXPECT_NE(big_batch.status().message().find("more than the 100 training samples"), std::string::npos);
}

TEST(TrainConfigTest, UnknownKeysAreRejectedWithTheirLine) {
  auto c = Parse("[train]\nepochs = 1\nlearning_rate = 0.1\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("job.toml:3: unknown key 'train.learning_rate'"), std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace tenax

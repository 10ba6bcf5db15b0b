#include "tenax/train/single_trainer.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "tenax/core/signals.h"
#include "tenax/train/model.h"
#include "testing.h"

namespace tenax {
namespace {

struct TrainJob {
  TrainConfig config;
  ConfigDoc doc;
};

TrainJob MakeJob(const std::vector<std::string>& overrides) {
  TrainJob run;
  for (const auto& o : overrides) EXPECT_TRUE(run.doc.Override(o).ok()) << o;
  auto c = ParseTrainConfig(run.doc);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (c.ok()) run.config = *c;
  return run;
}

// The integration test of the issue: the mlp on a 2,000-sample subset for a
// few hundred steps learns (loss falls, accuracy far above the 10% chance).
TEST(SingleTrainerTest, MlpOnSubsetLearns) {
  testing::ScratchDir dir;
  TrainJob run = MakeJob({"model.name=mlp", "data.train_limit=2000", "data.test_limit=2000", "train.epochs=10",
                          "train.max_steps=300", "train.batch_size=32", "train.lr=0.02", "log.every_steps=20"});
  auto out = TrainSingle(run.config, run.doc, dir.path(), {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_LT(out->final_train_loss, 0.6 * out->first_train_loss);
  EXPECT_GT(out->final_test_accuracy, 0.65);

  auto summary = nlohmann::json::parse(testing::ReadText(dir / "summary.json"));
  EXPECT_EQ(summary["mode"], "single");
  EXPECT_EQ(summary["model"], "mlp");
  EXPECT_EQ(summary["steps"], 300);
  EXPECT_DOUBLE_EQ(summary["final_test_accuracy"].get<double>(), out->final_test_accuracy);
  EXPECT_GT(summary["samples_per_second"].get<double>(), 0);
  EXPECT_GT(summary["wall_seconds"].get<double>(), 0);

  std::ifstream metrics(dir / "metrics.jsonl");
  std::string line;
  int train_records = 0, epoch_records = 0;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "train") ++train_records;
    if (j["event"] == "epoch") ++epoch_records;
  }
  // 63 steps per epoch: log points at every 20th step (15) plus the epoch
  // ends at steps 63, 126, 189 and 252; step 300 is both.
  EXPECT_EQ(train_records, 19);
  EXPECT_EQ(epoch_records, 5);
  EXPECT_TRUE(std::filesystem::exists(dir / "model.pt"));
  EXPECT_TRUE(std::filesystem::exists(dir / "config.toml"));
}

TEST(SingleTrainerTest, AdamLearnsToo) {
  testing::ScratchDir dir;
  TrainJob run = MakeJob({"model.name=cnn", "train.optimizer=adam", "data.train_limit=2000", "data.test_limit=1000",
                          "train.epochs=5", "train.max_steps=150", "train.batch_size=32", "log.every_steps=25"});
  auto out = TrainSingle(run.config, run.doc, dir.path(), {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_LT(out->final_train_loss, 0.6 * out->first_train_loss);
  EXPECT_GT(out->final_test_accuracy, 0.6);
  EXPECT_EQ(nlohmann::json::parse(testing::ReadText(dir / "summary.json"))["optimizer"], "adam");
}

// Same seed, same thread count: bit-identical weights. Another seed: not.
TEST(SingleTrainerTest, DeterministicWithSeed) {
  testing::ScratchDir dir;
  auto weights = [&](const std::string& seed, const std::string& sub) {
    TrainJob run = MakeJob({"model.name=cnn", "data.train_limit=512", "data.test_limit=100", "train.max_steps=12",
                            "train.batch_size=32", "train.threads=2", "train.seed=" + seed});
    auto out = TrainSingle(run.config, run.doc, dir / sub, {});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    auto loaded = LoadModel(dir / sub + "/model.pt");
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    return loaded.ok() ? loaded->model->parameters() : std::vector<torch::Tensor>{};
  };
  auto a = weights("5", "a"), b = weights("5", "b"), c = weights("6", "c");
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), c.size());
  bool all_equal_ab = true, all_equal_ac = true;
  for (size_t i = 0; i < a.size(); ++i) {
    all_equal_ab &= torch::equal(a[i], b[i]);
    all_equal_ac &= torch::equal(a[i], c[i]);
  }
  EXPECT_TRUE(all_equal_ab);
  EXPECT_FALSE(all_equal_ac);
}

TEST(SingleTrainerTest, StopSignalCancelsWithoutSummary) {
  testing::ScratchDir dir;
  testing::WriteBytes(dir / "summary.json", {'{', '}'});  // a previous run's
  TrainJob run = MakeJob({"model.name=mlp", "data.train_limit=1000", "data.test_limit=100", "train.epochs=5"});
  InstallStopHandlers();
  TrainRunOptions options;
  int64_t steps_seen = 0;
  options.on_progress = [&](const TrainProgress& p) {
    steps_seen = p.global_step;
    if (p.global_step == 3) std::raise(SIGINT);
  };
  auto out = TrainSingle(run.config, run.doc, dir.path(), options);
  ClearStopRequest();
  ASSERT_EQ(out.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(steps_seen, 3);
  EXPECT_FALSE(std::filesystem::exists(dir / "summary.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "model.pt"));
}

TEST(SingleTrainerTest, BadDatasetFailsBeforeWritingOutputs) {
  testing::ScratchDir dir;
  TrainJob run = MakeJob({"data.dir=" + dir.path() + "/nodata"});
  auto out = TrainSingle(run.config, run.doc, dir / "out", {});
  ASSERT_EQ(out.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir / "out/metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out/summary.json"));
}

TEST(SingleTrainerTest, EvaluateModelFileMatchesTraining) {
  testing::ScratchDir dir;
  TrainJob run = MakeJob({"model.name=mlp", "data.train_limit=1000", "data.test_limit=500", "train.max_steps=30"});
  auto out = TrainSingle(run.config, run.doc, dir.path(), {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  TrainConfig data;
  data.data_dir = testing::kFashionMnistDir;
  data.test_limit = 500;
  auto eval = EvaluateModelFile(dir / "model.pt", data, 0);
  ASSERT_TRUE(eval.ok()) << eval.status().ToString();
  EXPECT_EQ(eval->model_name, "mlp");
  EXPECT_EQ(eval->samples, 500);
  EXPECT_DOUBLE_EQ(eval->test_accuracy, out->final_test_accuracy);
}

}  // namespace
}  // namespace tenax

// The promise of synchronous data parallelism: W ranks with batch b follow
// the trajectory of one rank with batch W*b, and the replicas stay equal.
#include "tenax/train/sync_trainer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tenax/data/fashion_mnist.h"
#include "tenax/train/model.h"
#include "testing.h"
#include "thread_group.h"

namespace tenax {
namespace {

// Not the default seed: the test must hold for the seed it names.
constexpr int64_t kSeed = 7;

TrainConfig SmallConfig(int64_t batch) {
  TrainConfig c;
  c.seed = kSeed;
  c.mode = "sync";
  c.data_dir = kDefaultFashionMnistDir;
  c.train_limit = 2048;
  c.test_limit = 500;
  c.model = "mlp";
  c.epochs = 1;
  c.max_steps = 12;
  c.batch_size = batch;
  c.lr = 0.05;
  c.threads = 1;
  c.log_every_steps = 4;
  return c;
}

std::vector<torch::Tensor> Params(const std::string& path) {
  auto loaded = LoadModel(path);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  std::vector<torch::Tensor> out;
  if (loaded.ok()) {
    for (auto& p : loaded->model->parameters()) out.push_back(p.detach().clone());
  }
  return out;
}

TEST(SyncTrainer, TwoRanksWithBatchBMatchOneRankWithBatch2B) {
  testing::ScratchDir dir;
  ConfigDoc doc;
  const std::string one = dir.path() + "/one", two = dir.path() + "/two";
  auto solo = testing::RunThreadGroup(1, "", [&](comm::Group& g) -> Status {
    return TrainSync(SmallConfig(64), doc, one, g, {}).status();
  });
  ASSERT_TRUE(solo[0].ok()) << solo[0].ToString();
  std::vector<double> accuracy(2);
  auto pair = testing::RunThreadGroup(2, "", [&](comm::Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(TrainOutcome out, TrainSync(SmallConfig(32), doc, two, g, {}));
    accuracy[static_cast<size_t>(g.rank())] = out.final_test_accuracy;
    return g.Barrier(Deadline::After(std::chrono::seconds(20)));
  });
  ASSERT_TRUE(pair[0].ok()) << pair[0].ToString();
  ASSERT_TRUE(pair[1].ok()) << pair[1].ToString();
  EXPECT_EQ(accuracy[0], accuracy[1]) << "ranks disagree on the test accuracy";

  auto a = Params(one + "/model.pt"), b = Params(two + "/model.pt");
  ASSERT_EQ(a.size(), b.size());
  double max_diff = 0, max_change = 0;
  torch::manual_seed(kSeed);
  auto fresh = MakeModel("mlp");
  ASSERT_TRUE(fresh.ok());
  auto fresh_params = (*fresh)->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, (a[i] - b[i]).abs().max().item<double>());
    max_change = std::max(max_change, (a[i] - fresh_params[i].detach()).abs().max().item<double>());
  }
  EXPECT_GT(max_change, 1e-3) << "training did not move the parameters";
  EXPECT_LT(max_diff, 1e-5) << "2 x 32 diverged from 1 x 64";
}

// One loop serves both modes: a single process and a sync group of one rank
// draw the same weights and samples and end bit-identical.
TEST(SyncTrainer, OneRankSyncIsSingleProcessTraining) {
  testing::ScratchDir dir;
  ConfigDoc doc;
  TrainConfig c = SmallConfig(32);
  auto solo = testing::RunThreadGroup(1, "", [&](comm::Group& g) -> Status {
    return TrainSync(c, doc, dir.path() + "/sync", g, {}).status();
  });
  ASSERT_TRUE(solo[0].ok()) << solo[0].ToString();
  c.mode = "single";
  auto single = TrainSingle(c, doc, dir.path() + "/single", {});
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  auto a = Params(dir.path() + "/sync/model.pt"), b = Params(dir.path() + "/single/model.pt");
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

// Gradients staged through host buffers (what a GPU run does, here forced
// on the CPU: train.staging = "always") give the bits of the unstaged path:
// 3 ranks (an uneven ring), the cnn, buckets of 16 KiB so that many buckets
// start while backward still runs.
TEST(SyncTrainer, StagedGradientsGiveTheBitsOfTheUnstagedPath) {
  testing::ScratchDir dir;
  ConfigDoc doc;
  bool staged = true;  // rank 0's summary: were the gradients staged?
  auto run = [&](const std::string& staging, const std::string& out) {
    TrainConfig c = SmallConfig(16);
    c.model = "cnn";
    c.staging = staging;
    SyncRunOptions o;
    o.bucket_bytes = 16 << 10;
    return testing::RunThreadGroup(3, "", [&, c, o](comm::Group& g) -> Status {
      TENAX_ASSIGN_OR_RETURN(TrainOutcome r, TrainSync(c, doc, out, g, o));
      if (g.rank() == 0) staged = r.summary.value("gradient_staging", !staged);
      return Status::Ok();
    });
  };
  for (const auto& st : run("auto", dir.path() + "/plain")) ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(staged) << "a CPU model is not staged by default";
  for (const auto& st : run("always", dir.path() + "/staged")) ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(staged) << "train.staging = \"always\" did not stage";
  auto a = Params(dir.path() + "/plain/model.pt"), b = Params(dir.path() + "/staged/model.pt");
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.size(), b.size());
  torch::manual_seed(kSeed);
  auto fresh = MakeModel("cnn");
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(torch::equal(a[0], (*fresh)->parameters()[0].detach())) << "training did not move the parameters";
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i << " differs";
}

}  // namespace
}  // namespace tenax

// The training loop's contract with its seams, checked with a recording
// exchange and a recording data source over real Fashion-MNIST samples.
#include "training_loop.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tenax/core/seeds.h"
#include "tenax/train/input/data_source.h"
#include "tenax/train/torch_runtime.h"
#include "testing.h"

namespace tenax {
namespace {

// Pretends to be replica `rank` of `world`; reductions multiply by fixed
// factors so the test can tell they were applied.
class RecordingExchange final : public GradientExchange {
 public:
  RecordingExchange(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  Status Attach(TrainableModel& model) override {
    ++attached;
    params = model.Parameters().size();
    return Status::Ok();
  }
  void BeginStep() override { ++begun; }
  Status FinishStep() override {
    ++finished;
    if (finished == fail_at_step) return PeerLost("rank 3 vanished");
    return Status::Ok();
  }
  Result<double> MeanOverReplicas(double local) override {
    ++means;
    return local;
  }
  Result<double> SumOverReplicas(double local) override {
    ++sums;
    return local * world_;  // as if every replica counted the same
  }
  void Detach() override { ++detached; }
  void DescribeInSummary(nlohmann::json& s) const override { s["recording"] = true; }
  std::string Describe() const override { return "recording"; }

  int attached = 0, begun = 0, finished = 0, means = 0, sums = 0, detached = 0;
  size_t params = 0;
  int fail_at_step = -1;

 private:
  int rank_, world_;
};

class RecordingSource final : public DataSource {
 public:
  explicit RecordingSource(std::unique_ptr<DataSource> inner) : inner_(std::move(inner)) {}
  const DatasetInfo& info() const override { return inner_->info(); }
  Result<Batch> Read(const torch::Tensor& indices) override {
    reads.push_back(indices.clone());
    return inner_->Read(indices);
  }
  Result<Batch> ReadRange(int64_t begin, int64_t end) override {
    ranges.emplace_back(begin, end);
    return inner_->ReadRange(begin, end);
  }
  std::vector<torch::Tensor> reads;
  std::vector<std::pair<int64_t, int64_t>> ranges;

 private:
  std::unique_ptr<DataSource> inner_;
};

TrainConfig Config() {
  TrainConfig c;
  c.data_dir = testing::kFashionMnistDir;
  c.train_limit = 64;
  c.test_limit = 30;
  c.model = "mlp";
  c.epochs = 2;
  c.batch_size = 8;
  c.seed = 11;
  c.threads = 1;
  c.log_every_steps = 3;
  return c;
}

struct Sources {
  std::unique_ptr<RecordingSource> train, test;
};

Sources Open(const TrainConfig& c) {
  auto d = OpenDataSplits(c);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  if (!d.ok()) return {};
  return {std::make_unique<RecordingSource>(std::move(d->train)), std::make_unique<RecordingSource>(std::move(d->test))};
}

TEST(TrainingLoop, ReplicaReadsItsSliceOfEveryGlobalBatchAndCallsTheExchangeInOrder) {
  testing::ScratchDir dir;
  const TrainConfig c = Config();
  Sources s = Open(c);
  ASSERT_TRUE(s.train);
  RecordingExchange x(/*rank=*/1, /*world=*/2);
  auto out = RunTrainingLoop(c, ConfigDoc(), dir.path(), {s.train.get(), s.test.get(), &x}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();

  // 64 samples, 2 replicas x 8 = 16 per global batch: 4 steps per epoch.
  const int64_t steps = 8;
  ASSERT_EQ(static_cast<int64_t>(s.train->reads.size()), steps);
  for (int64_t e = 1; e <= 2; ++e) {
    auto gen = at::detail::createCPUGenerator(DeriveSeed(static_cast<uint64_t>(c.seed), static_cast<uint64_t>(e)));
    auto perm = torch::randperm(64, gen, torch::TensorOptions().dtype(torch::kInt64));
    for (int64_t step = 0; step < 4; ++step) {
      auto expected = perm.slice(0, step * 16 + 8, step * 16 + 16);
      EXPECT_TRUE(torch::equal(s.train->reads[static_cast<size_t>((e - 1) * 4 + step)], expected))
          << "epoch " << e << " step " << step + 1;
    }
  }
  EXPECT_EQ(x.attached, 1);
  EXPECT_EQ(x.params, 6u);  // mlp: 3 weights + 3 biases
  EXPECT_EQ(x.begun, steps);
  EXPECT_EQ(x.finished, steps);
  EXPECT_EQ(x.detached, 1);
  // Log points at steps 3, 4 (epoch end), 6, 8 (epoch end); one sum per epoch.
  EXPECT_EQ(x.means, 4);
  EXPECT_EQ(x.sums, 2);
  // Replica 1 of 2 evaluates test samples [15, 30) only.
  ASSERT_FALSE(s.test->ranges.empty());
  EXPECT_EQ(s.test->ranges.front().first, 15);
  EXPECT_EQ(s.test->ranges.back().second, 30);
  // Only rank 0 writes outputs.
  EXPECT_FALSE(std::filesystem::exists(dir / "summary.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "metrics.jsonl"));
  EXPECT_EQ(out->summary["recording"], true);
  EXPECT_EQ(out->summary["steps"], steps);
  EXPECT_EQ(out->summary["train_samples"], 64);
}

TEST(TrainingLoop, AnExchangeFailureStopsTheRunWithoutASummary) {
  testing::ScratchDir dir;
  const TrainConfig c = Config();
  Sources s = Open(c);
  ASSERT_TRUE(s.train);
  RecordingExchange x(0, 1);
  x.fail_at_step = 3;
  auto out = RunTrainingLoop(c, ConfigDoc(), dir.path(), {s.train.get(), s.test.get(), &x}, {});
  ASSERT_EQ(out.status().code(), StatusCode::kPeerLost);
  EXPECT_EQ(out.status().message(), "rank 3 vanished");
  EXPECT_EQ(x.begun, 3);
  EXPECT_FALSE(std::filesystem::exists(dir / "summary.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "model.pt"));
}

TEST(TrainingLoop, ABatchLargerThanTheDataIsRefusedBeforeOutputs) {
  testing::ScratchDir dir;
  TrainConfig c = Config();
  Sources s = Open(c);
  ASSERT_TRUE(s.train);
  RecordingExchange x(0, 16);  // 16 x 8 = 128 > 64 samples
  auto out = RunTrainingLoop(c, ConfigDoc(), dir.path(), {s.train.get(), s.test.get(), &x}, {});
  ASSERT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "16 workers x batch 8 exceed the 64 training samples");
  EXPECT_EQ(x.attached, 0);
  EXPECT_FALSE(std::filesystem::exists(dir / "config.toml"));
}

TEST(TrainingLoop, ADeviceOutOfMemoryNamesTheBatchTheModelAndTheFixInOneLine) {
  const Status st = OutOfMemoryStatus("cuda:0 (of 1 visible)", 0, 512, {3, 32, 32}, "torchscript resnet18.pt",
                                      {9408, 64, 2359296, 5120, 10},
                                      "CUDA out of memory. Tried to allocate 2.00 GiB\nException raised from malloc");
  EXPECT_EQ(StatusCode::kUnavailable, st.code());
  EXPECT_EQ(st.message(),
            "out of memory on cuda:0 (of 1 visible) at start: batch 512 of 3x32x32 samples, model torchscript "
            "resnet18.pt with 2.4M parameters (9 MiB, and about as much again for gradients and optimizer state); "
            "lower train.batch_size or use a smaller model (libtorch: CUDA out of memory. Tried to allocate 2.00 GiB)");
  const Status later = OutOfMemoryStatus("cuda:0 (of 1 visible)", 41, 64, {1, 28, 28}, "cnn", {100}, "oom");
  EXPECT_NE(std::string::npos, later.message().find(" at step 42: batch 64 of 1x28x28 samples")) << later.message();
}

// train.threads = 0 follows $OMP_NUM_THREADS as PyTorch does (what
// scripts/sanitize.sh tsan and the Python tests set); a configured count
// wins; a value that is not a positive count is ignored.
TEST(TorchThreads, ZeroFollowsOmpNumThreadsAndAConfiguredCountWins) {
  const int64_t cores = ResolveThreads(0, nullptr);
  EXPECT_GE(cores, 1);
  EXPECT_EQ(1, ResolveThreads(0, "1"));
  EXPECT_EQ(3, ResolveThreads(0, "3"));
  EXPECT_EQ(4, ResolveThreads(4, "1"));
  for (const char* bad : {"", "0", "-2", "two", "2x", "99999"}) EXPECT_EQ(cores, ResolveThreads(0, bad)) << bad;
}

}  // namespace
}  // namespace tenax

// tenax's single mode against PyTorch 1.13 (python3-torch: the same libtorch
// kernels) step for step. From the same initial weights (tenax saves them,
// `tenax train --save-initial-model`) and the same batch order (PyTorch draws
// each epoch's permutation as tenax does), the first losses must agree: this
// pins what the loop does to a step (sampling, normalisation, the order of
// zero_grad, backward and step, SGD momentum) to what PyTorch does.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "testing.h"

namespace tenax {
namespace {

using testing::RunProcess;
using testing::ScratchDir;
using testing::TenaxBinary;

constexpr int kSteps = 20;

// The per-step losses tenax recorded (log.every_steps = 1).
std::vector<double> TenaxLosses(const std::string& metrics_path) {
  std::vector<double> losses;
  std::ifstream in(metrics_path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("event", "") == "train") losses.push_back(j["loss"].get<double>());
  }
  return losses;
}

TEST(SingleVsPytorchTest, SameWeightsAndBatchOrderGiveTheSameFirstLosses) {
  ScratchDir dir;
  const std::string out = dir / "run", initial = dir / "initial.pt";
  const std::string seed = "3";  // not the example's: the seed must reach both sides
  auto t = RunProcess({TenaxBinary(), "train", "--config", std::string(TENAX_SOURCE_DIR) + "/examples/single.toml",
                       "--out", out, "--save-initial-model", initial, "--set", "train.max_steps=" + std::to_string(kSteps),
                       "--set", "log.every_steps=1", "--set", "train.threads=1", "--set", "train.seed=" + seed, "--set",
                       "data.test_limit=100"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const std::vector<double> tenax = TenaxLosses(out + "/metrics.jsonl");
  ASSERT_EQ(tenax.size(), static_cast<size_t>(kSteps)) << t.err;

  auto p = RunProcess({"/usr/bin/python3", std::string(TENAX_SOURCE_DIR) + "/bench/pytorch_train_single.py", "--model",
                       "cnn", "--batch-size", "64", "--lr", "0.02", "--momentum", "0.9", "--threads", "1", "--steps",
                       std::to_string(kSteps), "--warmup-steps", "0", "--seed", seed, "--init", initial, "--order",
                       "tenax", "--losses", std::to_string(kSteps)});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto result = nlohmann::json::parse(p.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(result.is_object() && result.contains("losses")) << p.out << p.err;
  const auto torch = result["losses"].get<std::vector<double>>();
  ASSERT_EQ(torch.size(), static_cast<size_t>(kSteps));

  for (int i = 0; i < kSteps; ++i) {
    EXPECT_NEAR(tenax[i], torch[i], 1e-4) << "step " << i + 1;
  }
  // Training moved: the 20th loss is not the first (a model that never
  // stepped would agree with itself too).
  EXPECT_LT(tenax.back(), tenax.front() - 0.3);
}

}  // namespace
}  // namespace tenax

// The user's own model (model.path): a TorchScript module written by
// PyTorch (Debian's python3-torch, run as a child process) trains like the
// built-in of the same architecture, in single and sync mode, and the file it
// saves is TorchScript again.
#include "script_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "exchange/allreduce_exchange.h"
#include "tenax/train/model.h"
#include "tenax/train/single_trainer.h"
#include "tenax/train/sync_trainer.h"
#include "tenax/train/torch_runtime.h"
#include "testing.h"
#include "thread_group.h"

namespace tenax {
namespace {

constexpr int64_t kSeed = 11;
constexpr const char* kPython = "/usr/bin/python3";  // Debian's, where python3-torch lives

// The example's script (examples/own_model/make_model.py) is model.cc's
// CnnImpl in PyTorch: the same layer names, shapes and ops. With --weights it
// takes its weights from a tenax model.pt (a TorchScript archive of the
// built-in's parameters); load_state_dict's strict key and shape check proves
// the architectures match.
const std::string kMakeModelScript = std::string(TENAX_SOURCE_DIR) + "/examples/own_model/make_model.py";

DatasetInfo FashionMnistInfo() {
  DatasetInfo info;
  info.size = 1000;
  info.sample_shape = kFashionMnistShape;
  info.classes = kFashionMnistClassCount;
  return info;
}

// Writes dir/cnn.pt: a TorchScript copy of the built-in cnn holding the
// initial weights the training loop draws for the built-in under `seed`.
void WriteScriptCnn(const testing::ScratchDir& dir, int64_t seed, std::string* path) {
  Result<Classifier> cnn = Internal("not built");
  SeededModelInit(seed, [&] { cnn = MakeModel("cnn", kFashionMnistShape, kFashionMnistClassCount); });
  ASSERT_TRUE(cnn.ok()) << cnn.status().ToString();
  const std::string builtin = dir / "builtin-init.pt";
  ASSERT_TRUE(SaveModel(*cnn, "cnn", kFashionMnistShape, kFashionMnistClassCount, builtin).ok());
  *path = dir / "cnn.pt";
  auto r = testing::RunProcess({kPython, kMakeModelScript, *path, "--weights", builtin});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
}

TrainConfig SmallJob(const std::string& model_path) {
  TrainConfig c;
  c.seed = kSeed;
  c.data_dir = testing::kFashionMnistDir;
  c.train_limit = 1024;
  c.test_limit = 500;
  c.model = "cnn";
  c.model_path = model_path;
  c.epochs = 1;
  c.max_steps = 24;
  c.batch_size = 32;
  c.lr = 0.05;
  c.threads = 1;
  c.log_every_steps = 8;
  return c;
}

std::vector<torch::Tensor> BuiltinParams(const std::string& path) {
  auto loaded = LoadModel(path);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  return loaded.ok() ? loaded->model->parameters() : std::vector<torch::Tensor>{};
}

std::vector<torch::Tensor> ScriptParams(const std::string& path) {
  auto module = ReadTorchScriptFile(path);
  EXPECT_TRUE(module.ok()) << module.status().ToString();
  std::vector<torch::Tensor> out;
  if (module.ok()) {
    for (const auto& p : module->parameters()) out.push_back(p.detach());
  }
  return out;
}

double MaxDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(a[i].sizes(), b[i].sizes()) << "parameter " << i;
    if (a[i].sizes() == b[i].sizes()) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  }
  return d;
}

// The test: the same weights and the same data give the same model.
// Then the run's model.pt is TorchScript again: `tenax eval` reads it, and
// PyTorch loads it and computes the same logits.
TEST(ScriptModelTest, CopyOfTheBuiltinCnnTrainsToTheSameModel) {
  testing::ScratchDir dir;
  std::string cnn_pt;
  ASSERT_NO_FATAL_FAILURE(WriteScriptCnn(dir, kSeed, &cnn_pt));
  ConfigDoc doc;
  auto builtin = TrainSingle(SmallJob(""), doc, dir / "builtin", {});
  ASSERT_TRUE(builtin.ok()) << builtin.status().ToString();
  auto script = TrainSingle(SmallJob(cnn_pt), doc, dir / "script", {});
  ASSERT_TRUE(script.ok()) << script.status().ToString();

  EXPECT_EQ(script->summary["model"], "torchscript:" + cnn_pt);
  // 32 steps learn: well above chance (0.1 for 10 classes), and exactly what
  // the built-in learns from the same weights.
  EXPECT_GT(script->final_test_accuracy, 0.3);
  EXPECT_EQ(script->final_test_accuracy, builtin->final_test_accuracy);
  EXPECT_NEAR(script->final_train_loss, builtin->final_train_loss, 1e-5);
  const auto trained = ScriptParams(dir / "script/model.pt");
  EXPECT_LT(MaxDiff(trained, BuiltinParams(dir / "builtin/model.pt")), 1e-5);
  EXPECT_GT(MaxDiff(trained, ScriptParams(cnn_pt)), 1e-3) << "training did not move the parameters";

  TrainConfig data;
  data.data_dir = testing::kFashionMnistDir;
  data.test_limit = 500;
  auto eval = EvaluateModelFile(dir / "script/model.pt", data, 1);
  ASSERT_TRUE(eval.ok()) << eval.status().ToString();
  EXPECT_EQ(eval->model_name, "torchscript:" + dir / "script/model.pt");
  EXPECT_DOUBLE_EQ(eval->test_accuracy, script->final_test_accuracy);

  // PyTorch's logits for a batch of ones, against libtorch's for the same file.
  auto module = ReadTorchScriptFile(dir / "script/model.pt");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  module->eval();
  const double expected_sum = module->forward({torch::ones({1, 1, 28, 28})}).toTensor().sum().item<double>();
  auto py = testing::RunProcess(
      {kPython, "-c",
       "import sys, torch\n"
       "m = torch.jit.load(sys.argv[1]).eval()\n"
       "print(tuple(m(torch.zeros(1, 1, 28, 28)).shape))\n"
       "print(repr(m(torch.ones(1, 1, 28, 28)).sum().item()))\n",
       dir / "script/model.pt"});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  const size_t nl = py.out.find('\n');
  ASSERT_NE(nl, std::string::npos) << py.out;
  EXPECT_EQ(py.out.substr(0, nl), "(1, 10)");
  EXPECT_NEAR(std::stod(py.out.substr(nl + 1)), expected_sum, 1e-4 * std::max(1.0, std::abs(expected_sum)));
}

// A TorchScript module built in C++ (the same file format PyTorch writes):
// forward's body and one parameter.
std::string WriteModule(const testing::ScratchDir& dir, const std::string& name, const std::string& forward_body,
                        torch::Tensor w) {
  torch::jit::Module m("Net");
  m.register_parameter("w", std::move(w), /*is_buffer=*/false);
  m.define("def forward(self, x):\n    " + forward_body + "\n");
  const std::string path = dir / (name + ".pt");
  m.save(path);
  return path;
}

// Each refusal is one line naming the file and what was found.
TEST(ScriptModelTest, RefusesWhatItCannotTrainBeforeTraining) {
  testing::ScratchDir dir;
  const DatasetInfo info = FashionMnistInfo();
  auto refusal = [&](const std::string& path, StatusCode code, const std::vector<std::string>& needles) {
    auto r = LoadScriptModel(path, info);
    ASSERT_FALSE(r.ok()) << path << " was accepted";
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    const std::string& m = r.status().message();
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line, no backtrace: " << m;
    EXPECT_EQ(m.rfind(path, 0), 0u) << m;
    for (const auto& needle : needles) EXPECT_NE(m.find(needle), std::string::npos) << "'" << needle << "' in: " << m;
  };
  const auto w = [](std::vector<int64_t> shape) { return torch::randn(shape).requires_grad_(); };

  refusal(dir / "absent.pt", StatusCode::kNotFound, {"no such file"});
  testing::WriteBytes(dir / "junk.pt", {'n', 'o', 't', ' ', 'a', ' ', 'm', 'o', 'd', 'e', 'l'});
  refusal(dir / "junk.pt", StatusCode::kDataLoss, {"not a TorchScript file"});
  auto cnn = MakeModel("cnn");
  ASSERT_TRUE(cnn.ok());
  ASSERT_TRUE(SaveModel(*cnn, "cnn", kFashionMnistShape, kFashionMnistClassCount, dir / "builtin.pt").ok());
  refusal(dir / "builtin.pt", StatusCode::kDataLoss, {"tenax built-in model (model.name = \"cnn\")"});

  torch::jit::Module no_params("NoParams");
  no_params.define("def forward(self, x):\n    return x.flatten(1).narrow(1, 0, 10)\n");
  no_params.save(dir / "no_params.pt");
  refusal(dir / "no_params.pt", StatusCode::kInvalidArgument, {"no parameters to train"});
  refusal(WriteModule(dir, "frozen", "return x.flatten(1).mm(self.w)", torch::randn({784, 10})),
          StatusCode::kInvalidArgument, {"no parameters to train (its 1 parameter(s) do not require grad)"});
  refusal(WriteModule(dir, "double", "return x.double().flatten(1).mm(self.w)",
                      torch::randn({784, 10}, torch::kFloat64).requires_grad_()),
          StatusCode::kInvalidArgument, {"parameter 'w' is Double", "float32"});
  refusal(WriteModule(dir, "wrong_input", "return x.flatten(1).mm(self.w)", w({100, 10})),
          StatusCode::kInvalidArgument,
          {"forward fails on a float32 batch of shape [2, 1, 28, 28] (the data's samples are [1, 28, 28])",
           "mat1 and mat2 shapes cannot be multiplied (2x784 and 100x10)"});
  refusal(WriteModule(dir, "five_classes", "return x.flatten(1).mm(self.w)", w({784, 5})),
          StatusCode::kInvalidArgument, {"forward returned a tensor of shape [2, 5]", "expected logits [2, 10]"});
  refusal(WriteModule(dir, "tuple", "y = x.flatten(1).mm(self.w)\n    return (y, y)", w({784, 10})),
          StatusCode::kInvalidArgument, {"forward returned Tuple", "expected a tensor of logits [2, 10]"});
  refusal(WriteModule(dir, "detached", "return x.flatten(1).narrow(1, 0, 10) + 0 * self.w.detach().sum()",
                      w({784, 10})),
          StatusCode::kInvalidArgument, {"do not depend on any trainable parameter"});

  // The same file passes against data it fits: 3 x 16 x 16 images (768
  // features), 10 classes.
  const std::string fits = WriteModule(dir, "fits", "return x.flatten(1).mm(self.w)", w({768, 10}));
  DatasetInfo rgb = info;
  rgb.sample_shape = {3, 16, 16};
  auto ok = LoadScriptModel(fits, rgb);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->Describe(), "torchscript:" + fits);
  ASSERT_EQ((*ok)->Parameters().size(), 1u);
  EXPECT_TRUE((*ok)->Parameters()[0].requires_grad());

  // Through the training loop: refused before the first step, no model or
  // summary written.
  TrainConfig c = SmallJob(dir / "wrong_input.pt");
  auto run = TrainSingle(c, ConfigDoc(), dir / "out", {});
  ASSERT_EQ(run.status().code(), StatusCode::kInvalidArgument) << run.status().ToString();
  EXPECT_NE(run.status().message().find("mat1 and mat2 shapes"), std::string::npos) << run.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir / "out/summary.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out/model.pt"));
}

// A tenax model.pt of either kind loads for evaluation; other archives do
// not (the built-in loader's errors are kept).
TEST(ScriptModelTest, LoadTrainedModelReadsBothFormats) {
  testing::ScratchDir dir;
  auto cnn = MakeModel("mlp");
  ASSERT_TRUE(cnn.ok());
  ASSERT_TRUE(SaveModel(*cnn, "mlp", kFashionMnistShape, kFashionMnistClassCount, dir / "builtin.pt").ok());
  auto builtin = LoadTrainedModel(dir / "builtin.pt");
  ASSERT_TRUE(builtin.ok()) << builtin.status().ToString();
  EXPECT_EQ((*builtin)->Describe(), "mlp");

  const std::string script_pt =
      WriteModule(dir, "script", "return x.flatten(1).mm(self.w)", torch::randn({784, 10}).requires_grad_());
  auto script = LoadTrainedModel(script_pt);
  ASSERT_TRUE(script.ok()) << script.status().ToString();
  EXPECT_EQ((*script)->Describe(), "torchscript:" + script_pt);
  auto x = torch::randn({3, 1, 28, 28});
  auto w = ScriptParams(script_pt);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(torch::allclose((*script)->Forward(x), x.flatten(1).mm(w[0])));

  EXPECT_EQ(LoadTrainedModel(dir / "absent.pt").status().code(), StatusCode::kNotFound);
  testing::WriteBytes(dir / "junk.pt", {'j', 'u', 'n', 'k'});
  auto junk = LoadTrainedModel(dir / "junk.pt");
  ASSERT_EQ(junk.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(junk.status().message().find('\n'), std::string::npos) << junk.status().message();
  torch::serialize::OutputArchive archive;
  archive.write("w", torch::ones({2}));
  archive.save_to(dir / "foreign.pt");
  auto foreign = LoadTrainedModel(dir / "foreign.pt");
  ASSERT_EQ(foreign.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(foreign.status().message().find("not a tenax model"), std::string::npos) << foreign.status().message();
}

// Sync mode through the loop: 2 ranks with batch b follow 1 rank with batch
// 2b on the TorchScript model, as on the built-ins.
TEST(ScriptModelTest, SyncTwoRanksMatchOneRankWithTwiceTheBatch) {
  testing::ScratchDir dir;
  std::string cnn_pt;
  ASSERT_NO_FATAL_FAILURE(WriteScriptCnn(dir, kSeed, &cnn_pt));
  ConfigDoc doc;
  auto job = [&](int64_t batch) {
    TrainConfig c = SmallJob(cnn_pt);
    c.mode = "sync";
    c.batch_size = batch;
    c.max_steps = 12;
    return c;
  };
  auto solo = testing::RunThreadGroup(1, "", [&](comm::Group& g) -> Status {
    return TrainSync(job(64), doc, dir / "one", g, {}).status();
  });
  ASSERT_TRUE(solo[0].ok()) << solo[0].ToString();
  auto pair = testing::RunThreadGroup(2, "", [&](comm::Group& g) -> Status {
    TENAX_RETURN_IF_ERROR(TrainSync(job(32), doc, dir / "two", g, {}).status());
    return g.Barrier(Deadline::After(std::chrono::seconds(20)));
  });
  ASSERT_TRUE(pair[0].ok()) << pair[0].ToString();
  ASSERT_TRUE(pair[1].ok()) << pair[1].ToString();
  const auto two = ScriptParams(dir / "two/model.pt");
  EXPECT_LT(MaxDiff(two, ScriptParams(dir / "one/model.pt")), 1e-5) << "2 x 32 diverged from 1 x 64";
  EXPECT_GT(MaxDiff(two, ScriptParams(cnn_pt)), 1e-3) << "training did not move the parameters";
}

// Sync training at the seam: `world` ranks each load a TorchScript model
// (rank 0 `cnn_pt`, the others `other_pt`, which holds other weights),
// attach the allreduce exchange (which broadcasts rank 0's weights), train
// `steps` steps of 16 samples each, and record their parameters after
// Attach and at the end.
std::vector<Status> TrainSyncRanks(int world, const AllreduceExchangeOptions& options, const std::string& cnn_pt,
                                   const std::string& other_pt, int64_t steps,
                                   std::vector<std::vector<torch::Tensor>>& initial,
                                   std::vector<std::vector<torch::Tensor>>& trained,
                                   std::vector<nlohmann::json>* summaries = nullptr) {
  TrainConfig data_config = SmallJob("");
  initial.assign(static_cast<size_t>(world), {});
  trained.assign(static_cast<size_t>(world), {});
  if (summaries) summaries->assign(static_cast<size_t>(world), nlohmann::json::object());
  return testing::RunThreadGroup(world, "", [&](comm::Group& g) -> Status {
    const size_t rank = static_cast<size_t>(g.rank());
    TENAX_ASSIGN_OR_RETURN(std::unique_ptr<DataSource> data, OpenDataSource(data_config, Split::kTrain, 256));
    TENAX_ASSIGN_OR_RETURN(std::unique_ptr<TrainableModel> model,
                           LoadScriptModel(rank == 0 ? cnn_pt : other_pt, data->info()));
    auto exchange = MakeAllreduceExchange(g, options);
    TENAX_RETURN_IF_ERROR(exchange->Attach(*model));
    for (const auto& p : model->Parameters()) initial[rank].push_back(p.detach().clone());
    torch::optim::SGD sgd(model->Parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    model->SetTraining(true);
    for (int64_t step = 0; step < steps; ++step) {
      const int64_t begin = (world * step + g.rank()) * 16;
      TENAX_ASSIGN_OR_RETURN(Batch batch, data->ReadRange(begin, begin + 16));
      exchange->BeginStep();
      torch::nn::functional::cross_entropy(model->Forward(batch.images), batch.labels).backward();
      TENAX_RETURN_IF_ERROR(exchange->FinishStep());
      sgd.step();
    }
    exchange->Detach();
    if (summaries) exchange->DescribeInSummary((*summaries)[rank]);
    for (const auto& p : model->Parameters()) trained[rank].push_back(p.detach().clone());
    return g.Barrier(Deadline::After(std::chrono::seconds(20)));
  });
}

// The TorchScript cnn at `cnn_pt` and, at dir/other.pt, the same with every weight moved by 0.01.
void WriteTwoScriptCnns(testing::ScratchDir& dir, std::string* cnn_pt, std::string* other_pt) {
  ASSERT_NO_FATAL_FAILURE(WriteScriptCnn(dir, kSeed, cnn_pt));
  auto other = ReadTorchScriptFile(*cnn_pt);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  torch::NoGradGuard no_grad;
  for (auto p : other->parameters()) p.add_(0.01);
  *other_pt = dir / "other.pt";
  other->save(*other_pt);
}

// Two ranks on the flat ring end with bitwise equal parameters, starting from rank 0's.
TEST(ScriptModelTest, SyncRanksEndWithEqualParameters) {
  testing::ScratchDir dir;
  std::string cnn_pt, other_pt;
  ASSERT_NO_FATAL_FAILURE(WriteTwoScriptCnns(dir, &cnn_pt, &other_pt));
  std::vector<std::vector<torch::Tensor>> initial, trained;
  auto ranks = TrainSyncRanks(2, {}, cnn_pt, other_pt, 6, initial, trained);
  ASSERT_TRUE(ranks[0].ok()) << ranks[0].ToString();
  ASSERT_TRUE(ranks[1].ok()) << ranks[1].ToString();
  ASSERT_EQ(trained[0].size(), 8u);
  EXPECT_EQ(MaxDiff(initial[1], ScriptParams(cnn_pt)), 0.0) << "rank 1 did not start from rank 0's weights";
  for (size_t i = 0; i < trained[0].size(); ++i) {
    EXPECT_TRUE(torch::equal(trained[0][i], trained[1][i])) << "parameter " << i << " differs between the ranks";
  }
  EXPECT_GT(MaxDiff(trained[0], initial[0]), 1e-3) << "training did not move the parameters";
}

// The same over the zone-hierarchical allreduce: four ranks in two zones
// (interleaved, so zone order is not rank order). All four start from rank
// 0's weights and end bitwise equal, and within float rounding of four
// ranks on the flat ring (the order of the additions differs).
TEST(ScriptModelTest, SyncRanksInTwoZonesEndWithEqualParametersCloseToTheFlatRing) {
  testing::ScratchDir dir;
  std::string cnn_pt, other_pt;
  ASSERT_NO_FATAL_FAILURE(WriteTwoScriptCnns(dir, &cnn_pt, &other_pt));
  AllreduceExchangeOptions zoned_options;
  zoned_options.zones = {"east", "west", "east", "west"};
  zoned_options.hierarchical = true;
  AllreduceExchangeOptions flat_options;
  flat_options.zones = zoned_options.zones;  // known, for the byte counts; the flat ring
  std::vector<std::vector<torch::Tensor>> initial, zoned, flat_initial, flat;
  std::vector<nlohmann::json> zoned_summary, flat_summary;
  auto zoned_ranks = TrainSyncRanks(4, zoned_options, cnn_pt, other_pt, 4, initial, zoned, &zoned_summary);
  auto flat_ranks = TrainSyncRanks(4, flat_options, cnn_pt, other_pt, 4, flat_initial, flat, &flat_summary);
  for (size_t r = 0; r < 4; ++r) {
    ASSERT_TRUE(zoned_ranks[r].ok()) << "rank " << r << ": " << zoned_ranks[r].ToString();
    ASSERT_TRUE(flat_ranks[r].ok()) << "rank " << r << ": " << flat_ranks[r].ToString();
  }
  ASSERT_EQ(zoned[0].size(), 8u);
  for (size_t r = 1; r < 4; ++r) {
    EXPECT_EQ(MaxDiff(initial[r], ScriptParams(cnn_pt)), 0.0) << "rank " << r << " did not start from rank 0's weights";
    for (size_t i = 0; i < zoned[0].size(); ++i) {
      EXPECT_TRUE(torch::equal(zoned[0][i], zoned[r][i])) << "parameter " << i << " differs between ranks 0 and " << r;
    }
  }
  const double moved = MaxDiff(zoned[0], initial[0]);
  EXPECT_GT(moved, 1e-3) << "training did not move the parameters";
  EXPECT_LT(MaxDiff(zoned[0], flat[0]), 1e-4 * moved) << "the hierarchical sum strayed from the flat ring's";
  // The summaries say which algorithm ran, and the bytes by link class:
  // rank 0 (east) in the flat ring 0-1-2-3 writes its ring steps to rank 1
  // (west), 1.5 gradient vectors a step; in the hierarchical one it writes
  // to rank 2 (east) and half a vector to rank 1 (west).
  const auto& z = zoned_summary[0]["allreduce"];
  const auto& f = flat_summary[0]["allreduce"];
  EXPECT_EQ(z.value("algorithm", ""), "hierarchical") << z.dump();
  EXPECT_EQ(f.value("algorithm", ""), "ring") << f.dump();
  const uint64_t z_cross = z["rank_bytes_sent"].value("cross_zone", uint64_t{0});
  const uint64_t f_cross = f["rank_bytes_sent"].value("cross_zone", uint64_t{0});
  EXPECT_GT(z["rank_bytes_sent"].value("same_zone", uint64_t{0}), 0u) << z.dump();
  EXPECT_GT(z_cross, 0u) << z.dump();
  EXPECT_LT(z_cross, f_cross) << "hierarchical " << z.dump() << " vs flat " << f.dump();
}

}  // namespace
}  // namespace tenax

// Training on CUDA (the GPU machine; labelled gpu, built only against a
// libtorch with CUDA): single and sync runs on the GPU, their replicas
// bitwise equal, the saved model a CPU file equal to the GPU's parameters.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "tenax/data/fashion_mnist.h"
#include "tenax/train/device.h"
#include "tenax/train/exchange/elastic_membership.h"
#include "tenax/train/input/device_resident_source.h"
#include "tenax/train/model.h"
#include "tenax/train/single_trainer.h"
#include "tenax/train/sync_trainer.h"
#include "foreach_sgd.h"
#include "testing.h"
#include "thread_group.h"

namespace tenax {
namespace {

TrainConfig GpuConfig(const std::string& mode, int64_t batch, int64_t steps) {
  TrainConfig c;
  c.mode = mode;
  c.seed = 3;
  c.data_dir = kDefaultFashionMnistDir;
  c.test_limit = 2000;
  c.model = "cnn";
  c.epochs = 1;
  c.max_steps = steps;
  c.batch_size = batch;
  c.threads = 2;
  c.log_every_steps = 50;
  c.device = "cuda";
  return c;
}

// A scratch folder removed with rm -rf: the CUDA build's gpu_tests crashed
// in std::filesystem::remove_all (a null call inside libstdc++ on the GPU
// machine's toolchain; the tenax binary itself is unaffected).
struct GpuScratch {
  GpuScratch() {
    char tmpl[] = "/tmp/tenax-gpu-test-XXXXXX";
    dir = ::mkdtemp(tmpl) ? tmpl : "/tmp";
  }
  ~GpuScratch() {
    if (dir != "/tmp") (void)std::system(("rm -rf '" + dir + "'").c_str());
  }
  const std::string& path() const { return dir; }
  std::string dir;
};

uint64_t HashOf(const std::vector<torch::Tensor>& params) {
  uint64_t h = StateChecksum(nullptr, 0);
  for (const auto& p : params) {
    const torch::Tensor host = p.detach().to(torch::kCPU).contiguous();
    h = StateChecksum(static_cast<const uint8_t*>(host.data_ptr()), host.nbytes(), h);
  }
  return h;
}

TEST(Gpu, SingleTrainsOnTheGpuAndSavesACpuModelWithItsBits) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no GPU visible: these tests run on the GPU machine only";
  GpuScratch dir;
  ConfigDoc doc;
  auto out = TrainSingle(GpuConfig("single", 64, 300), doc, dir.path(), {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(0u, out->summary.value("device", std::string()).rfind("cuda:0", 0)) << out->summary.dump();
  EXPECT_EQ("cuda:0", out->summary.value("train_data_on", std::string())) << "Fashion-MNIST fits on the GPU";
  EXPECT_GT(out->final_test_accuracy, 0.6) << "300 steps of the cnn reach well above 0.6 on Fashion-MNIST";
  EXPECT_LT(out->final_train_loss, out->first_train_loss);
  auto loaded = LoadModel(dir.path() + "/model.pt");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  for (const auto& p : loaded->model->parameters()) EXPECT_TRUE(p.device().is_cpu());
  EXPECT_EQ(out->parameter_hash, HashOf(loaded->model->parameters())) << "the saved model is not the trained one";
}

TEST(Gpu, SyncReplicasOnTheGpuEndBitwiseEqual) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no GPU visible: these tests run on the GPU machine only";
  GpuScratch dir;
  ConfigDoc doc;
  std::vector<uint64_t> hashes(3);
  std::vector<double> accuracy(3);
  SyncRunOptions o;
  o.bucket_bytes = 64 << 10;  // several buckets: copies and transfers overlap
  auto results = testing::RunThreadGroup(3, "", [&](comm::Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(TrainOutcome out, TrainSync(GpuConfig("sync", 32, 200), doc, dir.path(), g, o));
    hashes[static_cast<size_t>(g.rank())] = out.parameter_hash;
    accuracy[static_cast<size_t>(g.rank())] = out.final_test_accuracy;
    return g.Barrier(Deadline::After(std::chrono::seconds(60)));
  });
  for (const auto& st : results) ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(hashes[0], hashes[1]);
  EXPECT_EQ(hashes[0], hashes[2]);
  EXPECT_EQ(accuracy[0], accuracy[2]);
  EXPECT_GT(accuracy[0], 0.6);
}

TEST(Gpu, StagedSumsLandInPageLockedMemory) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no GPU visible: these tests run on the GPU machine only";
  std::vector<float> memory(1 << 16, 2.0f);
  {
    HostPin pin(torch::Device(torch::kCUDA, 0), memory.data(), memory.size() * sizeof(float));
    ASSERT_TRUE(pin.active()) << pin.error();
    // A copy from it to the GPU and back: the values survive.
    torch::Tensor host = torch::from_blob(memory.data(), {static_cast<int64_t>(memory.size())}, torch::kFloat32);
    torch::Tensor dev = torch::empty_like(host, torch::TensorOptions().device(torch::kCUDA));
    dev.copy_(host, /*non_blocking=*/true);
    EXPECT_EQ(2.0 * static_cast<double>(memory.size()), dev.sum().item<double>());
  }
  GpuScratch dir;
  ConfigDoc doc;
  std::vector<nlohmann::json> summaries(2);
  auto results = testing::RunThreadGroup(2, "", [&](comm::Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(TrainOutcome out, TrainSync(GpuConfig("sync", 32, 30), doc, dir.path(), g, {}));
    summaries[static_cast<size_t>(g.rank())] = out.summary;
    return g.Barrier(Deadline::After(std::chrono::seconds(60)));
  });
  for (const auto& st : results) ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(true, summaries[0]["staging"].value("sums_page_locked", false)) << summaries[0].dump();
  EXPECT_EQ(summaries[0]["parameter_hash"], summaries[1]["parameter_hash"]);
}

TEST(Gpu, ForeachSgdOnTheGpuFollowsLibtorchsSgd) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no GPU visible: these tests run on the GPU machine only";
  auto make = [] {
    torch::manual_seed(5);
    std::vector<torch::Tensor> p;
    for (auto shape : std::vector<std::vector<int64_t>>{{64, 32}, {32}, {3, 3, 8}}) {
      p.push_back(torch::randn(shape).to(torch::kCUDA).requires_grad_(true));
    }
    return p;
  };
  auto a = make(), b = make();
  const auto o = torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-4);
  torch::optim::SGD reference(a, o);
  train_internal::ForeachSgd foreach_sgd(b, o);
  for (int step = 0; step < 8; ++step) {
    torch::manual_seed(50 + step);
    for (size_t i = 0; i < a.size(); ++i) {
      torch::Tensor g = torch::randn(a[i].sizes()).to(torch::kCUDA);
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
    }
    reference.step();
    foreach_sgd.step();
  }
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-6, 1e-7)) << "parameter " << i << ": max difference "
                                                         << (a[i] - b[i]).abs().max().item<double>();
  }
}

TEST(Gpu, TheTrainingSetHeldOnTheGpuGivesTheHostsBatches) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no GPU visible: these tests run on the GPU machine only";
  TrainConfig c = GpuConfig("single", 64, 1);
  auto host = OpenDataSource(c, Split::kTrain, 0);
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  const torch::Device cuda(torch::kCUDA, 0);
  auto resident = MakeDeviceResidentSource(**host, cuda, CopyStream(cuda));
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  const torch::Tensor idx = torch::randperm(60000, torch::kInt64).slice(0, 0, 512);
  auto a = (*host)->Read(idx);
  auto b = (*resident)->Read(idx);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(b->images.is_cuda());
  EXPECT_TRUE(torch::equal(a->images, b->images.cpu()));
  EXPECT_TRUE(torch::equal(a->labels, b->labels.cpu()));
}

// The device the multi-process test trains on: "cuda", or
// TENAX_GPU_TEST_DEVICE=cpu to check the test itself on a machine without
// a GPU (gpu_tests built with -DTENAX_GPU_TESTS=ON).
std::string MultiProcessDevice() {
  const char* d = std::getenv("TENAX_GPU_TEST_DEVICE");
  return d && *d ? d : "cuda";
}

// The last "final parameters fnv1a H" a worker logged.
std::string FinalHash(const std::string& log) {
  static const std::regex re("final parameters fnv1a ([0-9a-f]{16})");
  std::string hash;
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it) hash = (*it)[1];
  return hash;
}

TEST(Gpu, ElasticGpuWorkersGoOnAfterASigkillAndAJoinerEndsWithTheirParameters) {
  const std::string device = MultiProcessDevice();
  if (device != "cpu") {
    ASSERT_TRUE(torch::cuda::is_available()) << "no GPU visible: these tests run on the GPU machine only";
  }
  setenv("TENAX_SECRET", "gpu-elastic-test-secret-0123456789", 1);
  GpuScratch dir;
  // Long enough for the joiner's CUDA start-up (a few seconds) to end
  // inside the job; the CPU check runs the small mlp.
  const bool gpu = device != "cpu";
  const int64_t steps = gpu ? 4500 : 2500, kill_at = gpu ? 1500 : 100;
  const std::string job = dir.path() + "/elastic.toml";
  {
    std::ofstream out(job);
    out << "mode = \"sync\"\n[cluster]\nworkers = 3\njob_id = \"gpu-elastic\"\nelastic = true\nmin_workers = 2\n"
        << "max_workers = 3\npeer_timeout_seconds = 4\njoin_timeout_seconds = 60\nstep_timeout_seconds = 60\n"
        << "[data]\ndir = \"" << kDefaultFashionMnistDir << "\"\ntrain_limit = 8192\ntest_limit = 1000\n"
        << "[model]\nname = \"" << (gpu ? "cnn" : "mlp") << "\"\n"
        << "[train]\nepochs = 500\nmax_steps = " << steps << "\nbatch_size = 32\nthreads = 1\nlr = 0.05\n"
        << "momentum = 0.9\ndevice = \"" << device << "\"\n[log]\nevery_steps = 100\n"
        << "[[faults]]\naction = \"kill\"\nworker = 1\nat_step = " << kill_at << "\n"
        << "[[faults]]\naction = \"restart\"\nat_step = " << kill_at << "\ndelay_seconds = 1\n";
  }
  const auto r = testing::RunProcess({testing::TenaxBinary(), "run", job, "--out", dir.path() + "/run"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("fault: SIGKILL worker 1")) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("generation 2: 2 workers (ranks 0, 2)")) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("generation 3: 3 workers (ranks 0, 2, 3)")) << r.err;
  auto summary = nlohmann::json::parse(testing::ReadText(dir.path() + "/run/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(steps, summary.value("steps", int64_t{0}));
  EXPECT_EQ(0u, summary.value("device", std::string()).rfind(gpu ? "cuda:0" : "cpu", 0)) << summary.dump();
  // The survivors (workers 0 and 2, the same processes throughout) and the
  // joiner end with the same parameters.
  const std::string h0 = FinalHash(testing::ReadText(dir.path() + "/run/logs/worker-0.log"));
  EXPECT_FALSE(h0.empty());
  EXPECT_EQ(h0, FinalHash(testing::ReadText(dir.path() + "/run/logs/worker-2.log")));
  EXPECT_EQ(h0, FinalHash(testing::ReadText(dir.path() + "/run/logs/joiner-1.log")));
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.6);
}

}  // namespace
}  // namespace tenax

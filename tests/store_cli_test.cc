// End-to-end tests of `tenax store`: real Fashion-MNIST records on six data
// node directories, real wiped directories and flipped bits, the SQLite
// catalog, and what the user sees (exit codes, JSON, error lines).
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tenax/data/fashion_mnist.h"
#include "testing.h"

namespace tenax {
namespace {

using testing::ProcessResult;
using testing::RunProcess;
using testing::ScratchDir;
using testing::TenaxBinary;

class StoreCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto data = LoadFashionMnist(kDefaultFashionMnistDir, Split::kTest);
    ASSERT_TRUE(data.ok()) << data.status().message();
    records_ = testing::ImageLabelRecords(data->pixels, data->labels, 784);
  }
  ProcessResult Store(std::vector<std::string> args) {
    std::vector<std::string> argv = {TenaxBinary(), "store"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--catalog");
    argv.push_back(catalog_);
    return RunProcess(argv);
  }
  // Runs a --json command that must succeed and returns its JSON.
  nlohmann::json Json(std::vector<std::string> args, int expected_exit = 0) {
    args.push_back("--json");
    ProcessResult r = Store(args);
    EXPECT_EQ(r.exit_code, expected_exit) << r.err << r.out;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
    return j.is_discarded() ? nlohmann::json::object() : j;
  }
  // `tenax store get` of the whole dataset; checks the bytes against the
  // idx files and returns how many chunks were decoded.
  uint64_t GetAllAndCompare() {
    const std::string out = dir_ / "records.bin";
    auto j = Json({"get", "--dataset", "fmnist", "--out", out});
    EXPECT_TRUE(testing::ReadBytes(out) == records_) << "the records read back differ from the idx files";
    return j.value("degraded_chunks", uint64_t{999});
  }
  nlohmann::json Status() { return Json({"status"}); }

  ScratchDir dir_;
  std::string catalog_ = dir_ / "store.db";
  std::vector<uint8_t> records_;
};

// 10000 records of 785 bytes, 250 per chunk: 40 data chunks, 10 stripes of
// RS 4+2, 60 chunks on 6 nodes in 3 zones.
TEST_F(StoreCliTest, PutFailReadDegradedRecoverWithPrmThenFullAndEveryByteIsBack) {
  auto put = Json({"put", "--root", dir_ / "nodes", "--nodes", "6", "--zones", "3", "--split", "test", "--dataset",
                   "fmnist", "--chunk-bytes", std::to_string(785 * 250)});
  EXPECT_EQ(put["records"], 10000);
  EXPECT_EQ(put["stripes"], 10);
  EXPECT_EQ(put["classes"], 10);
  ASSERT_EQ(put["nodes"].size(), 6u);
  for (const auto& n : put["nodes"]) EXPECT_EQ(n["chunks"], 10) << n.dump();  // one chunk of every stripe each
  EXPECT_EQ(GetAllAndCompare(), 0u);

  auto failed = Json({"fail", "node-2"});
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "nodes/node-2"));
  auto st = Status();
  const auto& ds = st["datasets"][0];
  EXPECT_EQ(ds["lost_chunks"], 10);
  EXPECT_EQ(ds["degraded_stripes"], 10);
  EXPECT_EQ(ds["lost_stripes"], 0);
  EXPECT_EQ(st["nodes"][2]["state"], "failed");
  const uint64_t data_chunks_lost = [&] {
    uint64_t n = 0;
    for (const auto& l : ds["lost"]) n += l["parity"] ? 0 : 1;
    return n;
  }();
  EXPECT_EQ(GetAllAndCompare(), data_chunks_lost);  // every byte, through degraded reads

  auto prm = Json({"recover", "--policy", "prm", "--min-available", "0.95"})["results"][0];
  EXPECT_EQ(prm["lost_chunks"], 10);
  EXPECT_GT(prm["first_chunks"], 0);
  EXPECT_GT(prm["later_chunks"], 0);
  EXPECT_EQ(prm["chunks_rebuilt"], prm["first_chunks"]);
  EXPECT_EQ(prm["bytes_written"], prm["first_bytes"]);
  EXPECT_GE(prm["available_share"].get<double>(), 0.95);
  EXPECT_EQ(Status()["datasets"][0]["lost_chunks"], prm["later_chunks"]);

  auto full = Json({"recover", "--policy", "full", "--all"})["results"][0];
  EXPECT_EQ(full["chunks_rebuilt"], prm["later_chunks"]);
  EXPECT_EQ(Status()["datasets"][0]["lost_chunks"], 0);
  EXPECT_EQ(GetAllAndCompare(), 0u);  // nothing degraded any more
}

// PRM's background pass: the first set goes into the catalog, then the
// rest is rebuilt no faster than the rate given, and everything is back.
TEST_F(StoreCliTest, APrmBackgroundPassRebuildsTheRestAtItsRateAndEveryByteIsBack) {
  Json({"put", "--root", dir_ / "nodes", "--nodes", "6", "--split", "test", "--dataset", "fmnist", "--chunk-bytes",
        std::to_string(785 * 250)});
  Json({"fail", "node-4"});
  const double gbps = 0.05;
  auto prm = Json({"recover", "--policy", "prm", "--min-available", "0.9", "--background-gbps", "0.05"})["results"][0];
  EXPECT_EQ(prm["lost_chunks"], 10);
  EXPECT_EQ(prm["chunks_rebuilt"], prm["first_chunks"]);
  const auto& bg = prm["background"];
  ASSERT_TRUE(bg["ran"].get<bool>()) << prm.dump();
  EXPECT_EQ(bg["chunks_rebuilt"], prm["later_chunks"]);
  EXPECT_EQ(bg["bytes_written"], prm["later_bytes"]);
  const double moved = bg["bytes_read"].get<double>() + bg["bytes_written"].get<double>();
  EXPECT_GE(bg["seconds"].get<double>(), moved / (gbps * 1e9 / 8)) << bg.dump();  // paced, never faster
  EXPECT_EQ(Status()["datasets"][0]["lost_chunks"], 0);
  EXPECT_EQ(GetAllAndCompare(), 0u);
  EXPECT_NE(Store({"recover", "--all", "--background-gbps", "1"}).err.find("excludes"), std::string::npos);
}

// The .npy files a job trains on (data.format = "npy", written here by
// numpy itself) go into the store as they are: every record reads back.
TEST_F(StoreCliTest, ANpyPairIsPutAndReadsBackRecordForRecord) {
  constexpr size_t kSamples = 2000;
  std::vector<uint8_t> pixels, labels;
  for (size_t i = 0; i < kSamples; ++i) {
    pixels.insert(pixels.end(), records_.begin() + static_cast<std::ptrdiff_t>(i * 785),
                  records_.begin() + static_cast<std::ptrdiff_t>(i * 785 + 784));
    labels.push_back(records_[i * 785 + 784]);
  }
  testing::WriteBytes(dir_ / "px.bin", pixels);
  testing::WriteBytes(dir_ / "lb.bin", labels);
  const std::string code =
      "import sys\nimport numpy as np\nd = sys.argv[1]\n"
      "np.save(d + '/x.npy', np.fromfile(d + '/px.bin', dtype=np.uint8).reshape(2000, 28, 28))\n"
      "np.save(d + '/y.npy', np.fromfile(d + '/lb.bin', dtype=np.uint8).astype(np.int64))\n"
      "np.save(d + '/xf.npy', np.zeros((4, 28, 28), dtype=np.float32))\n"
      "np.save(d + '/yf.npy', np.zeros(4, dtype=np.int64))\n";
  ProcessResult py =
      RunProcess({"/usr/bin/timeout", "-s", "KILL", "120", "/usr/bin/python3", "-c", code, dir_.path()});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  auto put = Json({"put", "--root", dir_ / "nodes", "--images", dir_ / "x.npy", "--labels", dir_ / "y.npy",
                   "--dataset", "npyset", "--chunk-bytes", std::to_string(785 * 100)});
  EXPECT_EQ(put["records"], 2000);
  EXPECT_EQ(put["record_bytes"], 785);
  EXPECT_EQ(put["classes"], 10);
  const std::string out = dir_ / "npy-records.bin";
  Json({"get", "--dataset", "npyset", "--out", out});
  EXPECT_TRUE(testing::ReadBytes(out) ==
              std::vector<uint8_t>(records_.begin(), records_.begin() + static_cast<std::ptrdiff_t>(kSamples * 785)));
  ProcessResult floats = Store({"put", "--images", dir_ / "xf.npy", "--labels", dir_ / "yf.npy", "--dataset", "f"});
  EXPECT_EQ(floats.exit_code, 2) << floats.err;
  EXPECT_NE(floats.err.find("float32 samples; the store keeps uint8 samples"), std::string::npos) << floats.err;
}

TEST_F(StoreCliTest, AScrubFindsAFlippedBitAndRepairsIt) {
  Json({"put", "--root", dir_ / "nodes", "--split", "test", "--dataset", "fmnist", "--chunk-bytes",
        std::to_string(785 * 500)});
  std::string path;  // whichever chunk of stripe 3 node-1 holds
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "nodes/node-1/fmnist")) {
    if (e.path().filename().string().rfind("s00000003.", 0) == 0) path = e.path();
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  auto bytes = testing::ReadBytes(path);
  bytes[bytes.size() - 7] ^= 0x10;
  testing::WriteBytes(path, bytes);
  EXPECT_EQ(Status()["datasets"][0]["lost_chunks"], 0);  // status trusts the disks; a scrub reads them
  auto dry = Json({"scrub", "--dry-run"});
  ASSERT_EQ(dry["datasets"][0]["lost_chunks"], 1);
  EXPECT_NE(dry["datasets"][0]["lost"][0]["reason"].get<std::string>().find("CRC"), std::string::npos);
  EXPECT_EQ(dry["datasets"][0]["lost"][0]["stripe"], 3);
  auto fixed = Json({"scrub"})["results"][0];
  EXPECT_EQ(fixed["chunks_rebuilt"], 1);
  EXPECT_EQ(Json({"scrub", "--dry-run"})["datasets"][0]["lost_chunks"], 0);
  EXPECT_EQ(GetAllAndCompare(), 0u);
}

TEST_F(StoreCliTest, MoreLossThanParityNamesTheLostSamplesAndNeverWritesWrongBytes) {
  Json({"put", "--root", dir_ / "nodes", "--split", "test", "--dataset", "fmnist", "--chunk-bytes",
        std::to_string(785 * 500)});
  for (const char* n : {"node-0", "node-3", "node-5"}) Json({"fail", n});
  auto st = Json({"status"}, 2);
  EXPECT_EQ(st["datasets"][0]["lost_stripes"], 5);
  EXPECT_EQ(st["datasets"][0]["unreadable_samples"], 10000);
  const std::string out = dir_ / "records.bin";
  ProcessResult get = Store({"get", "--dataset", "fmnist", "--out", out});
  EXPECT_EQ(get.exit_code, 2) << get.err;
  EXPECT_NE(get.err.find("fmnist stripe 0 is lost: only 3 of its 6 chunks are readable and 4 are needed; samples "
                         "0..1999 cannot be read"),
            std::string::npos)
      << get.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  ProcessResult rec = Store({"recover", "--policy", "full"});
  EXPECT_EQ(rec.exit_code, 2);
  EXPECT_NE(rec.out.find("LOST: fmnist stripe 0 (samples 0..1999)"), std::string::npos) << rec.out;
}

// A job reading its data from the store, with a data node failed, trains
// exactly the model the same job trains from the idx files.
TEST_F(StoreCliTest, TrainingFromTheStoreWithAFailedNodeMatchesTrainingFromTheFiles) {
  Json({"put", "--root", dir_ / "nodes", "--split", "train", "--chunk-bytes", std::to_string(785 * 256)});
  Json({"put", "--split", "test", "--chunk-bytes", std::to_string(785 * 256)});
  Json({"fail", "node-3"});
  nlohmann::json store_summary;
  // The same job but for where its samples come from.
  auto train = [&](const std::string& name, const std::string& data_section) {
    const std::string job = dir_ / (name + ".toml");
    const std::string text = "mode = \"single\"\n[data]\n" + data_section +
                             "train_limit = 2048\ntest_limit = 1000\n[model]\nname = \"mlp\"\n"
                             "[train]\nbatch_size = 64\nmax_steps = 48\nthreads = 1\nseed = 1\n";
    testing::WriteBytes(job, std::vector<uint8_t>(text.begin(), text.end()));
    ProcessResult r = RunProcess({TenaxBinary(), "train", "--config", job, "--out", dir_ / name});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(testing::ReadText(dir_ / (name + "/summary.json")), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << name;
    if (!j.is_discarded() && j.contains("store")) store_summary = j["store"];
    return j.is_discarded() ? -1.0 : j.value("final_test_accuracy", -1.0);
  };
  const double from_files = train("files", "dir = \"" + std::string(kDefaultFashionMnistDir) + "\"\n");
  const double from_store = train("store", "format = \"store\"\ncatalog = \"" + catalog_ + "\"\ncache_chunks = 8\n");
  EXPECT_GT(from_files, 0.5);  // it learned something
  EXPECT_EQ(from_store, from_files);
  // The run says what it read from the store, degraded reads included.
  EXPECT_EQ(store_summary.value("dataset", ""), "fashion-mnist-train");
  EXPECT_GT(store_summary.value("degraded_chunks", uint64_t{0}), 0u);
  EXPECT_GT(store_summary.value("chunks_read", uint64_t{0}), store_summary.value("degraded_chunks", uint64_t{0}));

  // The same job recovering the store itself (data.recovery_policy): the
  // first degraded read starts a full recovery on a thread of the loader;
  // training reads the same bytes, and when it ends the node's chunks are
  // back on the others.
  uint64_t lost_before = 0;
  const nlohmann::json before = Status();
  for (const auto& d : before["datasets"]) {
    if (d["dataset"] == "fashion-mnist-train") lost_before = d["lost_chunks"].get<uint64_t>();
  }
  ASSERT_GT(lost_before, 0u) << before.dump();
  const double recovering = train("recovering", "format = \"store\"\ncatalog = \"" + catalog_ +
                                                    "\"\ncache_chunks = 8\nrecovery_policy = \"full\"\n");
  EXPECT_EQ(recovering, from_files);
  ASSERT_TRUE(store_summary.contains("recoveries")) << store_summary.dump();
  ASSERT_EQ(store_summary["recoveries"].size(), 1u) << store_summary.dump();
  const auto& rec = store_summary["recoveries"][0];
  EXPECT_FALSE(rec.contains("error")) << rec.dump();
  EXPECT_EQ(rec.value("policy", ""), "full");
  EXPECT_EQ(rec.value("chunks_rebuilt", uint64_t{0}), lost_before) << rec.dump();
  const nlohmann::json after = Status();
  for (const auto& d : after["datasets"]) {
    if (d["dataset"] == "fashion-mnist-train") {
      EXPECT_EQ(d["lost_chunks"], 0) << d.dump();
    }
  }

  // Once more with a resident recovery service (data.recovery_service):
  // another node fails, the loader asks `tenax store serve` instead of
  // recovering itself, and the job's summary reports the service's work.
  Json({"fail", "node-4"});
  uint64_t lost_now = 0;
  const nlohmann::json failed_again = Status();
  for (const auto& d : failed_again["datasets"]) {
    if (d["dataset"] == "fashion-mnist-train") lost_now = d["lost_chunks"].get<uint64_t>();
  }
  ASSERT_GT(lost_now, 0u) << failed_again.dump();
  setenv("TENAX_SECRET", "store-cli-test-secret-0123456789", 1);  // the service and the job's loader share it
  testing::Child service({TenaxBinary(), "store", "serve", "--catalog", catalog_});
  ASSERT_TRUE(service.WaitForStderrLine("listening on", std::chrono::seconds(60))) << service.stderr_text();
  const std::string ready = service.stderr_text();
  const size_t at = ready.find("listening on ");
  ASSERT_NE(at, std::string::npos);
  const std::string address = ready.substr(at + 13, ready.find_first_of(" \n", at + 13) - (at + 13));
  const double served = train("served", "format = \"store\"\ncatalog = \"" + catalog_ +
                                            "\"\ncache_chunks = 8\nrecovery_policy = \"full\"\nrecovery_service = \"" +
                                            address + "\"\n");
  EXPECT_EQ(served, from_files);
  ASSERT_TRUE(store_summary.contains("recoveries")) << store_summary.dump();
  ASSERT_EQ(store_summary["recoveries"].size(), 1u) << store_summary.dump();
  const auto& by_service = store_summary["recoveries"][0];
  EXPECT_FALSE(by_service.contains("error")) << by_service.dump();
  EXPECT_EQ(by_service.value("chunks_rebuilt", uint64_t{0}), lost_now) << by_service.dump();
  const nlohmann::json served_after = Status();
  for (const auto& d : served_after["datasets"]) {
    if (d["dataset"] == "fashion-mnist-train") {
      EXPECT_EQ(d["lost_chunks"], 0) << d.dump();
    }
  }
  service.Signal(SIGTERM);
  EXPECT_EQ(service.Wait(std::chrono::seconds(30)), 0) << service.stderr_text();
  EXPECT_NE(service.stderr_text().find("recovery 1 of fashion-mnist-train done"), std::string::npos)
      << service.stderr_text();
}

TEST_F(StoreCliTest, BadInputIsOneClearErrorLine) {
  auto one_error = [](const ProcessResult& r, const std::string& needle) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  };
  one_error(Store({"put", "--root", dir_ / "nodes", "--split", "test", "--k", "5", "--m", "2"}),
            "only 6 are available");
  Json({"put", "--split", "test", "--dataset", "fmnist", "--chunk-bytes", std::to_string(785 * 1000)});
  one_error(Store({"put", "--split", "test", "--dataset", "fmnist"}), "dataset 'fmnist' is already in store catalog");
  one_error(Store({"put", "--root", dir_ / "other", "--split", "test", "--dataset", "x"}), "already has 6 data nodes");
  one_error(Store({"get", "--dataset", "cifar", "--out", dir_ / "x.bin"}), "no dataset 'cifar' (it has: fmnist)");
  one_error(Store({"fail", "node-9"}), "no data node 'node-9' (the store has: node-0, node-1");
  one_error(Store({"recover", "--policy", "fastest"}), "fastest");
  one_error(Store({"put", "--split", "test", "--dataset", "../escape"}), "../escape");
  one_error(RunProcess({TenaxBinary(), "store", "recover", "--policy", "full"}),
            "--catalog FILE is required (or --service HOST:PORT of a 'tenax store serve')");
  setenv("TENAX_SECRET", "store-cli-test-secret-0123456789", 1);
  ProcessResult nobody = RunProcess({TenaxBinary(), "store", "recover", "--service", "127.0.0.1:1"});
  EXPECT_EQ(nobody.exit_code, 3) << nobody.err;  // another process failed, not the input
  EXPECT_NE(nobody.err.find("tenax store recover: error: the recovery service at 127.0.0.1:1: cannot connect (is "
                            "'tenax store serve' running there?)"),
            std::string::npos)
      << nobody.err;
  testing::WriteBytes(dir_ / "notes.txt", std::vector<uint8_t>(300, 'x'));
  std::vector<std::string> argv = {TenaxBinary(), "store", "status", "--catalog", dir_ / "notes.txt"};
  one_error(RunProcess(argv), "not a database");
}

}  // namespace
}  // namespace tenax

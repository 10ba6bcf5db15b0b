// Coded synchronous training (mode "coded", docs/coded.md) as real
// processes: `tenax run` with 4 workers and the decoder, one worker
// SIGSTOPped by the launcher's fault plan for a stretch of steps.
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <gtest/gtest.h>

#include "tenax/core/run_records.h"
#include "testing.h"

namespace tenax::testing {
namespace {

// 4 workers on the mlp, 8192 training samples (4 partitions of 2048, 16
// samples each per step), 150 steps; `coded` adds [coded] keys, `extra`
// tables at the end.
std::string WriteCodedJob(const ScratchDir& dir, const std::string& name, const std::string& scheme,
                          const std::string& extra = "", const std::string& coded = "") {
  const std::string path = dir / name;
  std::ofstream out(path);
  out << "mode = \"coded\"\n"
      << "[cluster]\nworkers = 4\njob_id = \"" << name << "\"\npeer_timeout_seconds = 10\n"
      << "join_timeout_seconds = 60\nstep_timeout_seconds = 60\n"
      << "[coded]\nscheme = \"" << scheme << "\"\nstragglers = 1\n" << coded
      << "[data]\ntrain_limit = 8192\ntest_limit = 1000\n"
      << "[model]\nname = \"mlp\"\n"
      << "[train]\nepochs = 50\nmax_steps = 150\nbatch_size = 16\nthreads = 1\nlr = 0.05\nmomentum = 0.9\n"
      << "[log]\nevery_steps = 20\n"
      << extra;
  return path;
}

class CodedClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("TENAX_SECRET", "coded-test-secret-0123456789", 1); }
};

TEST_F(CodedClusterTest, AStoppedWorkerDoesNotStopTheStepsAndTheGradientsAreTheUncodedOnes) {
  ScratchDir dir;
  // Worker 1 is SIGSTOPped once the job reached step 10 and continued once
  // it reached step 100: the steps between are decoded without it.
  const std::string coded = WriteCodedJob(dir, "coded-stop.toml", "cyclic",
                                          "[[faults]]\naction = \"stop\"\nworker = 1\nat_step = 10\n"
                                          "[[faults]]\naction = \"cont\"\nworker = 1\nat_step = 100\n");
  auto r = RunProcess({TenaxBinary(), "run", coded, "--out", dir / "coded"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  // The same job, uncoded, waiting for every worker, without faults.
  const std::string plain = WriteCodedJob(dir, "uncoded.toml", "wait_all");
  auto u = RunProcess({TenaxBinary(), "run", plain, "--out", dir / "uncoded"});
  ASSERT_EQ(0, u.exit_code) << u.err;

  auto cs = nlohmann::json::parse(ReadText(dir / "coded/summary.json"));
  auto us = nlohmann::json::parse(ReadText(dir / "uncoded/summary.json"));
  ASSERT_TRUE(cs.contains("coded")) << cs.dump();
  ASSERT_TRUE(us.contains("coded")) << us.dump();
  const nlohmann::json& c = cs["coded"];
  EXPECT_EQ("coded", cs["mode"]);
  EXPECT_EQ(150, c["decoded_steps"]);
  EXPECT_EQ(150, cs["steps"]);
  EXPECT_EQ(150, c["exact_steps"]);
  EXPECT_DOUBLE_EQ(1.0, c["coverage"].get<double>());
  // Both signals fired (recorded by the launcher with the job's step then),
  // and every step in between was decoded without worker 1.
  int64_t stopped_at = -1, continued_at = -1;
  std::ifstream metrics(dir / "coded/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("event", "") != "fault" || j.value("worker", -1) != 1) continue;
    (j["action"] == "stop" ? stopped_at : continued_at) = j["step"].get<int64_t>();
  }
  ASSERT_GE(stopped_at, 10);
  ASSERT_GE(continued_at, 100);
  EXPECT_GE(c["steps_without_worker"][1].get<int64_t>(), continued_at - stopped_at - 2) << c.dump();

  // Exactly the uncoded gradients, step by step, up to float rounding
  // (other coefficients, another summation order): that rounding grows
  // along the trajectory (SGD with momentum amplifies it), so the bound
  // widens with the step; measured: below 1e-6 for 30 steps, 1e-3 at 100,
  // percents after 130 (the runs then follow nearby trajectories, compared
  // by their accuracy below). When the growth starts depends on which
  // workers each step decoded from (timing): one run on a loaded machine
  // reached 1.7e-3 at step 28. So: 1e-5 for the first 10 steps, 1e-2 up to
  // step 100; a decoding error (a partition left out or weighted wrong) is
  // a bias of every step, tens of percents.
  const auto& cg = c["gradient_l1"];
  const auto& ug = us["coded"]["gradient_l1"];
  ASSERT_EQ(150u, cg.size());
  ASSERT_EQ(150u, ug.size());
  for (size_t t = 0; t < 100; ++t) {
    const double a = cg[t].get<double>(), b = ug[t].get<double>();
    ASSERT_GT(b, 0) << "step " << t;
    EXPECT_NEAR(a / b, 1.0, t < 10 ? 1e-5 : 1e-2) << "step " << t << ": " << a << " vs " << b;
  }
  EXPECT_NEAR(cs["final_test_accuracy"].get<double>(), us["final_test_accuracy"].get<double>(), 0.01);
  EXPECT_GT(cs["final_test_accuracy"].get<double>(), 0.5);  // well above chance (0.1)
  EXPECT_EQ(0, us["coded"]["steps_without_worker"][1].get<int64_t>());  // wait_all waited for everyone
  EXPECT_FALSE(ReadText(dir / "coded/logs/decoder.log").empty());
}

TEST_F(CodedClusterTest, IgnoringAPersistentStragglerLosesItsDataAndShufflingBringsItBack) {
  ScratchDir dir;
  // Worker 3 is slow for the whole run: 50x, so that its delay (about
  // 100 ms for the mlp's 2 ms step) stands far above the scheduling noise
  // of a loaded 2-core machine, which once let an 8x straggler into the
  // fastest three in a quarter of the steps.
  const std::string stragglers =
      "[stragglers]\nmodel = \"markov\"\nslow_workers = [3]\nslowdown = 50.0\np_slow = 0.0\np_recover = 0.0\n";
  const std::string ignore = WriteCodedJob(dir, "ignore.toml", "ignore_stragglers", stragglers);
  const std::string shuffle = WriteCodedJob(dir, "shuffle.toml", "ignore_stragglers", stragglers, "shuffle_every = 10\n");
  auto r = RunProcess({TenaxBinary(), "run", ignore, "--out", dir / "ignore"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  auto q = RunProcess({TenaxBinary(), "run", shuffle, "--out", dir / "shuffle"});
  ASSERT_EQ(0, q.exit_code) << q.err;
  const auto c = nlohmann::json::parse(ReadText(dir / "ignore/summary.json"))["coded"];
  const auto s = nlohmann::json::parse(ReadText(dir / "shuffle/summary.json"))["coded"];
  // Each step uses the fastest 3 of 4 partitions.
  EXPECT_DOUBLE_EQ(0.75, c["coverage"].get<double>());
  EXPECT_DOUBLE_EQ(0.75, s["coverage"].get<double>());
  // Without shuffling, worker 3's partition is (almost) never used...
  EXPECT_LT(c["min_partition_share"].get<double>(), 0.1) << c.dump();
  EXPECT_EQ(0, c["shuffles"]);
  // ...with it, the slow worker's rows rotate and every partition is used
  // in a good share of the steps; the copies it took are counted.
  EXPECT_GT(s["min_partition_share"].get<double>(), 0.4) << s.dump();
  EXPECT_GE(s["shuffles"].get<int64_t>(), 3);
  EXPECT_GT(s["shuffle_bytes_moved"].get<int64_t>(), 0);
  // The straggler was detected, logged and written as an event.
  EXPECT_GE(c["straggler_events"].get<int64_t>(), 1);
  // decoder.jsonl: worker 3 found slow, and one record per shuffle counted.
  const std::string events = ReadText(dir / "shuffle/decoder.jsonl");
  bool worker3_slow = false;
  int64_t shuffle_records = 0;
  std::istringstream lines(events);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (auto st = records::StragglerFrom(j); st && st->slow && st->worker == 3) worker3_slow = true;
    if (records::ShuffleFrom(j)) ++shuffle_records;
  }
  EXPECT_TRUE(worker3_slow) << events;
  EXPECT_EQ(shuffle_records, s["shuffles"].get<int64_t>()) << events;
  EXPECT_NE(std::string::npos, ReadText(dir / "ignore/logs/decoder.log").find("is a straggler"));
  // The launcher shows the events as they happen.
  EXPECT_NE(std::string::npos, (q.out + q.err).find("worker 3 is a straggler")) << q.out << q.err;
  EXPECT_NE(std::string::npos, (q.out + q.err).find("partitions re-mapped away from slow workers")) << q.out << q.err;
}

}  // namespace
}  // namespace tenax::testing

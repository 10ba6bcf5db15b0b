// Elastic synchronous training with real processes on loopback: a
// coordinator and `tenax worker`s started one by one (no launcher, so the
// test holds every PID), real SIGKILL/SIGSTOP/SIGTERM, and checks on the
// outputs: steps, accuracy, generations, and the workers' final state
// hashes (parameters and momentum, FNV-1a) compared between processes.
// The peer timeout is 4 s: a SIGKILL is detected at once (the connection
// resets); the timeout is what finds a stopped worker, and a shorter one
// makes a worker descheduled on a loaded 2-core machine look dead.
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing.h"

namespace tenax::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string WriteElasticJob(const ScratchDir& dir, const std::string& name, int workers, int min_workers,
                            int max_workers, int64_t max_steps, double join_timeout = 30,
                            const std::string& model = "mlp", int batch = 32) {
  const std::string path = dir / (name + ".toml");
  std::ofstream out(path);
  out << "mode = \"sync\"\n"
      << "[cluster]\nworkers = " << workers << "\njob_id = \"" << name << "\"\nelastic = true\nmin_workers = "
      << min_workers << "\nmax_workers = " << max_workers << "\npeer_timeout_seconds = 4\n"
      << "join_timeout_seconds = " << join_timeout << "\nstep_timeout_seconds = 10\n"
      << "[data]\ntrain_limit = 8192\ntest_limit = 1000\n"
      << "[model]\nname = \"" << model << "\"\n"
      << "[train]\nepochs = 200\nmax_steps = " << max_steps
      << "\nbatch_size = " << batch << "\nthreads = 1\nlr = 0.05\nmomentum = 0.9\n"
      << "[log]\nevery_steps = 10\n";
  return path;
}

// `tenax run` of a 3-worker elastic job (`name`, `steps`) whose fault plan
// SIGKILLs worker 1 at `kill_step` and starts a replacement at
// `restart_step`; outputs in dir/run.
ProcessResult RunKillAndRestartPlan(const ScratchDir& dir, const std::string& name, int64_t steps, int64_t kill_step,
                                    int64_t restart_step) {
  const std::string job = WriteElasticJob(dir, name, 3, 2, 3, steps);
  {
    std::ofstream out(job, std::ios::app);
    out << "[[faults]]\naction = \"kill\"\nworker = 1\nat_step = " << kill_step << "\n"
        << "[[faults]]\naction = \"restart\"\nat_step = " << restart_step << "\n";
  }
  return RunProcess({TenaxBinary(), "run", job, "--out", dir / "run"});
}

// The last "final model and momentum state fnv1a H" a worker logged.
std::string StateHash(const std::string& log) {
  static const std::regex re("state fnv1a ([0-9a-f]{16})");
  std::string hash;
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it) hash = (*it)[1];
  return hash;
}

// Whether process `pid` is stopped (state T in /proc/PID/stat) before
// `timeout`: how a test learns that a worker reached its SIGSTOP hook.
bool WaitUntilStopped(pid_t pid, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) return false;  // gone
    if (stat[paren + 2] == 'T') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling a condition, with a deadline
  }
  return false;
}

// A coordinator and workers of one elastic job, each a Child.
class ElasticCluster {
 public:
  ElasticCluster(const ScratchDir& dir, std::string job) : dir_(dir), job_(std::move(job)) {
    coordinator_ = std::make_unique<Child>(std::vector<std::string>{
        TenaxBinary(), "coordinator", "--job", job_, "--state", dir_ / "state.db", "--port-file", dir_ / "port"});
    if (coordinator_->WaitForStderrLine("listening on")) {
      std::string port = ReadText(dir_ / "port");
      address_ = "127.0.0.1:" + port.substr(0, port.find('\n'));
    }
  }
  bool ok() const { return !address_.empty(); }
  Child& coordinator() { return *coordinator_; }
  // A new coordinator on the same port and state file (after a SIGKILL).
  bool RestartCoordinator() {
    coordinator_ = std::make_unique<Child>(std::vector<std::string>{TenaxBinary(), "coordinator", "--job", job_,
                                                                    "--state", dir_ / "state.db", "--port",
                                                                    address_.substr(address_.find(':') + 1)});
    return coordinator_->WaitForStderrLine("resuming");
  }
  // rank < 0: a joiner (the coordinator gives it a new id).
  Child& Start(const std::string& name, int rank) {
    std::vector<std::string> argv = {TenaxBinary(), "worker", "--job", job_, "--coordinator", address_, "--out",
                                     dir_ / "run"};
    if (rank >= 0) argv.insert(argv.end(), {"--rank", std::to_string(rank)});
    workers_[name] = std::make_unique<Child>(argv);
    return *workers_[name];
  }
  // Workers "w0".."w<n-1>" with ranks 0..n-1, then waits until w<first>
  // logged step `step` (false, with its output in the failure, if not).
  ::testing::AssertionResult StartAndTrainTo(int n, int64_t step, int first = 0) {
    for (int r = 0; r < n; ++r) Start("w" + std::to_string(r), r);
    Child& w = worker("w" + std::to_string(first));
    if (w.WaitForStderrLine("step " + std::to_string(step) + "/")) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << w.stderr_text();
  }
  Child& worker(const std::string& name) { return *workers_.at(name); }
  nlohmann::json Summary() const {
    auto j = nlohmann::json::parse(ReadText(dir_ / "run/summary.json"), nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }

 private:
  const ScratchDir& dir_;
  std::string job_, address_;
  std::unique_ptr<Child> coordinator_;
  std::map<std::string, std::unique_ptr<Child>> workers_;
};

class ElasticClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("TENAX_SECRET", "elastic-test-secret-0123456789", 1); }
};

TEST_F(ElasticClusterTest, SigkilledWorkerLeavesTheOthersTrainingToTheEndWithTheSameState) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "kill", 3, 2, 3, 400));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  ASSERT_TRUE(c.StartAndTrainTo(3, 50));
  c.worker("w1").Signal(SIGKILL);
  EXPECT_EQ(128 + SIGKILL, c.worker("w1").Wait());
  // The survivors are the processes started above (no restart) and finish.
  EXPECT_EQ(0, c.worker("w0").Wait()) << c.worker("w0").stderr_text();
  EXPECT_EQ(0, c.worker("w2").Wait()) << c.worker("w2").stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();
  auto summary = c.Summary();
  EXPECT_EQ(400, summary.value("steps", 0));
  EXPECT_EQ(2, summary.value("workers", 0));
  EXPECT_EQ(96, summary.value("global_batch_size", 0));  // 3 x 32 as configured, with 2 workers
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.5);
  ASSERT_EQ(2u, summary["generations"].size()) << summary.dump();
  const auto& lost = summary["generations"][1];
  EXPECT_EQ((std::vector<int>{0, 2}), lost["members"].get<std::vector<int>>());
  EXPECT_NE(std::string::npos, lost["why"].get<std::string>().find("rank 1 lost")) << lost.dump();
  EXPECT_GT(lost["first_step"].get<int>(), 50);
  // How long the re-form took is recorded (a number a user reads); how long
  // it may take on a loaded machine is not what this test is about.
  ASSERT_TRUE(lost.contains("reform_ms") && lost["reform_ms"].is_number()) << lost.dump();
  EXPECT_GE(lost["reform_ms"].get<double>(), 0.0) << lost.dump();
  const std::string h0 = StateHash(c.worker("w0").stderr_text()), h2 = StateHash(c.worker("w2").stderr_text());
  EXPECT_FALSE(h0.empty());
  EXPECT_EQ(h0, h2);
  EXPECT_EQ(h0, summary.value("state_hash", ""));
}

TEST_F(ElasticClusterTest, AJoinerReadsTheModelAndMomentumFromALivePeerAndEndsBitIdentical) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "join", 2, 1, 3, 3000));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  ASSERT_TRUE(c.StartAndTrainTo(2, 30));
  Child& joiner = c.Start("joiner", -1);
  ASSERT_TRUE(joiner.WaitForStderrLine("read the state of step")) << joiner.stderr_text();
  for (const char* w : {"w0", "w1", "joiner"}) EXPECT_EQ(0, c.worker(w).Wait()) << c.worker(w).stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();
  auto summary = c.Summary();
  EXPECT_EQ(3000, summary.value("steps", 0));
  EXPECT_EQ(3, summary.value("workers", 0));
  ASSERT_EQ(2u, summary["generations"].size()) << summary.dump();
  const auto& join = summary["generations"][1];
  EXPECT_EQ((std::vector<int>{0, 1, 2}), join["members"].get<std::vector<int>>());
  EXPECT_NE(std::string::npos, join["why"].get<std::string>().find("joined")) << join.dump();
  EXPECT_TRUE(join.contains("join_transfer_ms")) << join.dump();
  EXPECT_FALSE(join.contains("detect_ms")) << "a join is agreed at a boundary, not detected as a fault";
  const std::string h = StateHash(c.worker("w0").stderr_text());
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h, StateHash(c.worker("w1").stderr_text()));
  EXPECT_EQ(h, StateHash(joiner.stderr_text()));
}

// The donor SIGSTOPs itself (TENAX_TEST_SIGSTOP_AS_DONOR) after the members
// agreed it sends the joiner its state and before it offers it; the test
// then SIGKILLs it. The joiner's read fails naming it, the survivor and the
// joiner re-form without it, and the joiner reads the state from the other
// member (its pid in the "read the state" line), ending bit-identical.
TEST_F(ElasticClusterTest, TheDonorKilledDuringAJoinMakesTheJoinerReadFromAnotherDonor) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "donor", 2, 1, 3, 3000));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  setenv("TENAX_TEST_SIGSTOP_AS_DONOR", "1", 1);
  Child& w0 = c.Start("w0", 0);  // rank 0: the donor of the first join
  unsetenv("TENAX_TEST_SIGSTOP_AS_DONOR");
  Child& w1 = c.Start("w1", 1);
  const pid_t w0_pid = w0.pid(), w1_pid = w1.pid();  // pid() is -1 once a child is reaped
  ASSERT_TRUE(w0.WaitForStderrLine("step 30/")) << w0.stderr_text();
  Child& joiner = c.Start("joiner", -1);
  ASSERT_TRUE(WaitUntilStopped(w0_pid, std::chrono::seconds(60)))
      << "the donor never reached its hook\n" << w0.stderr_text() << joiner.stderr_text();
  w0.Signal(SIGKILL);
  EXPECT_EQ(128 + SIGKILL, w0.Wait());
  ASSERT_TRUE(joiner.WaitForStderrLine("read the state of step")) << joiner.stderr_text();
  EXPECT_EQ(0, w1.Wait()) << w1.stderr_text();
  EXPECT_EQ(0, joiner.Wait()) << joiner.stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();

  const std::string& log = joiner.stderr_text();
  const std::string w0_name = "/" + std::to_string(w0_pid) + ")", w1_name = "/" + std::to_string(w1_pid) + ")";
  EXPECT_NE(std::string::npos, log.find("no state from donor rank 0 (127.0.0.1" + w0_name)) << log;
  std::smatch read;
  ASSERT_TRUE(std::regex_search(log, read, std::regex("read the state of step [0-9]+ \\([0-9]+ bytes\\) from [^\\n]*")))
      << log;
  EXPECT_NE(std::string::npos, read.str().find(w1_name)) << read.str() << " (w1 is pid " << w1_pid << ")";
  auto summary = c.Summary();
  EXPECT_EQ(3000, summary.value("steps", 0));
  EXPECT_EQ(2, summary.value("workers", 0));
  ASSERT_FALSE(summary["generations"].empty()) << summary.dump();
  EXPECT_EQ((std::vector<int>{1, 2}), summary["generations"].back()["members"].get<std::vector<int>>())
      << summary.dump();
  const std::string h = StateHash(w1.stderr_text());
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h, StateHash(log));
  EXPECT_EQ(h, summary.value("state_hash", ""));
}

// A member lost while a joiner sets up its first allreduce. w2 SIGSTOPs
// itself (TENAX_TEST_SIGSTOP_BEFORE_ALLREDUCE) once it re-formed the join's
// generation and before it offers its part of that generation's allreduce;
// the test SIGKILLs it there. The joiner's first allreduce setup then has
// no offer from w2. Before, that was fatal in the joiner's Attach (it exited
// 3, found by the 60-minute soak); now the joiner reports w2 and joins the
// next generation like any member, takes its state from a live donor, and
// ends bit-identical with the survivors.
TEST_F(ElasticClusterTest, AMemberLostWhileAJoinerSetsUpItsFirstAllreduceCostsOnlyThatMember) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "setup", 3, 1, 4, 3000));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  Child& w0 = c.Start("w0", 0);
  Child& w1 = c.Start("w1", 1);
  setenv("TENAX_TEST_SIGSTOP_BEFORE_ALLREDUCE", "1", 1);
  Child& w2 = c.Start("w2", 2);
  unsetenv("TENAX_TEST_SIGSTOP_BEFORE_ALLREDUCE");
  const pid_t w2_pid = w2.pid();  // pid() is -1 once a child is reaped
  ASSERT_TRUE(w0.WaitForStderrLine("step 30/")) << w0.stderr_text();
  Child& joiner = c.Start("joiner", -1);
  ASSERT_TRUE(WaitUntilStopped(w2_pid, std::chrono::seconds(60)))
      << "w2 never reached its hook\n" << w2.stderr_text() << joiner.stderr_text();
  w2.Signal(SIGKILL);
  EXPECT_EQ(128 + SIGKILL, w2.Wait());
  for (Child* w : {&w0, &w1, &joiner}) EXPECT_EQ(0, w->Wait()) << w->stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();

  const std::string& log = joiner.stderr_text();
  const std::string w2_name = "/" + std::to_string(w2_pid) + ")";
  std::smatch failed;
  // The joiner names w2 either way: no offer came from it (by its member
  // name, host/pid), or, on a loaded machine, UCX's endpoint timeout to the
  // stopped process came first (by its node name, worker-2).
  ASSERT_TRUE(std::regex_search(log, failed, std::regex("setting up the allreduce of generation [0-9]+ failed "
                                                        "\\((allreduce setup: no offer from|peer )[^\\n]*")))
      << log;
  EXPECT_TRUE(failed.str().find(w2_name) != std::string::npos || failed.str().find("(worker-2@") != std::string::npos)
      << failed.str() << " (w2 is pid " << w2_pid << ")";
  EXPECT_NE(std::string::npos, log.find("read the state of step")) << log;
  auto summary = c.Summary();
  EXPECT_EQ(3000, summary.value("steps", 0));
  EXPECT_EQ(3, summary.value("workers", 0));
  ASSERT_FALSE(summary["generations"].empty()) << summary.dump();
  EXPECT_EQ((std::vector<int>{0, 1, 3}), summary["generations"].back()["members"].get<std::vector<int>>())
      << summary.dump();
  const std::string h = StateHash(w0.stderr_text());
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h, StateHash(w1.stderr_text()));
  EXPECT_EQ(h, StateHash(log));
  EXPECT_EQ(h, summary.value("state_hash", ""));
}

// The end of a job whose first generation lost a member before step 0:
// `donor` (rank 0 of the next generation) sent its initial model to
// `receiver`, the job trained all `steps` with `members` in its last
// generation, and both survivors and summary.json hold the same state.
void ExpectOneInitialModelBecameBoth(ElasticCluster& c, Child& donor, Child& receiver, int64_t steps,
                                     const std::vector<int>& members) {
  EXPECT_NE(std::string::npos, donor.stderr_text().find("sending the state of step 0")) << donor.stderr_text();
  EXPECT_NE(std::string::npos, receiver.stderr_text().find("read the state of step 0")) << receiver.stderr_text();
  auto summary = c.Summary();
  EXPECT_EQ(steps, summary.value("steps", int64_t{0}));
  EXPECT_EQ(2, summary.value("workers", 0));
  ASSERT_FALSE(summary["generations"].empty()) << summary.dump();
  EXPECT_EQ(members, summary["generations"].back()["members"].get<std::vector<int>>()) << summary.dump();
  const std::string h = StateHash(donor.stderr_text());
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h, StateHash(receiver.stderr_text()));
  EXPECT_EQ(h, summary.value("state_hash", ""));
}

// A member lost while the first generation sets up its allreduce: w0 (rank
// 0, whose initial model the broadcast would give everyone) SIGSTOPs itself
// (TENAX_TEST_SIGSTOP_BEFORE_ALLREDUCE=first) before it offers its part,
// and stays stopped past the 4 s peer timeout: a worker descheduled on a
// loaded machine, as the 60-minute soak saw. Before, the others' failed
// setup ended the job (they exited 3 before any step); now they report w0,
// form the next generation, and one of them gives its initial model to the
// other (the broadcast never happened: each holds its own), so they end
// bit-identical.
TEST_F(ElasticClusterTest, AMemberLostWhileTheFirstGenerationSetsUpCostsOnlyThatMember) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "first", 3, 1, 3, 1000));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  setenv("TENAX_TEST_SIGSTOP_BEFORE_ALLREDUCE", "first", 1);
  Child& w0 = c.Start("w0", 0);
  unsetenv("TENAX_TEST_SIGSTOP_BEFORE_ALLREDUCE");
  const pid_t w0_pid = w0.pid();
  Child& w1 = c.Start("w1", 1);
  Child& w2 = c.Start("w2", 2);
  ASSERT_TRUE(WaitUntilStopped(w0_pid, std::chrono::seconds(60))) << "w0 never reached its hook\n" << w0.stderr_text();
  // Stopped, not dead: the others find it by the peer timeout.
  ASSERT_TRUE(w1.WaitForStderrLine("setting up the allreduce of generation"))
      << w1.stderr_text() << c.coordinator().stderr_text();
  w0.Signal(SIGKILL);
  EXPECT_EQ(128 + SIGKILL, w0.Wait());
  for (Child* w : {&w1, &w2}) EXPECT_EQ(0, w->Wait()) << w->stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();

  // w1 (rank 0 of the next generation) gave its initial model to w2.
  ExpectOneInitialModelBecameBoth(c, w1, w2, 1000, {1, 2});
}

// A member lost while the first generation connects every pair: w1
// SIGSTOPs itself (TENAX_TEST_SIGSTOP_BEFORE_CONNECT) once it has its rank
// and the first roster, before it dials or accepts anyone, and is then
// SIGKILLed (a preempted machine). w0 dials w1 and finds it gone; w2
// waits for w1 to dial it and stops waiting when the coordinator, which
// lost w1's connection, publishes the next generation. Before, w0's failed
// connect ended the job ("cannot reach rank 1", exit 3); now both join the
// next generation with their initial models, one gives its model to the
// other, and they end bit-identical after every step.
TEST_F(ElasticClusterTest, AMemberLostWhileTheFirstGenerationConnectsCostsOnlyThatMember) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "connect", 3, 1, 3, 600));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  Child& w0 = c.Start("w0", 0);
  setenv("TENAX_TEST_SIGSTOP_BEFORE_CONNECT", "1", 1);
  Child& w1 = c.Start("w1", 1);
  unsetenv("TENAX_TEST_SIGSTOP_BEFORE_CONNECT");
  Child& w2 = c.Start("w2", 2);
  ASSERT_TRUE(WaitUntilStopped(w1.pid(), std::chrono::seconds(60))) << "w1 never reached its hook\n" << w1.stderr_text();
  w1.Signal(SIGKILL);
  EXPECT_EQ(128 + SIGKILL, w1.Wait());
  for (Child* w : {&w0, &w2}) EXPECT_EQ(0, w->Wait()) << w->stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();

  // Neither formed the first generation; both said so and went on.
  for (Child* w : {&w0, &w2}) {
    EXPECT_NE(std::string::npos, w->stderr_text().find("connecting the members of generation 1 failed"))
        << w->stderr_text();
  }
  // w0 (rank 0 of the next generation) gave its initial model to w2.
  ExpectOneInitialModelBecameBoth(c, w0, w2, 600, {0, 2});
}

// A join and a leave moments apart: the leave's generation is published
// before the members reach the join's step boundary, so they skip the
// join's generation (the joiner formed it with nobody). Before the stable
// generation (docs/elastic.md) a member failed with "is not joining
// generation g+1 but was not in this member's generation g-1" and the job
// ended; now the joiner joins the newest generation and everyone ends with
// the same state.
//
// One try of that schedule. Every try must end well whatever the timing;
// *skipped says whether the race this test is named after happened: the
// generation the coordinator published for the joiner is absent from the
// generations rank 0 trained in. With `force_race`, w0 and w1 are
// SIGSTOPped before the joiner starts and SIGCONTed once the coordinator
// published the leave's generation, so they reach the join's step boundary
// only after it (w2, waiting for them in an allreduce, heeds its SIGTERM
// there and leaves): the race happens every time. Without, the timing is
// free (the members may form the join's generation first, or start to
// form it and see it superseded: the case the CI once caught waiting out a
// whole reform timeout, fixed by Group's superseded generations).
void JoinAndLeaveMomentsApart(bool force_race, bool* skipped) {
  *skipped = false;
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "close", 3, 1, 4, 2000));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  ASSERT_TRUE(c.StartAndTrainTo(3, 30));
  if (force_race) {
    for (const char* w : {"w0", "w1"}) {
      const pid_t pid = c.worker(w).pid();
      c.worker(w).Signal(SIGSTOP);
      ASSERT_TRUE(WaitUntilStopped(pid, std::chrono::seconds(30))) << w;
    }
  }
  Child& joiner = c.Start("joiner", -1);
  // The moment the coordinator admits the joiner (and publishes its
  // generation), worker 2 is told to leave.
  ASSERT_TRUE(c.coordinator().WaitForStderrLine("rank 3 joined")) << c.coordinator().stderr_text();
  c.worker("w2").Signal(SIGTERM);
  if (force_race) {
    ASSERT_TRUE(c.coordinator().WaitForStderrLine("rank 2 left")) << c.coordinator().stderr_text();
    for (const char* w : {"w0", "w1"}) c.worker(w).Signal(SIGCONT);
  }
  EXPECT_EQ(0, c.worker("w2").Wait()) << c.worker("w2").stderr_text();
  for (const char* w : {"w0", "w1", "joiner"}) EXPECT_EQ(0, c.worker(w).Wait()) << c.worker(w).stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();
  auto summary = c.Summary();
  EXPECT_EQ(2000, summary.value("steps", 0));
  ASSERT_FALSE(summary["generations"].empty()) << summary.dump();
  EXPECT_EQ((std::vector<int>{0, 1, 3}), summary["generations"].back()["members"].get<std::vector<int>>())
      << summary.dump();
  const std::string h = StateHash(c.worker("w0").stderr_text());
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h, StateHash(c.worker("w1").stderr_text()));
  EXPECT_EQ(h, StateHash(joiner.stderr_text()));
  EXPECT_EQ(h, summary.value("state_hash", ""));

  // The joiner's generation and the leave's, as the coordinator published them.
  const std::string& log = c.coordinator().stderr_text();
  std::smatch join, leave;
  ASSERT_TRUE(std::regex_search(log, join, std::regex("generation ([0-9]+) of 4 workers \\(rank 3 joined"))) << log;
  ASSERT_TRUE(std::regex_search(log, leave, std::regex("generation ([0-9]+) of 3 workers \\(rank 2 left"))) << log;
  const int join_generation = std::stoi(join[1]), leave_generation = std::stoi(leave[1]);
  EXPECT_EQ(join_generation + 1, leave_generation) << log;
  std::vector<int> trained;  // the generations rank 0 formed and trained in
  for (const auto& g : summary["generations"]) trained.push_back(g.value("number", -1));
  *skipped = std::find(trained.begin(), trained.end(), join_generation) == trained.end();
  if (*skipped) {
    // The members went straight from the first generation to the leave's.
    EXPECT_EQ(leave_generation, summary["generations"].back().value("number", -1)) << summary.dump();
    EXPECT_EQ((std::vector<int>{1, leave_generation}), trained) << summary.dump();
  } else {
    std::cerr << (force_race ? "forced" : "free") << " timing: the members formed the joiner's generation " << join_generation
              << " before the leave's was published (generations " << nlohmann::json(trained).dump()
              << "): the race did not happen\n";
  }
}

TEST_F(ElasticClusterTest, AJoinAndALeaveMomentsApartReformWithoutFailingTheJob) {
  // Free timing first: whatever happens must end well. Then the race itself,
  // forced (a try left to chance missed it in about half the runs on an
  // idle machine, and 3 misses in a row failed the test).
  bool skipped = false;
  JoinAndLeaveMomentsApart(/*force_race=*/false, &skipped);
  if (HasFailure()) return;  // a wrong run: its failures say why
  JoinAndLeaveMomentsApart(/*force_race=*/true, &skipped);
  if (HasFailure()) return;
  EXPECT_TRUE(skipped) << "with w0 and w1 stopped until the leave's generation was out, they still formed the "
                       << "joiner's generation";
}

TEST_F(ElasticClusterTest, SigtermMakesAWorkerLeaveAtABoundaryWithoutCostingTheOthersATimeout) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "leave", 3, 1, 3, 400));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  ASSERT_TRUE(c.StartAndTrainTo(3, 50, 2));
  c.worker("w2").Signal(SIGTERM);
  EXPECT_EQ(0, c.worker("w2").Wait()) << c.worker("w2").stderr_text();
  EXPECT_NE(std::string::npos, c.worker("w2").stderr_text().find("left the job")) << c.worker("w2").stderr_text();
  EXPECT_EQ(0, c.worker("w0").Wait()) << c.worker("w0").stderr_text();
  EXPECT_EQ(0, c.worker("w1").Wait()) << c.worker("w1").stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();
  auto summary = c.Summary();
  EXPECT_EQ(400, summary.value("steps", 0));
  ASSERT_EQ(2u, summary["generations"].size()) << summary.dump();
  const auto& leave = summary["generations"][1];
  EXPECT_NE(std::string::npos, leave["why"].get<std::string>().find("rank 2 left")) << leave.dump();
  // What the name promises, from the members' own record rather than a
  // wall clock: the leave was agreed at a boundary, never detected as a
  // failure (a detection, by a reset or the peer timeout, records detect_ms).
  EXPECT_FALSE(leave.contains("detect_ms")) << "nobody waited for a failure: " << leave.dump();
  EXPECT_EQ(StateHash(c.worker("w0").stderr_text()), StateHash(c.worker("w1").stderr_text()));
}

TEST_F(ElasticClusterTest, AStoppedWorkerIsEvictedAndAfterSigcontIsRefusedWithoutHarmingTheGroup) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "stop", 3, 2, 3, 500));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  ASSERT_TRUE(c.StartAndTrainTo(3, 50));
  c.worker("w1").Signal(SIGSTOP);
  ASSERT_TRUE(c.coordinator().WaitForStderrLine("generation 2")) << c.coordinator().stderr_text();
  c.worker("w1").Signal(SIGCONT);
  // Refused by the generation that evicted it: "2 bad input or refused"
  // (`tenax worker --help`; docs/config.md, "Exit status").
  EXPECT_EQ(2, c.worker("w1").Wait()) << c.worker("w1").stderr_text();
  EXPECT_NE(std::string::npos, c.worker("w1").stderr_text().find("removed")) << c.worker("w1").stderr_text();
  EXPECT_EQ(0, c.worker("w0").Wait()) << c.worker("w0").stderr_text();
  EXPECT_EQ(0, c.worker("w2").Wait()) << c.worker("w2").stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();
  auto summary = c.Summary();
  EXPECT_EQ(500, summary.value("steps", 0));
  EXPECT_EQ(StateHash(c.worker("w0").stderr_text()), StateHash(c.worker("w2").stderr_text()));
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.5);
}

TEST_F(ElasticClusterTest, TwoLossesAtOnceLeaveTheRestTraining) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "two", 4, 2, 4, 400));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  ASSERT_TRUE(c.StartAndTrainTo(4, 40));
  c.worker("w1").Signal(SIGKILL);
  c.worker("w3").Signal(SIGKILL);
  EXPECT_EQ(0, c.worker("w0").Wait()) << c.worker("w0").stderr_text();
  EXPECT_EQ(0, c.worker("w2").Wait()) << c.worker("w2").stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();
  auto summary = c.Summary();
  EXPECT_EQ(400, summary.value("steps", 0));
  EXPECT_EQ(2, summary.value("workers", 0));
  const auto& last = summary["generations"].back();
  EXPECT_EQ((std::vector<int>{0, 2}), last["members"].get<std::vector<int>>()) << summary.dump();
  EXPECT_EQ(StateHash(c.worker("w0").stderr_text()), StateHash(c.worker("w2").stderr_text()));
}

TEST_F(ElasticClusterTest, TheCoordinatorKilledWithAWorkerIsRestartedAndTheSurvivorsFinish) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "restart", 3, 2, 3, 1500));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  ASSERT_TRUE(c.StartAndTrainTo(3, 50));
  // The loss happens while no coordinator is there to decide about it.
  c.coordinator().Signal(SIGKILL);
  c.worker("w1").Signal(SIGKILL);
  EXPECT_EQ(128 + SIGKILL, c.coordinator().Wait());
  ASSERT_TRUE(c.RestartCoordinator()) << c.coordinator().stderr_text();
  EXPECT_EQ(0, c.worker("w0").Wait()) << c.worker("w0").stderr_text();
  EXPECT_EQ(0, c.worker("w2").Wait()) << c.worker("w2").stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();
  EXPECT_NE(std::string::npos, c.coordinator().stderr_text().find("rank 1 lost")) << c.coordinator().stderr_text();
  auto summary = c.Summary();
  EXPECT_EQ(1500, summary.value("steps", 0));
  EXPECT_EQ((std::vector<int>{0, 2}), summary["generations"].back()["members"].get<std::vector<int>>())
      << summary.dump();
  EXPECT_EQ(StateHash(c.worker("w0").stderr_text()), StateHash(c.worker("w2").stderr_text()));
}

// The coordinator lost as the job ends: SIGKILLed (TENAX_TEST_SIGKILL_ON_DONE)
// when the first Done arrives, before it stored it. The workers, done
// training, wait for its acknowledgement, rejoin the restarted coordinator
// and tell it again, so it ends the job (exit 0). Before, they exited as
// soon as the Done was sent, and the restarted coordinator waited its join
// timeout for ranks that were gone and failed the job ("did not reconnect
// to the restarted coordinator within the join timeout"), as a soak round
// of a fixed sync job did.
TEST_F(ElasticClusterTest, ACoordinatorLostAsTheWorkersReportDoneIsToldAgainOnceRestarted) {
  ScratchDir dir;
  setenv("TENAX_TEST_SIGKILL_ON_DONE", "1", 1);
  ElasticCluster c(dir, WriteElasticJob(dir, "done", 2, 1, 2, 300));
  unsetenv("TENAX_TEST_SIGKILL_ON_DONE");
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  Child& w0 = c.Start("w0", 0);
  Child& w1 = c.Start("w1", 1);
  EXPECT_EQ(128 + SIGKILL, c.coordinator().Wait()) << c.coordinator().stderr_text();
  ASSERT_TRUE(c.RestartCoordinator()) << c.coordinator().stderr_text();
  EXPECT_EQ(0, w0.Wait()) << w0.stderr_text();
  EXPECT_EQ(0, w1.Wait()) << w1.stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();
  const std::string log = c.coordinator().stderr_text();
  EXPECT_NE(std::string::npos, log.find("rank 0 finished")) << log;
  EXPECT_NE(std::string::npos, log.find("rank 1 finished")) << log;
  auto summary = c.Summary();
  EXPECT_EQ(300, summary.value("steps", 0)) << summary.dump();
  const std::string h = StateHash(w0.stderr_text());
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h, StateHash(w1.stderr_text()));
}

// Inside a join's window: the coordinator is SIGKILLed right after it
// admitted a joiner and published the generation that takes it in, while
// the members re-form and the joiner reads its state. The restarted
// coordinator re-publishes that generation to whoever rejoins; the joiner
// and the survivors finish bit-identical, no member lost.
TEST_F(ElasticClusterTest, TheCoordinatorKilledInsideAJoinsWindowIsRestartedAndTheJoinCompletes) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "join-restart", 2, 1, 3, 3000));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  ASSERT_TRUE(c.StartAndTrainTo(2, 30));
  Child& joiner = c.Start("joiner", -1);
  ASSERT_TRUE(c.coordinator().WaitForStderrLine("rank 2 joined:")) << c.coordinator().stderr_text();
  c.coordinator().Signal(SIGKILL);
  EXPECT_EQ(128 + SIGKILL, c.coordinator().Wait());
  ASSERT_TRUE(c.RestartCoordinator()) << c.coordinator().stderr_text();
  for (const char* w : {"w0", "w1", "joiner"}) EXPECT_EQ(0, c.worker(w).Wait()) << c.worker(w).stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();
  auto summary = c.Summary();
  EXPECT_EQ(3000, summary.value("steps", 0));
  ASSERT_FALSE(summary["generations"].empty()) << summary.dump();
  EXPECT_EQ((std::vector<int>{0, 1, 2}), summary["generations"].back()["members"].get<std::vector<int>>())
      << summary.dump();
  const std::string h = StateHash(c.worker("w0").stderr_text());
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h, StateHash(c.worker("w1").stderr_text()));
  EXPECT_EQ(h, StateHash(joiner.stderr_text()));
}

TEST_F(ElasticClusterTest, BelowMinWorkersTheJobWaitsThenFailsNamingTheMissingWorker) {
  ScratchDir dir;
  ElasticCluster c(dir, WriteElasticJob(dir, "min", 2, 2, 2, 1000000, 10));
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  ASSERT_TRUE(c.StartAndTrainTo(2, 20));
  c.worker("w1").Signal(SIGKILL);
  const auto killed = Clock::now();
  // A job that lost a worker for good: 3, "another process or the network
  // failed: a lost or hung worker" (docs/config.md, "Exit status";
  // `tenax coordinator --help`: "3 a worker failed or a deadline passed").
  EXPECT_EQ(3, c.coordinator().Wait()) << c.coordinator().stderr_text();
  const double waited = std::chrono::duration<double>(Clock::now() - killed).count();
  // join_timeout (10 s) is both the initial join's and the pause's: long
  // enough for two workers to load their data on a loaded machine.
  EXPECT_GT(waited, 10.0) << "the job must wait join_timeout for a joiner";
  // The behaviour under test is also that it then fails, at the join
  // timeout and not at some later deadline: 60 s (6x the join timeout) is
  // generous for a loaded machine; the Wait above gives up only at 180 s.
  EXPECT_LT(waited, 60.0);
  const std::string& log = c.coordinator().stderr_text();
  EXPECT_NE(std::string::npos, log.find("only 1 of min_workers 2")) << log;
  EXPECT_NE(std::string::npos, log.find("rank 1 on 127.0.0.1")) << log;
  // The survivor's job failed because another rank was lost: 3, "another
  // rank or the network failed" (`tenax worker --help`).
  EXPECT_EQ(3, c.worker("w0").Wait()) << c.worker("w0").stderr_text();
  EXPECT_NE(std::string::npos, c.worker("w0").stderr_text().find("min_workers")) << c.worker("w0").stderr_text();
}

TEST_F(ElasticClusterTest, AJoinerOfAnotherModelIsRefusedAndTheJobGoesOn) {
  ScratchDir dir;
  const std::string job = WriteElasticJob(dir, "fp", 2, 1, 3, 3000);
  ElasticCluster c(dir, job);
  ASSERT_TRUE(c.ok()) << c.coordinator().stderr_text();
  ASSERT_TRUE(c.StartAndTrainTo(2, 20));
  std::string port = ReadText(dir / "port");
  auto r = RunProcess({TenaxBinary(), "worker", "--job", job, "--coordinator",
                       "127.0.0.1:" + port.substr(0, port.find('\n')), "--set", "model.name=\"cnn\""});
  EXPECT_EQ(2, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("plan fingerprint")) << r.err;
  EXPECT_EQ(0, c.worker("w0").Wait()) << c.worker("w0").stderr_text();
  EXPECT_EQ(0, c.worker("w1").Wait()) << c.worker("w1").stderr_text();
  EXPECT_EQ(0, c.coordinator().Wait()) << c.coordinator().stderr_text();
  EXPECT_EQ(3000, c.Summary().value("steps", 0));
  EXPECT_EQ(1u, c.Summary()["generations"].size());
}

TEST_F(ElasticClusterTest, TenaxRunExecutesAFaultPlanAndTheJobSurvivesTheKillAndAdmitsTheReplacement) {
  ScratchDir dir;
  auto r = RunKillAndRestartPlan(dir, "plan", 2500, 100, 300);
  ASSERT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("fault: SIGKILL worker 1")) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("generation 2: 2 workers (ranks 0, 2)")) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("generation 3: 3 workers (ranks 0, 2, 3)")) << r.err;
  auto summary = nlohmann::json::parse(ReadText(dir / "run/summary.json"));
  EXPECT_EQ(2500, summary.value("steps", 0));
  EXPECT_EQ(3, summary.value("workers", 0));
  EXPECT_EQ(2u, summary["faults"].size()) << summary.dump();
  ASSERT_EQ(3u, summary["generations"].size()) << summary.dump();
  EXPECT_TRUE(summary["generations"][1].contains("reform_ms"));
  EXPECT_TRUE(summary["generations"][2].contains("join_transfer_ms"));
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.5);
  // The joiner's final state is the others'.
  const std::string h = StateHash(ReadText(dir / "run/logs/worker-0.log"));
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h, StateHash(ReadText(dir / "run/logs/joiner-1.log")));
  // metrics.jsonl holds the faults and the generations as events.
  int faults = 0, generations = 0;
  std::ifstream metrics(dir / "run/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    auto e = nlohmann::json::parse(line).value("event", "");
    faults += e == "fault" ? 1 : 0;
    generations += e == "generation" ? 1 : 0;
  }
  EXPECT_EQ(2, faults);
  EXPECT_EQ(3, generations);
}

// Whether `path` contains `needle` before `timeout` (a log another
// process writes: polled, with a deadline).
bool WaitForFileText(const std::string& path, const std::string& needle, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a condition, with a deadline
  }
  return false;
}

// The scheduling class of `pid` becomes `policy` before `timeout` (the
// launcher moves a process it started: polled, with a deadline).
bool WaitForPolicy(pid_t pid, int policy, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    if (::sched_getscheduler(pid) == policy) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a condition, with a deadline
  }
  return false;
}

// The pid `tenax run` printed for `who` ("worker 1: starting (pid N)",
// "spare 2: spare (pid N; ..."), or 0.
pid_t PidOf(const std::string& launcher_err, const std::string& who) {
  const std::regex re(who + ": (?:starting|spare) \\(pid ([0-9]+)[;)]");
  std::smatch m;
  return std::regex_search(launcher_err, m, re) ? static_cast<pid_t>(std::stoi(m[1])) : 0;
}

// cluster.spares = 1: `tenax run` keeps a warm spare (model and data
// loaded, joined, waiting) beside 3 members. A member SIGKILLed and a
// member that gets a preemption notice (SIGTERM) are each replaced by the
// waiting spare in the very generation that drops them, so no generation
// has fewer than 3 members; the launcher starts a new spare after each
// admission, the spares end with the survivor's state hash, and the spare
// still waiting at the end is stopped and exits 0. The first spare starts
// with the workers (warm when the job begins, without taking a member's
// rank); the later ones wait in SCHED_IDLE and train in the normal class.
TEST_F(ElasticClusterTest, AWarmSpareTakesAKilledAndAPreemptedMembersPlaceInTheGenerationThatDropsThem) {
  ScratchDir dir;
  // 12000 steps (about 25 s idle, twice that beside another test): the
  // second spare starts in SCHED_IDLE and must be waiting before the end.
  std::string job_text = ReadText(WriteElasticJob(dir, "spares", 3, 2, 3, 12000));
  job_text.replace(job_text.find("elastic = true\n"), 15, "elastic = true\nspares = 1\n");
  const std::string job = dir / "spares-1.toml";
  {
    std::ofstream out(job);
    out << job_text;
  }
  Child run({TenaxBinary(), "run", job, "--out", dir / "run"});
  ASSERT_TRUE(run.WaitForStderrLine("spare 1: spare (pid")) << run.stderr_text();
  EXPECT_EQ(std::string::npos, run.stderr_text().find("generation 1:"))
      << "the first spare starts with the workers, before the job forms: " << run.stderr_text();
  const pid_t w1 = PidOf(run.stderr_text(), "worker 1"), w2 = PidOf(run.stderr_text(), "worker 2");
  ASSERT_GT(w1, 0) << run.stderr_text();
  ASSERT_GT(w2, 0) << run.stderr_text();
  // Every member has set up the first generation, and the spare has joined
  // and waits: kill a member. (A member lost before the job forms is the
  // next test's.)
  for (const char* log : {"worker-0.log", "worker-1.log", "worker-2.log"}) {
    ASSERT_TRUE(WaitForFileText(dir / (std::string("run/logs/") + log), "generation 1 from step 0", std::chrono::seconds(60)))
        << log << ": " << run.stderr_text();
  }
  ASSERT_TRUE(WaitForFileText(dir / "run/logs/spare-1.log", "waiting as a spare", std::chrono::seconds(60)))
      << run.stderr_text();
  ASSERT_EQ(0, ::kill(w1, SIGKILL));
  ASSERT_TRUE(run.WaitForStderrLine("spare 1: spare -> active (member 3 of generation 2)")) << run.stderr_text();
  // Its replacement spare waits in turn, in SCHED_IDLE: a preemption
  // notice to another member.
  ASSERT_TRUE(run.WaitForStderrLine("spare 2: spare (pid")) << run.stderr_text();
  ASSERT_TRUE(WaitForFileText(dir / "run/logs/spare-2.log", "waiting as a spare", std::chrono::seconds(60)))
      << run.stderr_text();
  const pid_t spare2 = PidOf(run.stderr_text(), "spare 2");
  ASSERT_GT(spare2, 0) << run.stderr_text();
  EXPECT_TRUE(WaitForPolicy(spare2, SCHED_IDLE, std::chrono::seconds(10))) << "a spare started mid-run waits in SCHED_IDLE";
  ASSERT_EQ(0, ::kill(w2, SIGTERM));
  ASSERT_TRUE(run.WaitForStderrLine("spare 2: spare -> active (member 4 of generation 3)")) << run.stderr_text();
  if (::geteuid() == 0) {  // admitted, it trains in the members' class
    EXPECT_TRUE(WaitForPolicy(spare2, SCHED_OTHER, std::chrono::seconds(10))) << run.stderr_text();
  }
  ASSERT_EQ(0, run.Wait()) << run.stderr_text();

  auto summary = nlohmann::json::parse(ReadText(dir / "run/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(12000, summary.value("steps", 0));
  EXPECT_EQ(3, summary.value("workers", 0));
  ASSERT_EQ(3u, summary["generations"].size()) << summary["generations"].dump();
  EXPECT_EQ((std::vector<int>{0, 1, 2}), summary["generations"][0]["members"].get<std::vector<int>>());
  EXPECT_EQ((std::vector<int>{0, 2, 3}), summary["generations"][1]["members"].get<std::vector<int>>());
  EXPECT_EQ((std::vector<int>{0, 3, 4}), summary["generations"][2]["members"].get<std::vector<int>>());
  EXPECT_TRUE(summary["generations"][1].contains("join_transfer_ms")) << summary["generations"].dump();
  EXPECT_EQ(1, summary["spares"].value("configured", 0)) << summary["spares"].dump();
  EXPECT_EQ(3, summary["spares"].value("started", 0)) << summary["spares"].dump();
  EXPECT_EQ(2, summary["spares"].value("admitted", 0)) << summary["spares"].dump();
  // The spares trained on to the end with the survivor's model and momentum.
  const std::string h = StateHash(ReadText(dir / "run/logs/worker-0.log"));
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h, StateHash(ReadText(dir / "run/logs/spare-1.log")));
  EXPECT_EQ(h, StateHash(ReadText(dir / "run/logs/spare-2.log")));
  EXPECT_EQ(h, summary.value("state_hash", ""));
  // Only without the right to leave SCHED_IDLE does the launcher say a
  // spare could not get the members' class back.
  if (::geteuid() == 0) {
    EXPECT_EQ(std::string::npos, run.stderr_text().find("trains in SCHED_IDLE")) << run.stderr_text();
  }
  // The third spare was not needed: stopped at the end, it exited 0.
  EXPECT_NE(std::string::npos, run.stderr_text().find("spare 3: spare -> left (not needed: the job is done)"))
      << run.stderr_text();
  const std::string spare3 = ReadText(dir / "run/logs/spare-3.log");
  EXPECT_NE(std::string::npos, spare3.find("stopped by signal 15 while waiting as a spare")) << spare3;
  EXPECT_NE(std::string::npos, spare3.find("the job did not need it")) << spare3;
}

// `tenax run` of a 3-worker elastic job of 600 steps (min_workers 2) with
// `spares` warm spares, whose plan SIGKILLs worker 1 at 0 s: before it can
// join (a worker needs most of a second to load libtorch), so the
// coordinator never sees it and only the launcher can say it ended.
// `more_faults` (TOML) is appended to the plan.
ProcessResult RunWithWorker1LostBeforeTheJobForms(const ScratchDir& dir, const std::string& name, int spares,
                                                  const std::string& more_faults = "") {
  std::string job_text = ReadText(WriteElasticJob(dir, name, 3, 2, 3, 600));
  if (spares > 0) {
    job_text.replace(job_text.find("elastic = true\n"), 15,
                     "elastic = true\nspares = " + std::to_string(spares) + "\n");
  }
  job_text += "[[faults]]\naction = \"kill\"\nworker = 1\nat_seconds = 0\n" + more_faults;
  const std::string job = dir / (name + "-early-kill.toml");
  {
    std::ofstream out(job);
    out << job_text;
  }
  return RunProcess({TenaxBinary(), "run", job, "--out", dir / "run"});
}

// What both early-loss runs must end with: all 600 steps in one generation
// of `members`, and worker 0, worker 2, `also_log` (the spare's, if any)
// and summary.json holding the same model and momentum. No child left.
void ExpectOneGenerationOfTrainedBitIdentical(const ScratchDir& dir, const std::vector<int>& members,
                                              const std::string& also_log) {
  auto summary = nlohmann::json::parse(ReadText(dir / "run/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(600, summary.value("steps", 0));
  ASSERT_EQ(1u, summary["generations"].size()) << summary["generations"].dump();
  EXPECT_EQ(members, summary["generations"][0]["members"].get<std::vector<int>>());
  const std::string h = StateHash(ReadText(dir / "run/logs/worker-0.log"));
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h, StateHash(ReadText(dir / "run/logs/worker-2.log")));
  if (!also_log.empty()) {
    EXPECT_EQ(h, StateHash(ReadText(dir / ("run/logs/" + also_log))));
  }
  EXPECT_EQ(h, summary.value("state_hash", ""));
  EXPECT_TRUE(ProcessesMentioning(dir / "run").empty()) << "children left running";
}

// A preemptible machine is as likely to go in a job's first seconds as
// later. With cluster.spares = 1 and worker 1 lost before it joined, the
// launcher tells the coordinator the worker ended, and the spare waiting
// beside the forming job takes its place in the first generation, entering
// with its initial model as the others do. Before, the job waited its join
// timeout and failed ("only 2 of 3 workers joined ... (missing: rank 1)").
TEST_F(ElasticClusterTest, AWarmSpareTakesThePlaceOfAWorkerLostBeforeTheJobFormed) {
  ScratchDir dir;
  auto r = RunWithWorker1LostBeforeTheJobForms(dir, "early", 1);
  ASSERT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("generation 1: 3 workers (ranks 0, 2, 3): all 3 workers joined "
                                          "(spare 3 in place of rank 1, lost before the job formed)"))
      << r.err;
  EXPECT_NE(std::string::npos, r.err.find("spare 1: spare -> active (member 3 of generation 1)")) << r.err;
  auto summary = nlohmann::json::parse(ReadText(dir / "run/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(1, summary["spares"].value("admitted", 0)) << summary["spares"].dump();
  EXPECT_EQ(2, summary["spares"].value("started", 0)) << summary["spares"].dump();
  // The report says what the kill cost: nothing re-formed, the job formed without it.
  ASSERT_FALSE(summary["faults"].empty()) << summary.dump();
  EXPECT_EQ("the job formed without it as generation 1 of 3 workers (all 3 workers joined (spare 3 in place of rank 1, "
            "lost before the job formed))",
            summary["faults"][0].value("reaction", ""))
      << summary["faults"].dump();
  ExpectOneGenerationOfTrainedBitIdentical(dir, {0, 2, 3}, "spare-1.log");
}

// The same loss without spares: an elastic job does not wait for a member
// that is gone. Once workers 0 and 2 are there the job starts with them
// (min_workers 2) and trains to its end. Before, it waited its join
// timeout and failed.
TEST_F(ElasticClusterTest, WithoutSparesAnElasticJobStartsShortOfAWorkerLostBeforeItFormed) {
  ScratchDir dir;
  auto r = RunWithWorker1LostBeforeTheJobForms(dir, "short", 0);
  ASSERT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("generation 1: 2 workers (ranks 0, 2): 2 of 3 workers joined (rank 1 lost "
                                          "before the job formed; no spare to take its place)"))
      << r.err;
  ExpectOneGenerationOfTrainedBitIdentical(dir, {0, 2}, "");
}

// The coordinator SIGKILLed after the launcher told it of worker 1's
// loss, and restarted on its state file, all before the job formed (the
// workers are still loading libtorch at 0.4 s): the restarted coordinator
// must learn the lost place again, or it waits its join timeout for rank
// 1 and fails the job ("only 2 of 3 workers joined within 30 s (missing:
// rank 1)"), as it did before the launcher told it again.
TEST_F(ElasticClusterTest, ACoordinatorRestartedBeforeTheJobFormsLearnsAgainOfAWorkerLostBeforeIt) {
  ScratchDir dir;
  auto r = RunWithWorker1LostBeforeTheJobForms(dir, "restarted", 1,
                                               "[[faults]]\naction = \"kill\"\ncoordinator = true\nat_seconds = 0.4\n"
                                               "[[faults]]\naction = \"restart\"\ncoordinator = true\n"
                                               "at_seconds = 0.4\ndelay_seconds = 0.3\n");
  ASSERT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("fault: restarted the coordinator")) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("generation 1: 3 workers (ranks 0, 2, 3): all 3 workers joined "
                                          "(spare 3 in place of rank 1, lost before the job formed)"))
      << r.err;
  ExpectOneGenerationOfTrainedBitIdentical(dir, {0, 2, 3}, "spare-1.log");
}

// A replacement started as the job ends finds no job to join (it may still
// be loading its data, waiting to be admitted, or knocking at a coordinator
// that has exited). The launcher stops it (SIGTERM once the job is done,
// SIGKILL after a short grace) and the job ends well: exit 0, the
// trained steps, and the joiner's log saying it stopped on the signal
// rather than dying at its join deadline.
TEST_F(ElasticClusterTest, AReplacementStartedAsTheJobEndsIsStoppedAndTheJobEndsWell) {
  ScratchDir dir;
  auto r = RunKillAndRestartPlan(dir, "late", 300, 50, 299);
  ASSERT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("fault: started joiner 1")) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("joiner 1: rejoining -> left (not needed: the job is done)")) << r.err;
  auto summary = nlohmann::json::parse(ReadText(dir / "run/summary.json"));
  EXPECT_EQ(300, summary.value("steps", 0));
  EXPECT_EQ(2, summary.value("workers", 0));
  const std::string joiner = ReadText(dir / "run/logs/joiner-1.log");
  // It heeded the launcher's SIGTERM: stopped while it started (an empty
  // log: the signal's default action), loaded its data or waited to be
  // admitted; before, it kept knocking until SIGKILL or its join deadline.
  EXPECT_TRUE(joiner.empty() || joiner.find("stopped by signal 15") != std::string::npos) << joiner;
  EXPECT_EQ(std::string::npos, joiner.find("join deadline")) << joiner;
}

}  // namespace
}  // namespace tenax::testing

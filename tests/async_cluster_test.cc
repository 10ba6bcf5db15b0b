// Asynchronous training (mode "async") with real processes on loopback:
// `tenax run` starts a coordinator, parameter-server shards and workers;
// faults are real signals (the job's fault plan, or the test's own). The
// checks read the coordinator's merge log (its SQLite state file, through
// coord::WorkQueue) as well as summary.json: every unit must be merged
// exactly once by every shard.
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "tenax/coord/work_queue.h"
#include "testing.h"

namespace tenax::testing {
namespace {

struct AsyncJob {
  std::string name;
  int workers = 2;
  int servers = 2;
  int64_t max_steps = 300;
  int64_t unit_steps = 15;
  double lease_seconds = 10;
  std::string rule = "vc_asgd";
  std::string extra = "";       // appended as is (fault plans)
  std::string async_keys = "";  // more [async] lines
  std::string model = "mlp";
  int64_t batch_size = 32;
  int64_t test_limit = 1000;
};

std::string WriteAsyncJob(const ScratchDir& dir, const AsyncJob& j) {
  const std::string path = dir / (j.name + ".toml");
  std::ofstream out(path);
  out << "mode = \"async\"\n"
      << "[cluster]\nworkers = " << j.workers << "\njob_id = \"" << j.name << "\"\npeer_timeout_seconds = 4\n"
      << "join_timeout_seconds = 60\nstep_timeout_seconds = 20\n"
      << "[async]\nservers = " << j.servers << "\nunit_steps = " << j.unit_steps
      << "\nlease_seconds = " << j.lease_seconds << "\nrule = \"" << j.rule << "\"\ncheckpoint_every = 4\n"
      << j.async_keys
      << "[data]\ntrain_limit = 8192\ntest_limit = " << j.test_limit << "\n"
      << "[model]\nname = \"" << j.model << "\"\n"
      << "[train]\nepochs = 1000\nmax_steps = " << j.max_steps << "\nbatch_size = " << j.batch_size
      << "\nthreads = 1\nlr = 0.05\n"
      << "momentum = 0.9\n"
      << "[log]\nevery_steps = 50\n"
      << j.extra;
  return path;
}

// The merge log of a finished job: for every (unit, shard), the attempts
// merged and not rolled back by a shard restart ("reopened").
struct MergeLog {
  std::map<std::pair<int64_t, int>, std::vector<int64_t>> merged;
  std::vector<std::pair<int64_t, int>> required;  // WorkQueue::RequiredMerges
  std::vector<coord::UnitEvent> events;
  coord::WorkQueueCounts counts;
  int64_t Count(const std::string& what) const {
    int64_t n = 0;
    for (const auto& e : events) n += e.what == what;
    return n;
  }
};

::testing::AssertionResult ReadMergeLog(const std::string& db, const AsyncJob& j, MergeLog& log) {
  coord::WorkQueueOptions o;
  o.total_steps = j.max_steps;
  o.unit_steps = j.unit_steps;
  o.shards = j.servers;
  o.lease_ms = static_cast<int64_t>(j.lease_seconds * 1000);
  auto q = coord::WorkQueue::Open(db, o);
  if (!q.ok()) return ::testing::AssertionFailure() << q.status().ToString();
  auto events = (*q)->Events();
  if (!events.ok()) return ::testing::AssertionFailure() << events.status().ToString();
  auto counts = (*q)->Counts();
  if (!counts.ok()) return ::testing::AssertionFailure() << counts.status().ToString();
  auto required = (*q)->RequiredMerges();
  if (!required.ok()) return ::testing::AssertionFailure() << required.status().ToString();
  log.events = *events;
  log.counts = *counts;
  log.required = *required;
  for (const auto& e : log.events) {
    if (e.what == "merged") log.merged[{e.unit, e.shard}].push_back(e.attempt);
    if (e.what == "reopened") log.merged[{e.unit, e.shard}].clear();
  }
  return ::testing::AssertionSuccess();
}

// Every unit of the final queue merged exactly once by every shard that
// needs it (all of them, but for the remainder of a partial result on a
// unit re-opened for one shard), and by no other.
void ExpectEveryUnitMergedOnce(const MergeLog& log, int shards) {
  ASSERT_GT(log.counts.units, 0);
  ASSERT_GE(log.required.size(), static_cast<size_t>(log.counts.units));
  auto merged = log.merged;
  for (const auto& [u, s] : log.required) {
    ASSERT_LT(s, shards);
    auto it = merged.find({u, s});
    ASSERT_TRUE(it != merged.end()) << "unit " << u << " never merged by shard " << s;
    EXPECT_EQ(1u, it->second.size()) << "unit " << u << " merged " << it->second.size() << " times by shard " << s;
    merged.erase(it);
  }
  for (const auto& [key, attempts] : merged) {
    EXPECT_TRUE(attempts.empty()) << "unit " << key.first << " merged by shard " << key.second << ", which never needed it";
  }
  EXPECT_EQ(log.counts.units, log.counts.merged_everywhere);
}

// Units re-opened for re-merging (after a shard restart) only for `shard`.
void ExpectOnlyShardReopened(const MergeLog& log, int shard) {
  for (const auto& e : log.events) {
    if (e.what == "reopened") {
      EXPECT_EQ(shard, e.shard) << e.detail;
    }
  }
}

// `tenax run` of the job, its run directory dir/run.
ProcessResult RunAsyncJob(const ScratchDir& dir, const AsyncJob& j) {
  return RunProcess({TenaxBinary(), "run", WriteAsyncJob(dir, j), "--out", dir / "run"});
}

nlohmann::json Summary(const ScratchDir& dir) {
  auto j = nlohmann::json::parse(ReadText(dir / "run/summary.json"), nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

class AsyncClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("TENAX_SECRET", "async-test-secret-0123456789", 1); }
};

TEST_F(AsyncClusterTest, TwoShardsMergeEveryUnitExactlyOnceAndTheModelLearns) {
  ScratchDir dir;
  AsyncJob j{.name = "plain"};
  auto r = RunAsyncJob(dir, j);
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  // The launcher shows the job's front as progress lines (non-interactive
  // stderr): "epoch E/100 step S/256" (8192 samples / batch 32), one per
  // log.every_steps (50) crossed, never going back, the last at step 300.
  std::vector<int64_t> shown;  // global steps of the progress lines
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);) {
    const size_t at = line.find("[run] epoch ");
    if (at == std::string::npos) continue;
    long long epoch = 0, epochs = 0, step = 0, per_epoch = 0;
    ASSERT_EQ(4, std::sscanf(line.c_str() + at, "[run] epoch %lld/%lld step %lld/%lld", &epoch, &epochs, &step,
                             &per_epoch))
        << line;
    EXPECT_EQ(256, per_epoch) << line;
    shown.push_back((epoch - 1) * per_epoch + step);
  }
  ASSERT_GE(shown.size(), 4u) << r.err;
  EXPECT_TRUE(std::is_sorted(shown.begin(), shown.end())) << r.err;
  EXPECT_EQ(300, shown.back()) << r.err;
  auto summary = Summary(dir);
  EXPECT_EQ("async", summary.value("mode", ""));
  EXPECT_EQ(300, summary.value("steps", 0));
  EXPECT_EQ(20, summary.value("units", 0));  // 300 steps / 15
  EXPECT_GE(summary.value("units_issued", 0), 20);
  EXPECT_EQ(0, summary.value("results_rejected", -1));
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.6) << summary.dump();
  EXPECT_TRUE(std::filesystem::exists(dir / "run/model.pt"));
  MergeLog log;
  ASSERT_TRUE(ReadMergeLog(dir / "run/coordinator.db", j, log));
  ExpectEveryUnitMergedOnce(log, 2);
  EXPECT_EQ(20, log.counts.units);
  // Each shard wrote checkpoints (every 4 merges and at the end).
  for (const char* shard : {"server-0", "server-1"}) {
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir / (std::string("run/") + shard))) {
      files += e.path().extension() == ".ckpt";
    }
    EXPECT_GE(files, 1) << shard;
  }
}

// async.average_tail = 0.5: the finisher evaluates, and saves, each shard's
// mean of its model after every merge of a unit that starts in the second
// half of the job (steps 50, 60, 70, 80 and 90 of 100: five merges on each
// shard), whichever of the two workers trained them and whichever
// finishes; with 0 it evaluates the final model alone.
TEST_F(AsyncClusterTest, TailAveragingEvaluatesTheShardsMeanOverEveryMergeOfTheJobsTail) {
  ScratchDir dir;
  AsyncJob j{.name = "tail", .workers = 2, .max_steps = 100, .unit_steps = 10};
  j.async_keys = "average_tail = 0.5\n";
  auto r = RunAsyncJob(dir, j);
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  auto summary = Summary(dir);
  EXPECT_EQ(100, summary.value("steps", 0));
  EXPECT_EQ(nlohmann::json::array({5, 5}), summary["tail_merges_averaged"]) << summary.dump();
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.5) << summary.dump();
  EXPECT_TRUE(std::filesystem::exists(dir / "run/model.pt"));

  ScratchDir plain_dir;
  AsyncJob plain{.name = "no-tail", .workers = 1, .max_steps = 100, .unit_steps = 10};
  plain.async_keys = "average_tail = 0\n";
  auto p = RunAsyncJob(plain_dir, plain);
  ASSERT_EQ(0, p.exit_code) << p.out << p.err;
  EXPECT_FALSE(Summary(plain_dir).contains("tail_merges_averaged")) << Summary(plain_dir).dump();
}

// The pid of the worker an "issued" event names: "to worker 3
// (127.0.0.1/12345) for shard(s) 0,1" (the coordinator's member label).
int64_t PidOfIssued(const std::string& detail) {
  static const std::regex re("/([0-9]+)\\) for shard");
  std::smatch m;
  return std::regex_search(detail, m, re) ? std::stoll(m[1]) : -1;
}

TEST_F(AsyncClusterTest, TenRandomWorkerKillsStillMergeEveryUnitOnceAndTheRunCompletes) {
  ScratchDir dir;
  // The kills come on a clock, the job's end with its steps. The schedule
  // (seed 10423, mean lifetime 3 s, 3 workers, a replacement 0.3 s after
  // each kill; the same seed gives the same schedule, docs/config.md): 10
  // kills between 6.3 s and 16.1 s after the launcher started the workers.
  // Six of them hit workers that had run for 5.9 s or more, well past their
  // start-up (about 3.5 s here on a loaded machine), so in the middle of
  // their units: those leases must expire and their units be issued again.
  // The job: 40000 steps. A clock cannot be ordered against steps by
  // construction, so the job must outlast the schedule on the fastest
  // machine we meet: on an unloaded AMD EPYC 2-core machine 15000 steps
  // ended at 12.3 s, before the last 4 kills (2026-11-27); 40000 end at
  // about 20 s there, and take about 130 s on a loaded older one. The
  // check of the kills below names any fault not fired.
  AsyncJob j{.name = "chaos", .workers = 3, .max_steps = 40000, .unit_steps = 40, .lease_seconds = 3};
  j.extra =
      "[faults.random]\nmean_lifetime_seconds = 3.0\nseed = 10423\naction = \"kill\"\n"
      "restart_delay_seconds = 0.3\nmax_faults = 10\n";
  auto r = RunAsyncJob(dir, j);
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  auto summary = Summary(dir);
  int kills = 0;
  std::set<int64_t> killed;  // pids
  for (const auto& f : summary.value("faults", nlohmann::json::array())) {
    if (f.value("event", "") == "fault" && f.value("action", "") == "kill") {
      ++kills;
      killed.insert(f.value("pid", int64_t{-1}));
    }
  }
  std::string not_fired;
  {
    std::ifstream metrics(dir / "run/metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      if (line.find("\"fault_not_fired\"") != std::string::npos) not_fired += line + "\n";
    }
  }
  EXPECT_EQ(10, kills) << "faults not fired:\n" << not_fired << summary.dump();
  EXPECT_EQ(10u, killed.size()) << summary.dump();
  EXPECT_EQ(10, summary.value("preemptions", 0));
  EXPECT_EQ(40000, summary.value("steps", 0));
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.6) << summary.dump();
  MergeLog log;
  ASSERT_TRUE(ReadMergeLog(dir / "run/coordinator.db", j, log));
  ExpectEveryUnitMergedOnce(log, 2);
  // A killed worker's lease expired and its unit was issued again (a kill
  // may also hit a worker still starting, before it held a lease).
  // (A slow worker's late result of an expired lease may also be accepted.)
  std::set<std::pair<int64_t, int64_t>> issued, accepted;
  for (const auto& e : log.events) {
    if (e.what == "issued") issued.insert({e.unit, e.attempt});
    if (e.what == "accepted") accepted.insert({e.unit, e.attempt});
  }
  for (const auto& e : log.events) {
    if (e.what == "expired") {
      EXPECT_TRUE(issued.count({e.unit, e.attempt + 1}) || accepted.count({e.unit, e.attempt}))
          << "unit " << e.unit << " attempt " << e.attempt << " expired and was neither re-issued nor accepted";
    }
  }
  // The leases the kills cut short: attempts issued to a worker that was
  // then killed and never delivered (no shard checked them, nobody released
  // them). Each one makes an expiry and a re-issue certain: its lease ends
  // expired (or cancelled, if an earlier expired copy's late result won),
  // and its unit, merged once, was merged from another attempt, so one of
  // the two was a re-issue.
  std::set<std::pair<int64_t, int64_t>> cut;
  for (const auto& e : log.events) {
    if (e.what == "issued" && killed.count(PidOfIssued(e.detail))) cut.insert({e.unit, e.attempt});
  }
  for (const auto& e : log.events) {
    if (e.what == "checked" || e.what == "released") cut.erase({e.unit, e.attempt});
  }
  ASSERT_FALSE(cut.empty()) << "none of the 10 kills hit a worker in the middle of a unit, so this run tested no "
                               "lease expiry (six of them come after 5.9 s or more of a worker's life)";
  std::map<int64_t, int64_t> accepted_attempt;  // unit -> the attempt accepted
  for (const auto& e : log.events) {
    if (e.what == "accepted") accepted_attempt[e.unit] = e.attempt;
  }
  for (const auto& [unit, attempt] : cut) {
    const bool ended = std::any_of(log.events.begin(), log.events.end(), [&](const coord::UnitEvent& e) {
      return e.unit == unit && e.attempt == attempt && (e.what == "expired" || e.what == "cancelled");
    });
    EXPECT_TRUE(ended) << "unit " << unit << " attempt " << attempt << ": its worker was killed holding it, and its "
                       << "lease never expired";
    ASSERT_TRUE(accepted_attempt.count(unit)) << "unit " << unit << " never accepted";
    EXPECT_NE(attempt, accepted_attempt[unit]) << "unit " << unit << ": accepted from the attempt whose worker died";
  }
  EXPECT_GT(log.counts.leases_expired, 0);
  EXPECT_GT(log.counts.units_reissued, 0);
  EXPECT_EQ(log.counts.leases_expired, summary.value("leases_expired", -1));
  EXPECT_EQ(log.counts.units_reissued, summary.value("units_reissued", -1));
  // The live view said so as it happened: its last re-issue line counts them all.
  const std::string all = " re-issued in all";
  const auto at = r.err.rfind(all);
  ASSERT_NE(at, std::string::npos) << r.err;
  const auto start = r.err.rfind(' ', at - 1) + 1;
  EXPECT_EQ(std::to_string(log.counts.units_reissued), r.err.substr(start, at - start)) << r.err;
}

TEST_F(AsyncClusterTest, APreemptionNoticeReturnsThePartialResultAndOnlyTheRestIsRerun) {
  ScratchDir dir;
  // The notice must land inside a unit of worker 0's, by construction: one
  // worker, units of 200 steps of the cnn at batch 128 ([0, 200) and
  // [200, 400)), and the notice at step 100, which only worker 0 can
  // report, 100 steps (seconds, and more on a loaded machine, where steps
  // slow down too) before its unit ends; the launcher sees steps every
  // 250 ms at most. A joiner started at the same step ("restart") runs what
  // is left. (With two workers and the notice at the other's step 300,
  // worker 0 could have finished its unit first when it started 100 steps
  // earlier than the other: it did under a heavily loaded full run.)
  // A unit here lasts about 5 s, longer than the job's peer timeout (4 s):
  // the worker must drive its node during the unit, or the shards declare
  // it lost and every delivery of the unit fails (it did, before the async
  // exchange drove its node at each step boundary).
  AsyncJob j{.name = "notice", .workers = 1, .max_steps = 400, .unit_steps = 200, .lease_seconds = 30,
             .model = "cnn", .batch_size = 128};
  j.extra =
      "[[faults]]\naction = \"preempt\"\nworker = 0\nat_step = 100\ngrace_seconds = 20\n"
      "[[faults]]\naction = \"restart\"\nat_step = 100\n";
  auto r = RunAsyncJob(dir, j);
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  const std::string log0 = ReadText(dir / "run/logs/worker-0.log");
  EXPECT_NE(std::string::npos, log0.find("as a partial result")) << log0;
  MergeLog log;
  ASSERT_TRUE(ReadMergeLog(dir / "run/coordinator.db", j, log));
  ExpectEveryUnitMergedOnce(log, 2);
  // The partial result was accepted for its steps and the rest became a new
  // unit: one more unit than 400 / 200, and no lease had to expire.
  EXPECT_EQ(1, log.counts.partial_results);
  EXPECT_EQ(3, log.counts.units);
  EXPECT_EQ(1, log.Count("split"));
  EXPECT_EQ(0, log.counts.leases_expired);
  EXPECT_EQ(400, Summary(dir).value("steps", 0));
}

TEST_F(AsyncClusterTest, APoisonedResultIsRejectedAndTheUnitIsMergedOnceFromItsNextAttempt) {
  ScratchDir dir;
  AsyncJob j{.name = "poison", .max_steps = 200, .unit_steps = 20};
  setenv("TENAX_TEST_POISON_UNIT", "3", 1);  // the first copy of unit 3 carries a NaN
  auto r = RunAsyncJob(dir, j);
  unsetenv("TENAX_TEST_POISON_UNIT");
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  MergeLog log;
  ASSERT_TRUE(ReadMergeLog(dir / "run/coordinator.db", j, log));
  ExpectEveryUnitMergedOnce(log, 2);
  EXPECT_EQ(1, log.counts.results_rejected);
  // Neither shard merged the poisoned attempt 1 of unit 3.
  for (int s = 0; s < 2; ++s) {
    const auto merged = log.merged[std::make_pair(int64_t{3}, s)];
    EXPECT_EQ(std::vector<int64_t>{2}, merged) << "shard " << s;
  }
  auto summary = Summary(dir);
  EXPECT_EQ(1, summary.value("results_rejected", 0));
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.6) << summary.dump();
}

// Polls (with a deadline) until `dir` holds at least `n` checkpoint files.
bool WaitForCheckpoints(const std::string& dir, int n, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    int files = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) files += e.path().extension() == ".ckpt";
    if (files >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling files another process writes, with a deadline
  }
  return false;
}

// An async job's roles started one by one (no launcher), so that a test
// holds every PID: the coordinator at construction (ok() once it listens),
// then shards and workers on demand, each a Child the caller owns.
class AsyncRoles {
 public:
  AsyncRoles(const ScratchDir& dir, std::string job)
      : dir_(dir),
        job_(std::move(job)),
        coordinator_({TenaxBinary(), "coordinator", "--job", job_, "--state", dir / "state.db", "--port-file",
                      dir / "port"}) {
    if (coordinator_.WaitForStderrLine("listening on")) {
      const std::string port = ReadText(dir_ / "port");
      address_ = "127.0.0.1:" + port.substr(0, port.find('\n'));
    }
  }
  bool ok() const { return !address_.empty(); }
  Child& coordinator() { return coordinator_; }
  // Shard `s` on its checkpoint directory dir/server-<s> (a restarted
  // shard continues from what it holds).
  std::unique_ptr<Child> Server(int s) const {
    return std::make_unique<Child>(std::vector<std::string>{TenaxBinary(), "server", "--job", job_, "--shard",
                                                            std::to_string(s), "--checkpoints",
                                                            dir_ / ("server-" + std::to_string(s)), "--coordinator",
                                                            address_});
  }
  // A worker writing its outputs to dir/run.
  std::unique_ptr<Child> Worker() const {
    return std::make_unique<Child>(std::vector<std::string>{TenaxBinary(), "worker", "--job", job_, "--coordinator",
                                                            address_, "--out", dir_ / "run"});
  }

 private:
  const ScratchDir& dir_;
  std::string job_;
  Child coordinator_;
  std::string address_;
};

// Starts shard 1 again on its directory (its first process is gone) and
// waits for the job to end: every worker, the coordinator, shard 0 and the
// new shard 1 exit 0. Returns the new shard 1, or null (a failure added)
// when it did not continue from a checkpoint.
std::unique_ptr<Child> RestartShard1AndFinish(AsyncRoles& roles, Child& s0,
                                             std::vector<std::unique_ptr<Child>>& workers) {
  auto restarted = roles.Server(1);
  if (!restarted->WaitForStderrLine("continuing from")) {
    ADD_FAILURE() << "shard 1 did not continue from its checkpoint:\n" << restarted->stderr_text();
    return nullptr;
  }
  for (auto& w : workers) EXPECT_EQ(0, w->Wait()) << w->stderr_text();
  EXPECT_EQ(0, roles.coordinator().Wait()) << roles.coordinator().stderr_text();
  EXPECT_EQ(0, s0.Wait()) << s0.stderr_text();
  EXPECT_EQ(0, restarted->Wait()) << restarted->stderr_text();
  return restarted;
}

// The roles started one by one, so the test holds the server's PID: SIGKILL shard 1 once it has checkpointed, start it again on its
// directory, and the job still merges every unit exactly once per shard.
TEST_F(AsyncClusterTest, ASigkilledServerRestartedOnItsDirectoryContinuesFromItsCheckpoint) {
  ScratchDir dir;
  AsyncJob j{.name = "server-kill", .max_steps = 400, .unit_steps = 10};
  AsyncRoles roles(dir, WriteAsyncJob(dir, j));
  ASSERT_TRUE(roles.ok()) << roles.coordinator().stderr_text();
  auto s0 = roles.Server(0), s1 = roles.Server(1);
  ASSERT_TRUE(s1->WaitForStderrLine("registered with the coordinator")) << s1->stderr_text();
  std::vector<std::unique_ptr<Child>> workers;
  for (int w = 0; w < 2; ++w) workers.push_back(roles.Worker());
  ASSERT_TRUE(WaitForCheckpoints(dir / "server-1", 2, std::chrono::seconds(120))) << s1->stderr_text();
  s1->Signal(SIGKILL);
  EXPECT_EQ(128 + SIGKILL, s1->Wait());
  auto restarted = RestartShard1AndFinish(roles, *s0, workers);
  ASSERT_TRUE(restarted);
  MergeLog log;
  ASSERT_TRUE(ReadMergeLog(dir / "state.db", j, log));
  ExpectEveryUnitMergedOnce(log, 2);
  // Only shard 1 re-merged what its checkpoint had lost.
  ExpectOnlyShardReopened(log, 1);
  // A worker whose result could not reach shard 1 (dead, or not yet back)
  // gave its unit back at once rather than wait out the lease, idle: the
  // units were issued again on release, none on expiry.
  EXPECT_GE(log.Count("released"), 1) << "no worker met the dead shard";
  EXPECT_EQ(0, log.Count("expired")) << "a worker held a unit it could not deliver until its lease expired";
  auto summary = nlohmann::json::parse(ReadText(dir / "run/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(400, summary.value("steps", 0));
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.6) << summary.dump();
}

// Shard 1 SIGKILLed right after writing its checkpoint of 36 merges (the
// TENAX_TEST_SIGKILL_AFTER_CHECKPOINT seam), inside the job's tail, and
// restarted on its directory. Two things must hold:
// - no unit is merged into the model twice. Before the fix, the checkpoint
//   was written before the merge's report was sent: the coordinator still
//   had the 36th merge's unit "accepted", re-opened it for the restarted
//   shard, and it was merged again into a model that already held it (the
//   coordinator's log showed it once). Seen here as 31 tail merges on
//   shard 1;
// - tail averaging goes on from the sums the checkpoint held: each shard's
//   average covers exactly the 30 units that start in the tail (steps
//   300-590 of 600), not fewer (sums lost with the process).
TEST_F(AsyncClusterTest, AShardKilledRightAfterACheckpointMergesNoUnitTwiceAndKeepsItsTailAverage) {
  ScratchDir dir;
  AsyncJob j{.name = "tail-restart", .max_steps = 600, .unit_steps = 10};
  j.async_keys = "average_tail = 0.5\n";
  AsyncRoles roles(dir, WriteAsyncJob(dir, j));
  ASSERT_TRUE(roles.ok()) << roles.coordinator().stderr_text();
  auto s0 = roles.Server(0);
  setenv("TENAX_TEST_SIGKILL_AFTER_CHECKPOINT", "36", 1);
  auto s1 = roles.Server(1);
  unsetenv("TENAX_TEST_SIGKILL_AFTER_CHECKPOINT");
  ASSERT_TRUE(s1->WaitForStderrLine("registered with the coordinator")) << s1->stderr_text();
  std::vector<std::unique_ptr<Child>> workers;
  for (int w = 0; w < 2; ++w) workers.push_back(roles.Worker());
  EXPECT_EQ(128 + SIGKILL, s1->Wait()) << s1->stderr_text();
  auto restarted = RestartShard1AndFinish(roles, *s0, workers);
  ASSERT_TRUE(restarted);
  EXPECT_NE(std::string::npos, restarted->stderr_text().find("36 merges)")) << restarted->stderr_text();
  MergeLog log;
  ASSERT_TRUE(ReadMergeLog(dir / "state.db", j, log));
  ExpectEveryUnitMergedOnce(log, 2);
  auto summary = nlohmann::json::parse(ReadText(dir / "run/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(600, summary.value("steps", 0));
  EXPECT_EQ(nlohmann::json::array({30, 30}), summary["tail_merges_averaged"])
      << summary.dump() << "\nrestarted shard 1:\n" << restarted->stderr_text();
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.6) << summary.dump();
}

// The finisher (the worker that evaluates the final model and writes the
// job's outputs) SIGKILLed while it evaluates: the next worker to ask
// finishes the job instead. Found by the soak: the finisher of an async
// round was killed by its random faults as the job ended, the others had
// been told "done" and left, and `tenax run` found no summary.json (exit 1).
TEST_F(AsyncClusterTest, AFinisherKilledWhileItEvaluatesIsReplacedByTheNextWorker) {
  ScratchDir dir;
  AsyncJob j{.name = "finisher-kill", .workers = 1, .max_steps = 100, .unit_steps = 10, .model = "cnn"};
  j.test_limit = 10000;  // the whole test set: an evaluation of a good fraction of a second
  AsyncRoles roles(dir, WriteAsyncJob(dir, j));
  ASSERT_TRUE(roles.ok()) << roles.coordinator().stderr_text();
  std::vector<std::unique_ptr<Child>> servers;
  for (int s = 0; s < 2; ++s) servers.push_back(roles.Server(s));
  ASSERT_TRUE(servers[1]->WaitForStderrLine("registered with the coordinator")) << servers[1]->stderr_text();
  // The only worker trains every unit, so it is the one that finishes.
  auto first = roles.Worker();
  ASSERT_TRUE(first->WaitForStderrLine("this worker finishes the job")) << first->stderr_text();
  first->Signal(SIGKILL);
  EXPECT_EQ(128 + SIGKILL, first->Wait());
  ASSERT_FALSE(std::filesystem::exists(dir / "run/summary.json")) << "killed too late: the finisher had written it";
  auto second = roles.Worker();
  EXPECT_EQ(0, second->Wait()) << second->stderr_text();
  EXPECT_NE(std::string::npos, second->stderr_text().find("this worker finishes the job")) << second->stderr_text();
  EXPECT_EQ(0, roles.coordinator().Wait()) << roles.coordinator().stderr_text();
  for (auto& s : servers) EXPECT_EQ(0, s->Wait()) << s->stderr_text();
  ASSERT_TRUE(std::filesystem::exists(dir / "run/summary.json")) << "no summary.json: nobody finished the job";
  auto summary = nlohmann::json::parse(ReadText(dir / "run/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(100, summary.value("steps", 0));
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.5) << summary.dump();
  MergeLog log;
  ASSERT_TRUE(ReadMergeLog(dir / "state.db", j, log));
  ExpectEveryUnitMergedOnce(log, 2);
}

// The same through the job's fault plan: `tenax run` SIGKILLs shard 1
// mid-run and starts it again on its checkpoint directory 1 s later.
TEST_F(AsyncClusterTest, TheFaultPlanKillsAndRestartsAServerAndEveryUnitIsStillMergedOnce) {
  ScratchDir dir;
  AsyncJob j{.name = "plan-server", .max_steps = 400, .unit_steps = 10};
  j.extra =
      "[[faults]]\naction = \"kill\"\nserver = 1\nat_step = 150\n"
      "[[faults]]\naction = \"restart\"\nserver = 1\nat_step = 150\ndelay_seconds = 1\n";
  auto r = RunAsyncJob(dir, j);
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  auto summary = Summary(dir);
  const auto faults = summary.value("faults", nlohmann::json::array());
  ASSERT_EQ(2u, faults.size()) << summary.dump();
  EXPECT_EQ("kill", faults[0].value("action", ""));
  EXPECT_EQ(1, faults[0].value("server", -1));
  EXPECT_EQ("restart", faults[1].value("action", ""));
  EXPECT_EQ(1, faults[1].value("server", -1));
  EXPECT_NE(faults[0].value("pid", 0), faults[1].value("pid", 0));
  EXPECT_EQ(400, summary.value("steps", 0));
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.6) << summary.dump();
  const std::string restarted = ReadText(dir / "run/logs/server-1-1.log");
  EXPECT_NE(std::string::npos, restarted.find("continuing from")) << restarted;
  MergeLog log;
  ASSERT_TRUE(ReadMergeLog(dir / "run/coordinator.db", j, log));
  ExpectEveryUnitMergedOnce(log, 2);
  ExpectOnlyShardReopened(log, 1);
}

// The coordinator SIGKILLed mid-run by the plan and started again on its
// state file 1 s later: the work queue is in that file, the workers and
// shards reconnect, and every unit is still merged exactly once.
TEST_F(AsyncClusterTest, TheFaultPlanKillsAndRestartsTheCoordinatorAndEveryUnitIsStillMergedOnce) {
  ScratchDir dir;
  AsyncJob j{.name = "plan-coordinator", .max_steps = 400, .unit_steps = 10};
  j.extra =
      "[[faults]]\naction = \"kill\"\ncoordinator = true\nat_step = 150\n"
      "[[faults]]\naction = \"restart\"\ncoordinator = true\nat_step = 150\ndelay_seconds = 1\n";
  auto r = RunAsyncJob(dir, j);
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  auto summary = Summary(dir);
  const auto faults = summary.value("faults", nlohmann::json::array());
  ASSERT_EQ(2u, faults.size()) << summary.dump();
  EXPECT_EQ(true, faults[0].value("coordinator", false));
  EXPECT_EQ("restart", faults[1].value("action", ""));
  EXPECT_EQ(400, summary.value("steps", 0));
  EXPECT_GT(summary.value("final_test_accuracy", 0.0), 0.6) << summary.dump();
  const std::string restarted = ReadText(dir / "run/logs/coordinator-1.log");
  EXPECT_NE(std::string::npos, restarted.find("resuming")) << restarted;
  MergeLog log;
  ASSERT_TRUE(ReadMergeLog(dir / "run/coordinator.db", j, log));
  ExpectEveryUnitMergedOnce(log, 2);
}

}  // namespace
}  // namespace tenax::testing

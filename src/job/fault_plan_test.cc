// The launcher's fault plan as ParseTrainConfig reads it: every refusal is
// one line naming the entry and the key; the random schedule is a pure
// function of its seed.
#include "tenax/job/fault_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "tenax/job/train_config.h"
#include "testing.h"

namespace tenax {
namespace {

Result<TrainConfig> Parse(const std::string& text, const std::vector<std::string>& sets = {}) {
  auto doc = ConfigDoc::Parse(text, "job.toml");
  if (!doc.ok()) return doc.status();
  for (const auto& s : sets) TENAX_RETURN_IF_ERROR(doc->Override(s));
  return ParseTrainConfig(*doc);
}

// Lines 1-6; faults start at line 7. 60000 samples / (4 workers x batch 10)
// = 1500 steps in one epoch.
std::string Job(bool elastic = true) {
  return std::string("mode = \"sync\"\n") +                    // 1
         "[cluster]\n" +                                       // 2
         "workers = 4\n" +                                     // 3
         "elastic = " + (elastic ? "true" : "false") + "\n" +  // 4
         "[train]\n" +                                         // 5
         "epochs = 1\nbatch_size = 10\n";                      // 6-7
}
// The first line after Job().
constexpr int kFirst = 8;

std::string Line(int n) { return "job.toml:" + std::to_string(n) + ": "; }

std::string Refusal(const std::string& text, const std::vector<std::string>& sets = {}) {
  auto c = Parse(text, sets);
  if (c.ok()) return "(accepted)";
  EXPECT_EQ(StatusCode::kInvalidArgument, c.status().code()) << c.status().ToString();
  return c.status().message();
}

TEST(FaultPlanTest, AValidPlanKeepsItsValues) {
  auto c = Parse(Job() +
                 "[[faults]]\n"  // 8
                 "action = \"kill\"\n"
                 "worker = 1\n"
                 "at_seconds = 10.5\n"
                 "[[faults]]\n"  // 12
                 "action = \"preempt\"\n"
                 "worker = 3\n"
                 "at_step = 300\n"
                 "grace_seconds = 2\n"
                 "[[faults]]\n"  // 17
                 "action = \"restart\"\n"
                 "at_step = 1500\n"
                 "delay_seconds = 0.25\n"
                 "[faults.random]\n"  // TOML puts it into faults[2]
                 "mean_lifetime_seconds = 60\n"
                 "seed = 7\n"
                 "action = \"stop\"\n"
                 "restart_delay_seconds = 5\n"
                 "max_faults = 3\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const FaultPlan& p = c->faults;
  ASSERT_EQ(3u, p.faults.size());
  EXPECT_EQ(0, p.faults[0].index);
  EXPECT_EQ(FaultAction::kKill, p.faults[0].action);
  EXPECT_EQ(1, p.faults[0].worker);
  EXPECT_EQ(std::optional<double>(10.5), p.faults[0].at_seconds);
  EXPECT_FALSE(p.faults[0].at_step.has_value());
  EXPECT_EQ(kDefaultGraceSeconds, p.faults[0].grace_seconds);
  EXPECT_EQ("kill worker 1 at 10.5 s", p.faults[0].Describe());
  EXPECT_EQ(FaultAction::kPreempt, p.faults[1].action);
  EXPECT_EQ(3, p.faults[1].worker);
  EXPECT_EQ(std::optional<int64_t>(300), p.faults[1].at_step);
  EXPECT_EQ(2.0, p.faults[1].grace_seconds);
  EXPECT_EQ(2, p.faults[2].index);
  EXPECT_EQ(FaultAction::kRestart, p.faults[2].action);
  EXPECT_EQ(-1, p.faults[2].worker);
  EXPECT_EQ(0.25, p.faults[2].delay_seconds);
  EXPECT_EQ("restart at step 1500 (+0.25 s)", p.faults[2].Describe());
  ASSERT_TRUE(p.random.has_value());
  EXPECT_EQ(60.0, p.random->mean_lifetime_seconds);
  EXPECT_EQ(7, p.random->seed);
  EXPECT_EQ(FaultAction::kStop, p.random->action);
  EXPECT_EQ(std::optional<double>(5.0), p.random->restart_delay_seconds);
  EXPECT_EQ(3, p.random->max_faults);
  EXPECT_FALSE(p.empty());
}

TEST(FaultPlanTest, NoPlanIsAnEmptyPlanAndARandomTableMayStandAlone) {
  auto none = Parse(Job());
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->faults.empty());

  auto alone = Parse(Job(false) + "[faults.random]\nmean_lifetime_seconds = 30\n");
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  ASSERT_TRUE(alone->faults.random.has_value());
  EXPECT_TRUE(alone->faults.faults.empty());
  EXPECT_EQ(30.0, alone->faults.random->mean_lifetime_seconds);
  EXPECT_EQ(1, alone->faults.random->seed);
  EXPECT_EQ(FaultAction::kKill, alone->faults.random->action);
  EXPECT_FALSE(alone->faults.random->restart_delay_seconds.has_value());
  EXPECT_EQ(1, alone->faults.random->max_faults);

  // --set reaches the random table too.
  auto set = Parse(Job(false) + "[faults.random]\nmean_lifetime_seconds = 30\n", {"faults.random.seed=9"});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(9, set->faults.random->seed);
}

TEST(FaultPlanTest, WithoutElasticOnlyKillPreemptAndStopAreAllowed) {
  // They are how a user checks that a non-elastic job fails cleanly.
  for (const char* action : {"kill", "preempt", "stop"}) {
    auto c = Parse(Job(false) + "[[faults]]\naction = \"" + action + "\"\nworker = 0\nat_seconds = 1\n");
    EXPECT_TRUE(c.ok()) << action << ": " << c.status().ToString();
  }
  const std::string why =
      " needs cluster.elastic = true (without it only kill, preempt and stop apply: they test that the job fails "
      "cleanly)";
  EXPECT_EQ(Line(kFirst) + "faults[0]: action \"restart\"" + why,
            Refusal(Job(false) + "[[faults]]\naction = \"restart\"\nat_seconds = 1\n"));
  EXPECT_EQ(Line(kFirst) + "faults[0]: action \"cont\"" + why,
            Refusal(Job(false) + "[[faults]]\naction = \"cont\"\nworker = 0\nat_seconds = 1\n"));
  EXPECT_EQ(Line(kFirst + 2) +
                "faults.random.restart_delay_seconds: needs cluster.elastic = true (a new worker joins a running "
                "elastic job)",
            Refusal(Job(false) + "[faults.random]\nmean_lifetime_seconds = 30\nrestart_delay_seconds = 1\n"));
}

TEST(FaultPlanTest, EveryRefusalNamesTheEntryAndTheKey) {
  const std::string kill = "[[faults]]\naction = \"kill\"\nworker = 0\nat_seconds = 1\n";  // 4 lines
  // An unknown worker, in the third entry.
  EXPECT_EQ(Line(kFirst + 11) + "faults[2].worker: 7 is not a worker (cluster.workers = 4)",
            Refusal(Job() + kill + kill + "[[faults]]\naction = \"stop\"\nat_step = 5\nworker = 7\n"));
  EXPECT_EQ(Line(kFirst + 2) + "faults[0].worker: -1 is not a worker (cluster.workers = 4)",
            Refusal(Job() + "[[faults]]\naction = \"kill\"\nworker = -1\nat_seconds = 1\n"));
  EXPECT_EQ(Line(kFirst) + "faults[0]: action \"preempt\" needs worker (0..3)",
            Refusal(Job() + "[[faults]]\naction = \"preempt\"\nat_seconds = 1\n"));
  EXPECT_EQ(Line(kFirst + 2) +
                "faults[0].worker: does not apply to action \"restart\" (the new worker gets its id from the "
                "coordinator)",
            Refusal(Job() + "[[faults]]\naction = \"restart\"\nworker = 1\nat_seconds = 1\n"));
  // Delays and times.
  EXPECT_EQ(Line(kFirst + 3) + "faults[0].delay_seconds: must be >= 0, got -1",
            Refusal(Job() + "[[faults]]\naction = \"restart\"\nat_seconds = 1\ndelay_seconds = -1\n"));
  EXPECT_EQ(Line(kFirst + 3) + "faults[0].at_seconds: must be >= 0, got -0.5",
            Refusal(Job() + "[[faults]]\naction = \"kill\"\nworker = 0\nat_seconds = -0.5\n"));
  EXPECT_EQ(Line(kFirst + 3) + "faults[0].at_seconds: 700000 is beyond 7 days (604800 s)",
            Refusal(Job() + "[[faults]]\naction = \"kill\"\nworker = 0\nat_seconds = 700000\n"));
  EXPECT_EQ(Line(kFirst + 3) + "faults[0].grace_seconds: must be >= 0, got -2",
            Refusal(Job() + "[[faults]]\naction = \"preempt\"\nworker = 0\ngrace_seconds = -2\nat_seconds = 1\n"));
  EXPECT_EQ(Line(kFirst + 3) + "faults[0].at_seconds: must be a number, got string",
            Refusal(Job() + "[[faults]]\naction = \"kill\"\nworker = 0\nat_seconds = \"soon\"\n"));
  EXPECT_EQ(Line(kFirst + 3) + "faults[0].at_step: must be >= 1, got 0",
            Refusal(Job() + "[[faults]]\naction = \"kill\"\nworker = 0\nat_step = 0\n"));
  // Triggers: exactly one.
  EXPECT_EQ(Line(kFirst) + "faults[0]: set exactly one of at_seconds and at_step",
            Refusal(Job() + "[[faults]]\naction = \"kill\"\nworker = 0\n"));
  EXPECT_EQ(Line(kFirst + 4) + "faults[1]: set exactly one of at_seconds and at_step",
            Refusal(Job() + kill + "[[faults]]\naction = \"kill\"\nworker = 0\nat_seconds = 1\nat_step = 2\n"));
  // Keys that belong to another action, unknown keys, unknown actions.
  EXPECT_EQ(Line(kFirst + 4) + "faults[0].grace_seconds: only applies to action \"preempt\"",
            Refusal(Job() + kill + "grace_seconds = 1\n"));
  EXPECT_EQ(Line(kFirst + 4) + "faults[0].delay_seconds: must be >= 0, got -2",
            Refusal(Job() + kill + "delay_seconds = -2\n"));
  EXPECT_EQ(Line(kFirst + 4) +
                "faults[0].at_secs: unknown key (expected one of action, worker, server, storage, wipe, coordinator, "
                "workers, hosts, host, seconds, factor, delay_ms, at_seconds, at_step, grace_seconds, delay_seconds)",
            Refusal(Job() + kill + "at_secs = 1\n"));
  EXPECT_EQ(Line(kFirst + 1) + "faults[0].action: must be one of kill, preempt, stop, cont, restart, drop_link, slow_link, partition, slow_host, got "
                "'explode'",
            Refusal(Job() + "[[faults]]\naction = \"explode\"\nworker = 0\nat_seconds = 1\n"));
  EXPECT_EQ(Line(kFirst) + "faults[0]: action is required (kill, preempt, stop, cont, restart, drop_link, slow_link, partition or slow_host)",
            Refusal(Job() + "[[faults]]\nworker = 0\nat_seconds = 1\n"));
  // Top-level values come before the first table.
  EXPECT_EQ(Line(1) + "faults: must be [[faults]] entries or a [faults.random] table, got integer",
            Refusal("faults = 3\n" + Job()));
  EXPECT_EQ(Line(1) + "faults[1]: must be a table (a [[faults]] entry)",
            Refusal("faults = [{action = \"kill\", worker = 0, at_seconds = 1}, 5]\n" + Job()));
}

TEST(FaultPlanTest, AStepBeyondTheJobIsRefused) {
  // 60000 samples / (4 x 10) = 1500 steps.
  const std::string fault = "[[faults]]\naction = \"kill\"\nworker = 0\n";
  EXPECT_EQ(Line(kFirst + 4) + "faults[1]: at_step 99999 is beyond the job's 1500 steps",
            Refusal(Job() + fault + "at_seconds = 1\n" + fault + "at_step = 99999\n"));
  EXPECT_TRUE(Parse(Job() + fault + "at_step = 1500\n").ok());
  EXPECT_EQ(Line(kFirst) + "faults[0]: at_step 1501 is beyond the job's 1500 steps",
            Refusal(Job() + fault + "at_step = 1501\n"));
  // train.max_steps and data.train_limit shorten the job; cluster.workers = 1 keeps a partial batch.
  EXPECT_EQ(Line(kFirst) + "faults[0]: at_step 41 is beyond the job's 40 steps",
            Refusal(Job() + fault + "at_step = 41\n", {"train.max_steps=40"}));
  EXPECT_EQ(Line(kFirst) + "faults[0]: at_step 26 is beyond the job's 25 steps",
            Refusal(Job() + fault + "at_step = 26\n", {"data.train_limit=1005"}));
  EXPECT_EQ(Line(kFirst) + "faults[0]: at_step 102 is beyond the job's 101 steps",
            Refusal(Job() + fault + "at_step = 102\n", {"data.train_limit=1005", "cluster.workers=1"}));
}

// An npy job's sample count comes from its labels file's header; data that
// cannot be read now skips the check (the job's own loading reports it).
TEST(FaultPlanTest, AnNpyJobsStepsComeFromItsLabelsHeader) {
  testing::ScratchDir dir;
  // A version 1.0 .npy of 100 uint8 labels; the header is padded to 64 bytes.
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (100,), }";
  header.resize(128 - 10 - 1, ' ');
  header += '\n';
  const std::string bytes =
      std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header + std::string(100, '\1');
  testing::WriteBytes(dir / "labels.npy", std::vector<uint8_t>(bytes.begin(), bytes.end()));

  auto job = [&](const std::string& labels) {
    return std::string("mode = \"sync\"\n[cluster]\nworkers = 2\n[data]\nformat = \"npy\"\n") +
           "train_images = \"x.npy\"\ntrain_labels = \"" + labels + "\"\ntest_images = \"x.npy\"\n" +
           "test_labels = \"y.npy\"\n[train]\nepochs = 3\nbatch_size = 10\n" +  // 100 / 20 = 5 steps x 3
           "[[faults]]\naction = \"kill\"\nworker = 0\n";                       // line 13
  };
  EXPECT_TRUE(Parse(job(dir / "labels.npy") + "at_step = 15\n").ok());
  EXPECT_EQ(Line(13) + "faults[0]: at_step 16 is beyond the job's 15 steps",
            Refusal(job(dir / "labels.npy") + "at_step = 16\n"));
  auto unreadable = Parse(job(dir / "missing.npy") + "at_step = 16\n");
  EXPECT_TRUE(unreadable.ok()) << unreadable.status().ToString();
}

TEST(FaultPlanTest, TheRandomTableIsCheckedLikeTheEntries) {
  const std::string random = "[faults.random]\n";  // line kFirst
  // After an entry, TOML puts the table into it; it is still the plan's.
  EXPECT_EQ(Line(kFirst + 4) +
                "faults.random: mean_lifetime_seconds is required (the mean of each worker's exponential lifetime)",
            Refusal(Job() + "[[faults]]\naction = \"kill\"\nworker = 0\nat_seconds = 1\n" + random + "seed = 1\n"));
  EXPECT_EQ(Line(kFirst + 1) + "faults.random.mean_lifetime_seconds: must be > 0, got 0",
            Refusal(Job() + random + "mean_lifetime_seconds = 0\n"));
  EXPECT_EQ(Line(kFirst + 2) + "faults.random.action: must be one of kill, preempt, stop, got 'cont'",
            Refusal(Job() + random + "mean_lifetime_seconds = 5\naction = \"cont\"\n"));
  EXPECT_EQ(Line(kFirst + 2) + "faults.random.max_faults: must be between 1 and 1024, got 0",
            Refusal(Job() + random + "mean_lifetime_seconds = 5\nmax_faults = 0\n"));
  EXPECT_EQ(Line(kFirst + 2) + "faults.random.grace_seconds: only applies to action \"preempt\"",
            Refusal(Job() + random + "mean_lifetime_seconds = 5\ngrace_seconds = 1\n"));
  EXPECT_EQ(Line(kFirst + 2) +
                "faults.random.sede: unknown key (expected one of mean_lifetime_seconds, seed, action, "
                "restart_delay_seconds, max_faults, grace_seconds)",
            Refusal(Job() + random + "mean_lifetime_seconds = 5\nsede = 1\n"));
  EXPECT_EQ("--set faults.random.seed=-1: faults.random.seed: must be >= 0, got -1",
            Refusal(Job() + random + "mean_lifetime_seconds = 5\n", {"faults.random.seed=-1"}));
  EXPECT_EQ(Line(kFirst + 1) + "faults.other: unknown key (the plan is [[faults]] entries and a [faults.random] table)",
            Refusal(Job() + "[faults]\nother = 1\n"));
  // Two random tables (one after each entry).
  const std::string entry = "[[faults]]\naction = \"kill\"\nworker = 0\nat_seconds = 1\n";
  const std::string twice =
      Refusal(Job() + entry + random + "mean_lifetime_seconds = 5\n" + entry + random + "mean_lifetime_seconds = 6\n");
  EXPECT_NE(std::string::npos, twice.find(": faults.random: given twice")) << twice;
}

// An async job with 2 parameter-server shards; faults start at line 8.
std::string AsyncJob() {
  return std::string("mode = \"async\"\n") +  // 1
         "[cluster]\nworkers = 3\n" +            // 2-3
         "[async]\nservers = 2\n" +              // 4-5
         "[train]\nepochs = 1\n";                // 6-7
}

TEST(FaultPlanTest, AsyncPlansMayKillAndRestartAServer) {
  auto c = Parse(AsyncJob() +
                 "[[faults]]\naction = \"kill\"\nserver = 1\nat_seconds = 2\n"
                 "[[faults]]\naction = \"restart\"\nserver = 1\nat_seconds = 2\ndelay_seconds = 1.5\n"
                 "[[faults]]\naction = \"preempt\"\nworker = 2\nat_step = 5\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(3u, c->faults.faults.size());
  const FaultSpec& kill = c->faults.faults[0];
  EXPECT_EQ(FaultAction::kKill, kill.action);
  EXPECT_EQ(1, kill.server);
  EXPECT_EQ(-1, kill.worker);
  EXPECT_EQ("kill server 1 at 2 s", kill.Describe());
  const FaultSpec& restart = c->faults.faults[1];
  EXPECT_EQ(FaultAction::kRestart, restart.action);
  EXPECT_EQ(1, restart.server);
  EXPECT_DOUBLE_EQ(1.5, restart.delay_seconds);
  EXPECT_EQ("restart server 1 at 2 s (+1.5 s)", restart.Describe());
  EXPECT_EQ(-1, c->faults.faults[2].server);
  EXPECT_EQ(2, c->faults.faults[2].worker);
}

// The coordinator killed and started again on its state file resumes the
// job in every mode, so restart needs no elasticity there (a worker's
// restart does).
TEST(FaultPlanTest, TheCoordinatorMayBeKilledAndRestartedInAnyMode) {
  const std::string plan =
      "[[faults]]\naction = \"kill\"\ncoordinator = true\nat_step = 300\ndelay_seconds = 1.5\n"
      "[[faults]]\naction = \"restart\"\ncoordinator = true\nat_step = 300\ndelay_seconds = 2\n";
  for (const std::string& job : {Job(false), Job(true), AsyncJob()}) {
    auto c = Parse(job + plan);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_EQ(2u, c->faults.faults.size());
    const FaultSpec& kill = c->faults.faults[0];
    EXPECT_TRUE(kill.coordinator);
    EXPECT_EQ(-1, kill.worker);
    EXPECT_EQ(-1, kill.server);
    EXPECT_DOUBLE_EQ(1.5, kill.delay_seconds) << "every action may fire after a delay";
    EXPECT_EQ("kill coordinator at step 300 (+1.5 s)", kill.Describe());
    EXPECT_EQ("restart coordinator at step 300 (+2 s)", c->faults.faults[1].Describe());
  }
  // A worker's restart still needs an elastic job.
  EXPECT_NE(std::string::npos,
            Refusal(Job(false) + "[[faults]]\naction = \"restart\"\nat_step = 3\n").find("cluster.elastic = true"));
}

TEST(FaultPlanTest, ACoordinatorTargetIsCheckedLikeTheOthers) {
  const std::string kill = "[[faults]]\naction = \"kill\"\nat_seconds = 1\n";
  EXPECT_EQ(Line(kFirst) + "faults[0]: set one of worker, server, storage and coordinator",
            Refusal(Job() + kill + "coordinator = true\nworker = 0\n"));
  EXPECT_EQ(Line(kFirst + 3) + "faults[0].coordinator: is true or absent (false names no target)",
            Refusal(Job() + kill + "coordinator = false\n"));
  EXPECT_EQ(Line(kFirst + 3) + "faults[0].coordinator: must be true or false, got string",
            Refusal(Job() + kill + "coordinator = \"yes\"\n"));
  EXPECT_EQ(Line(kFirst) +
                "faults[0]: action \"stop\" does not apply to the coordinator (kill, then restart to start it again "
                "on its state file)",
            Refusal(Job() + "[[faults]]\naction = \"stop\"\nat_seconds = 1\ncoordinator = true\n"));
}

TEST(FaultPlanTest, AServerTargetIsCheckedAgainstTheJob) {
  const std::string kill = "[[faults]]\naction = \"kill\"\nat_seconds = 1\n";
  EXPECT_EQ(Line(kFirst + 3) + "faults[0].server: 2 is not a server (async.servers = 2)",
            Refusal(AsyncJob() + kill + "server = 2\n"));
  EXPECT_EQ(Line(kFirst) + "faults[0]: set worker or server, not both",
            Refusal(AsyncJob() + kill + "server = 0\nworker = 0\n"));
  EXPECT_EQ(Line(kFirst + 3) + "faults[0].server: only applies to mode \"async\" (the job has no parameter servers)",
            Refusal(Job() + kill + "server = 0\n"));
  EXPECT_EQ(Line(kFirst) + "faults[0]: action \"kill\" needs worker (0..2) or server", Refusal(AsyncJob() + kill));
}

TEST(FaultPlanTest, FaultsOnlyApplyToSyncJobsAndAreNotUnknownKeys) {
  EXPECT_EQ(Line(1) + "faults: only apply to modes \"sync\" and \"async\"",
            Refusal("[[faults]]\naction = \"kill\"\nworker = 0\nat_seconds = 1\n"));
  // Unknown keys elsewhere are still reported by the config reader.
  const std::string unknown =
      Refusal(Job() + "[[faults]]\naction = \"kill\"\nworker = 0\nat_seconds = 1\n[log]\nfoo = 1\n");
  EXPECT_EQ(0u, unknown.find(Line(kFirst + 5) + "unknown key 'log.foo'")) << unknown;
}

TEST(FaultPlanTest, TheRandomScheduleIsAFunctionOfTheSeed) {
  RandomFaults r;
  r.mean_lifetime_seconds = 60;
  r.seed = 42;
  r.max_faults = 5;
  r.restart_delay_seconds = 2;
  const auto a = ScheduleRandomFaults(r, 4);
  EXPECT_EQ(a, ScheduleRandomFaults(r, 4));
  ASSERT_EQ(10u, a.size()) << "5 faults, each followed by a restart";
  int64_t faults = 0, next_slot = 4;
  std::set<int64_t> alive = {0, 1, 2, 3};
  double last = 0;
  for (const auto& e : a) {
    EXPECT_GE(e.at_seconds, last) << "sorted by time";
    last = e.at_seconds;
    if (e.action == FaultAction::kRestart) {
      EXPECT_EQ(next_slot++, e.slot) << "restarts create slots in order";
      alive.insert(e.slot);
    } else {
      EXPECT_EQ(FaultAction::kKill, e.action);
      EXPECT_EQ(1u, alive.erase(e.slot)) << "a fault hits a live slot once: " << e.slot;
      ++faults;
    }
  }
  EXPECT_EQ(5, faults);
  // Every restart comes restart_delay_seconds after a fault.
  for (const auto& e : a) {
    if (e.action != FaultAction::kRestart) continue;
    bool found = false;
    for (const auto& f : a)
      found |= f.action != FaultAction::kRestart && std::abs(f.at_seconds + 2 - e.at_seconds) < 1e-9;
    EXPECT_TRUE(found) << "restart at " << e.at_seconds;
  }
  r.seed = 43;
  EXPECT_NE(a, ScheduleRandomFaults(r, 4));
  r.restart_delay_seconds.reset();
  EXPECT_EQ(4u, ScheduleRandomFaults(r, 4).size()) << "without restarts, at most one fault per worker";
}

// With max_faults = workers and no restarts every worker's lifetime is an
// event, so 32 seeds x 512 workers give n = 16384 draws of Exp(60). Their
// mean has standard error 60 / sqrt(n) = 0.47 and their standard deviation
// (60 for an exponential) about 60 * sqrt(8 / (4 n)) = 0.66: tolerances of 5
// standard errors (2.4 and 3.3) fail for a correct sampler with probability
// below 1e-6, and catch a wrong scale, a uniform or a rate/mean mix-up.
TEST(FaultPlanTest, LifetimesAreExponentialWithTheConfiguredMean) {
  RandomFaults r;
  r.mean_lifetime_seconds = 60;
  r.max_faults = 512;
  double sum = 0, sum_sq = 0;
  int64_t n = 0, below_mean = 0;
  for (int64_t seed = 1; seed <= 32; ++seed) {
    r.seed = seed;
    for (const auto& e : ScheduleRandomFaults(r, 512)) {
      ASSERT_GE(e.at_seconds, 0);
      sum += e.at_seconds;
      sum_sq += e.at_seconds * e.at_seconds;
      below_mean += e.at_seconds < 60;
      ++n;
    }
  }
  ASSERT_EQ(32 * 512, n);
  const double mean = sum / static_cast<double>(n);
  const double sd = std::sqrt(sum_sq / static_cast<double>(n) - mean * mean);
  EXPECT_NEAR(60.0, mean, 2.4);
  EXPECT_NEAR(60.0, sd, 3.3);
  // P(X < mean) = 1 - 1/e = 0.632 for an exponential (standard error 0.004).
  EXPECT_NEAR(1 - std::exp(-1.0), static_cast<double>(below_mean) / static_cast<double>(n), 0.02);
}

}  // namespace
}  // namespace tenax

namespace tenax {
namespace {

// A job with a store tenax run builds ([storage]), whose nodes the plan may
// kill and wipe.
std::string StoreJob() {
  return Job() +
         "[storage]\n"        // 8
         "nodes = 6\n"        // 9
         "[data]\n"           // 10
         "format = \"store\"\n";  // 11
}

TEST(FaultPlanTest, AStorageNodeIsKilledAndWipedAndNamedSo) {
  auto c = Parse(StoreJob() +
                 "[[faults]]\n"  // 12
                 "action = \"kill\"\n"
                 "storage = 2\n"
                 "wipe = true\n"
                 "at_step = 40\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->faults.faults.size(), 1u);
  const FaultSpec& f = c->faults.faults[0];
  EXPECT_EQ(f.storage, 2);
  EXPECT_TRUE(f.wipe);
  EXPECT_EQ(f.worker, -1);
  EXPECT_EQ(f.Describe(), "kill storage node-2 (wiped) at step 40");
  EXPECT_EQ(c->storage.nodes, 6);
  EXPECT_EQ(c->storage.data_chunks, 4);
  EXPECT_EQ(c->storage.parity_chunks, 2);
}

TEST(FaultPlanTest, StorageFaultsAreRefusedWhereTheyCannotApply) {
  const std::string entry = "[[faults]]\naction = \"kill\"\nstorage = 1\nat_step = 40\n";
  // No store of the launcher's own.
  EXPECT_NE(Refusal(Job() + entry).find("storage: needs a store that tenax run builds"), std::string::npos)
      << Refusal(Job() + entry);
  // A node the store does not have.
  EXPECT_NE(Refusal(StoreJob() + "[[faults]]\naction = \"kill\"\nstorage = 6\nat_step = 40\n")
                .find("storage: 6 is not a data node (storage.nodes = 6)"),
            std::string::npos);
  // Only kill applies; wipe only to storage; one target.
  EXPECT_NE(Refusal(StoreJob() + "[[faults]]\naction = \"stop\"\nstorage = 1\nat_step = 40\n")
                .find("does not apply to a storage node"),
            std::string::npos);
  EXPECT_NE(Refusal(StoreJob() + "[[faults]]\naction = \"kill\"\nworker = 1\nwipe = true\nat_step = 40\n")
                .find("wipe: only applies to a storage node"),
            std::string::npos);
  EXPECT_NE(Refusal(StoreJob() + "[[faults]]\naction = \"kill\"\nworker = 1\nstorage = 1\nat_step = 40\n")
                .find("set one of worker, server and storage"),
            std::string::npos);
}

TEST(FaultPlanTest, StorageAndStragglerKeysAreCheckedWithTheJob) {
  // Too few nodes for a stripe: the message says what would work.
  const std::string few = Refusal(Job() + "[storage]\nnodes = 5\n[data]\nformat = \"store\"\n");
  EXPECT_NE(few.find("5 data nodes cannot hold a stripe of 4 + 2 chunks"), std::string::npos) << few;
  EXPECT_NE(few.find("use at least 6 nodes"), std::string::npos) << few;
  // A store needs the store format.
  EXPECT_NE(Refusal(Job() + "[storage]\nnodes = 6\n").find("needs data.format = \"store\""), std::string::npos);
  // Stragglers apply to sync jobs now, and their workers are checked.
  auto c = Parse(Job() + "[stragglers]\nmodel = \"markov\"\nslow_workers = [3]\np_slow = 0.0\np_recover = 0.0\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->stragglers.slow_workers, std::vector<int>{3});
  EXPECT_NE(Refusal(Job() + "[stragglers]\nmodel = \"markov\"\nslow_workers = [4]\n").find("outside this job's ranks 0..3"),
            std::string::npos);
  // The metrics endpoint's address is checked.
  const std::string bad = Refusal(Job(), {"cluster.metrics_listen=\"nowhere\""});
  EXPECT_NE(bad.find("cluster.metrics_listen"), std::string::npos) << bad;
  // [report] belongs to jobs tenax run runs.
  auto r = Parse(Job() + "[report]\nreference = true\nhtml = false\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->report.reference);
  EXPECT_FALSE(r->report.html);
}


// Job() on an emulated topology: a1 and a2 in zone za, b1 in zb.
std::string TopologyJob() {
  return Job() +
         "[topology]\nhosts = [ { name = \"a1\", zone = \"za\", slots = 2 }, { name = \"a2\", zone = \"za\", slots = 2 "
         "}, { name = \"b1\", zone = \"zb\", slots = 2 } ]\n";
}

TEST(FaultPlanTest, LinkFaultsNameTwoHostsOrTwoWorkersOrOneHostAndLastSeconds) {
  auto c = Parse(TopologyJob() +
                 "[[faults]]\naction = \"drop_link\"\nhosts = [\"a1\", \"b1\"]\nseconds = 2.5\nat_step = 10\n"
                 "[[faults]]\naction = \"slow_link\"\nworkers = [0, 3]\nseconds = 4\nfactor = 20\nat_seconds = 3\n"
                 "[[faults]]\naction = \"partition\"\nworker = 1\nseconds = 1\nat_step = 20\ndelay_seconds = 0.5\n"
                 "[[faults]]\naction = \"partition\"\nhost = \"a2\"\nseconds = 1\nat_step = 30\n"
                 "[[faults]]\naction = \"slow_link\"\nhosts = [\"a2\", \"a1\"]\nseconds = 1\nat_step = 40\n"
                 "[[faults]]\naction = \"slow_host\"\nworker = 2\nseconds = 30\nfactor = 10\ndelay_ms = 20\nat_step = 50\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto& f = c->faults.faults;
  ASSERT_EQ(6u, f.size());
  EXPECT_EQ(FaultAction::kDropLink, f[0].action);
  EXPECT_EQ((std::vector<std::string>{"a1", "b1"}), f[0].hosts);
  EXPECT_DOUBLE_EQ(2.5, f[0].seconds);
  EXPECT_EQ("drop_link hosts a1-b1 for 2.5 s at step 10", f[0].Describe());
  EXPECT_EQ((std::vector<int64_t>{0, 3}), f[1].link_workers);
  EXPECT_DOUBLE_EQ(20, f[1].factor);
  EXPECT_EQ("slow_link workers 0-3 for 4 s (20x slower) at 3 s", f[1].Describe());
  EXPECT_EQ(1, f[2].worker);
  EXPECT_TRUE(f[2].hosts.empty());
  EXPECT_EQ("partition worker 1's host for 1 s at step 20 (+0.5 s)", f[2].Describe());
  EXPECT_EQ((std::vector<std::string>{"a2"}), f[3].hosts);
  EXPECT_EQ(-1, f[3].worker);
  EXPECT_DOUBLE_EQ(10, f[4].factor) << "slow_link is 10x slower unless told";
  EXPECT_DOUBLE_EQ(0, f[4].delay_ms) << "and adds no delay unless told";
  EXPECT_EQ(FaultAction::kSlowHost, f[5].action);
  EXPECT_EQ(2, f[5].worker);
  EXPECT_DOUBLE_EQ(20, f[5].delay_ms);
  EXPECT_EQ("slow_host worker 2's host for 30 s (10x slower, +20 ms) at step 50", f[5].Describe());
  for (const FaultSpec& x : f) EXPECT_TRUE(IsLinkFault(x.action));
}

TEST(FaultPlanTest, LinkFaultRefusalsNameTheEntryAndTheKey) {
  const std::string drop = "[[faults]]\naction = \"drop_link\"\nat_step = 5\n";
  const std::string part = "[[faults]]\naction = \"partition\"\nat_step = 5\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Job() + drop + "hosts = [\"a1\", \"b1\"]\nseconds = 1\n",
       "faults[0]: action \"drop_link\" needs an emulated topology ([topology] hosts)"},
      {TopologyJob() + drop + "hosts = [\"a1\", \"c9\"]\nseconds = 1\n",
       "faults[0].hosts: 'c9' is not a host of [topology] (a1, a2, b1)"},
      {TopologyJob() + drop + "hosts = [\"a1\", \"a1\"]\nseconds = 1\n", "faults[0].hosts: names one host twice"},
      {TopologyJob() + drop + "hosts = [\"a1\"]\nseconds = 1\n", "faults[0].hosts: must be an array of 2 host names"},
      {TopologyJob() + drop + "hosts = [1, 2]\nseconds = 1\n", "faults[0].hosts: must be an array of 2 host names"},
      {TopologyJob() + drop + "hosts = [\"a1\", \"b1\"]\nworkers = [0, 1]\nseconds = 1\n",
       "faults[0]: set one of hosts and workers"},
      {TopologyJob() + drop + "seconds = 1\n", "faults[0]: set one of hosts and workers"},
      {TopologyJob() + drop + "workers = [0, 9]\nseconds = 1\n",
       "faults[0].workers: 9 is not a worker (cluster.workers = 4)"},
      {TopologyJob() + drop + "workers = [2, 2]\nseconds = 1\n", "faults[0].workers: names one worker twice"},
      {TopologyJob() + drop + "workers = [0, 1]\n", "faults[0]: seconds is required"},
      {TopologyJob() + drop + "workers = [0, 1]\nseconds = 0\n", "faults[0].seconds: must be > 0 and at most 3600"},
      {TopologyJob() + drop + "workers = [0, 1]\nseconds = 4000\n", "faults[0].seconds: must be > 0 and at most 3600"},
      {TopologyJob() + drop + "workers = [0, 1]\nseconds = 1\nfactor = 5\n",
       "faults[0].factor: only applies to actions \"slow_link\" and \"slow_host\""},
      {TopologyJob() + drop + "workers = [0, 1]\nseconds = 1\ndelay_ms = 5\n",
       "faults[0].delay_ms: only applies to actions \"slow_link\" and \"slow_host\""},
      {TopologyJob() + "[[faults]]\naction = \"slow_host\"\nat_step = 5\nhost = \"a1\"\nseconds = 1\ndelay_ms = -3\n",
       "faults[0].delay_ms: must be from 0 to 10000 (ms added to each way), got -3"},
      {TopologyJob() + "[[faults]]\naction = \"slow_host\"\nat_step = 5\nworkers = [0, 1]\nseconds = 1\n",
       "faults[0].workers: does not apply to action \"slow_host\" (host = \"a1\" or worker = N: the host whose links slow down)"},
      {TopologyJob() + "[[faults]]\naction = \"slow_link\"\nat_step = 5\nworkers = [0, 1]\nseconds = 1\nfactor = 1\n",
       "faults[0].factor: must be from 2 to 1000, got 1"},
      {TopologyJob() + drop + "worker = 1\nseconds = 1\n", "faults[0].worker: does not apply to action \"drop_link\""},
      {TopologyJob() + drop + "workers = [0, 1]\nseconds = 1\nserver = 0\n",
       "faults[0].server: does not apply to action \"drop_link\""},
      {TopologyJob() + part + "hosts = [\"a1\", \"b1\"]\nseconds = 1\n",
       "faults[0].hosts: does not apply to action \"partition\""},
      {TopologyJob() + part + "seconds = 1\n", "faults[0]: set one of host and worker"},
      {TopologyJob() + part + "host = \"zz\"\nseconds = 1\n", "faults[0].host: 'zz' is not a host of [topology]"},
      {TopologyJob() + part + "worker = 7\nseconds = 1\n", "faults[0].worker: 7 is not a worker"},
      {TopologyJob() + "[[faults]]\naction = \"kill\"\nworker = 1\nat_step = 5\nseconds = 3\n",
       "faults[0].seconds: only applies to link faults (drop_link, slow_link, partition, slow_host)"},
      {TopologyJob() + "[[faults]]\naction = \"cut\"\nat_step = 5\n",
       "faults[0].action: must be one of kill, preempt, stop, cont, restart, drop_link, slow_link, partition, slow_host, got 'cut'"},
  };
  for (const auto& [text, needle] : cases) {
    const std::string refusal = Refusal(text);
    EXPECT_NE(std::string::npos, refusal.find(needle)) << needle << "\n  got: " << refusal;
    EXPECT_EQ(0u, refusal.rfind("job.toml:", 0)) << "names the line: " << refusal;
  }
}

}  // namespace
}  // namespace tenax

// FaultInjector on real child processes (sleep and /bin/sh under a
// ProcessSupervisor): real signals, the right pids, expected exits that are
// no failures, and every wait bounded by a deadline.
#include "fault_injector.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <filesystem>
#include <set>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run_monitor.h"
#include "tenax/core/files.h"
#include "run_summary.h"
#include "testing.h"

namespace tenax {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> Sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

// The state letter of /proc/<pid>/stat ('S' sleeping, 'T' stopped...).
char ProcState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command may contain spaces
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

// Polls /proc (the kernel changes the state asynchronously after the signal).
char WaitForState(pid_t pid, char state, Deadline deadline) {
  char now = ProcState(pid);
  while (now != state && !deadline.Expired()) {
    std::this_thread::sleep_for(1ms);
    now = ProcState(pid);
  }
  return now;
}

FaultSpec Timed(int64_t index, FaultAction action, int64_t worker, double at) {
  FaultSpec f;
  f.index = index;
  f.action = action;
  f.worker = worker;
  f.at_seconds = at;
  return f;
}

FaultSpec Stepped(int64_t index, FaultAction action, int64_t worker, int64_t step) {
  FaultSpec f;
  f.index = index;
  f.action = action;
  f.worker = worker;
  f.at_step = step;
  return f;
}

// Polls the injector at `max_step` until `done()` or the deadline, waiting
// for child activity or the injector's next due time in between.
template <typename Done>
bool Drive(FaultInjector& injector, ProcessSupervisor& children, int64_t max_step, Done done, Deadline deadline) {
  while (!done()) {
    if (deadline.Expired()) return false;
    injector.Poll(max_step);
    if (done()) return true;
    Deadline wait = deadline.Earlier(Deadline::After(100ms));
    if (auto due = injector.NextDue()) wait = wait.Earlier(Deadline::At(*due));
    children.WaitForActivity(wait);
  }
  return true;
}

TEST(FaultInjectorTest, AKillAndAStopAtTheirTimeHitTheRightProcessesOnly) {
  ProcessSupervisor children("fault test", 5s);
  for (const char* name : {"worker 0", "worker 1", "worker 2"}) {
    ASSERT_TRUE(children.StartCaptured(name, {"sleep", "60"}).ok());
  }
  FaultInjectorOptions o;
  o.plan.faults = {Timed(0, FaultAction::kKill, 1, 0.2), Timed(1, FaultAction::kStop, 2, 0.2)};
  o.workers = {0, 1, 2};
  o.expect_exits = true;
  std::vector<std::string> notices;
  o.on_notice = [&notices](const std::string& s) { notices.push_back(s); };
  FaultInjector injector(children, o);
  const auto start = SteadyClock::now();
  injector.Start(start);
  ASSERT_TRUE(injector.NextDue().has_value());
  EXPECT_EQ(start + 200ms, *injector.NextDue());

  const Deadline deadline = Deadline::After(30s);
  ASSERT_TRUE(Drive(
      injector, children, 0, [&] { return injector.records().size() == 2; }, deadline));
  EXPECT_GE(SteadyClock::now() - start, 200ms) << "fired early";
  auto code = children.WaitForExit(1, deadline);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(128 + SIGKILL, *code) << "worker 1 dies of SIGKILL";
  EXPECT_EQ('T', WaitForState(children.pid(2), 'T', deadline)) << "worker 2 is stopped";
  EXPECT_EQ(std::nullopt, children.exit_code(0));
  EXPECT_NE('T', ProcState(children.pid(0))) << "worker 0 was not touched";
  EXPECT_FALSE(children.FirstFailure().has_value()) << "the plan's victims are expected to die";

  const auto& r = injector.records();
  EXPECT_EQ("fault", r[0]["event"]);
  EXPECT_EQ("kill", r[0]["action"]);
  EXPECT_EQ("SIGKILL", r[0]["signal"]);
  EXPECT_EQ(1, r[0]["worker"]);
  EXPECT_EQ(children.pid(1), r[0]["pid"]);
  EXPECT_GE(r[0]["elapsed_seconds"].get<double>(), 0.2);
  EXPECT_EQ(0, r[0]["step"]);
  EXPECT_EQ("faults[0]", r[0]["source"]);
  EXPECT_EQ("stop", r[1]["action"]);
  EXPECT_EQ(2, r[1]["worker"]);
  EXPECT_EQ(children.pid(2), r[1]["pid"]);
  ASSERT_EQ(2u, notices.size());
  const std::string kill_notice = "fault: SIGKILL worker 1 (pid " + std::to_string(children.pid(1)) + ") at 0.";
  EXPECT_EQ(0u, notices[0].find(kill_notice)) << notices[0];
  EXPECT_EQ(0u, notices[1].find("fault: SIGSTOP worker 2 (pid " + std::to_string(children.pid(2)) + ") at 0."))
      << notices[1];

  // The end of the job: nobody waits for the stopped child.
  injector.Finish(0);
  EXPECT_EQ(std::optional<int>(128 + SIGKILL), children.exit_code(2)) << "SIGKILLed and reaped by Finish";
  EXPECT_EQ(std::nullopt, children.exit_code(0));
  EXPECT_EQ(2u, injector.records().size()) << "every fault fired";
  EXPECT_EQ(2u, injector.Executed().size());
  children.Stop();
  EXPECT_EQ(std::optional<int>(128 + SIGTERM), children.exit_code(0));
  EXPECT_FALSE(children.FirstFailure().has_value());
}

TEST(FaultInjectorTest, StepTriggersPreemptionsRestartsAndFaultsThatNeverFired) {
  ProcessSupervisor children("fault test", 5s);
  // Worker 0 ignores SIGTERM (its preemption ends in SIGKILL); worker 1 does not.
  ASSERT_TRUE(children.StartCaptured("worker 0", Sh("trap '' TERM; echo ready; exec sleep 60")).ok());
  ASSERT_TRUE(children.StartCaptured("worker 1", {"sleep", "60"}).ok());
  ASSERT_TRUE(children.StartCaptured("bystander", Sh("exit 3")).ok());  // fails on its own
  ASSERT_TRUE(children.WaitForLine(0, "ready", Deadline::After(30s)).ok());

  FaultInjectorOptions o;
  FaultSpec preempt0 = Stepped(0, FaultAction::kPreempt, 0, 10);
  preempt0.grace_seconds = 0.1;
  FaultSpec preempt1 = Stepped(1, FaultAction::kPreempt, 1, 10);
  FaultSpec restart = Stepped(2, FaultAction::kRestart, -1, 20);
  restart.delay_seconds = 0.1;
  o.plan.faults = {preempt0, preempt1, restart, Stepped(3, FaultAction::kKill, 1, 30),
                   Timed(4, FaultAction::kKill, 0, 600)};
  o.workers = {0, 1};
  o.expect_exits = true;
  std::vector<nlohmann::json> delivered;  // what the launcher writes to metrics.jsonl as it happens
  o.on_record = [&](const nlohmann::json& r) { delivered.push_back(r); };
  std::vector<int64_t> joiners;
  o.start_joiner = [&](int64_t n) {
    joiners.push_back(n);
    return children.StartCaptured("joiner " + std::to_string(n), {"sleep", "60"});
  };
  FaultInjector injector(children, o);
  injector.Start();
  const Deadline deadline = Deadline::After(30s);

  injector.Poll(9);
  EXPECT_TRUE(injector.records().empty()) << "step 10 not reached";
  ASSERT_TRUE(Drive(
      injector, children, 10, [&] { return children.exit_code(0) && children.exit_code(1); }, deadline));
  EXPECT_EQ(std::optional<int>(128 + SIGKILL), children.exit_code(0)) << "killed after its grace period";
  EXPECT_EQ(std::optional<int>(128 + SIGTERM), children.exit_code(1)) << "left at SIGTERM";
  ASSERT_TRUE(Drive(
      injector, children, 10, [&] { return injector.records().size() == 3; }, deadline));

  ASSERT_TRUE(Drive(
      injector, children, 20, [&] { return !joiners.empty(); }, deadline));
  EXPECT_EQ(std::vector<int64_t>{1}, joiners);
  injector.Poll(30);  // kills worker 1, which is gone already
  injector.Finish(30);

  const auto& r = injector.records();
  ASSERT_EQ(6u, r.size()) << nlohmann::json(r).dump(1);
  EXPECT_EQ("preempt", r[0]["action"]);
  EXPECT_EQ("SIGTERM", r[0]["signal"]);
  EXPECT_EQ(10, r[0]["step"]);
  EXPECT_EQ(0.1, r[0]["grace_seconds"]);
  EXPECT_EQ("preempt", r[1]["action"]);
  EXPECT_EQ(1, r[1]["worker"]);
  EXPECT_EQ("kill", r[2]["action"]);
  EXPECT_EQ(0, r[2]["worker"]);
  EXPECT_EQ("SIGKILL", r[2]["signal"]);
  EXPECT_EQ("restart", r[3]["action"]);
  EXPECT_EQ(1, r[3]["joiner"]);
  EXPECT_EQ(children.pid(3), r[3]["pid"]);
  EXPECT_EQ(20, r[3]["step"]);
  EXPECT_EQ("fault_not_fired", r[4]["event"]);
  EXPECT_EQ("faults[3]", r[4]["source"]);
  EXPECT_EQ("worker 1 (pid " + std::to_string(children.pid(1)) + ") had already exited with code 143", r[4]["reason"]);
  EXPECT_EQ("fault_not_fired", r[5]["event"]);
  EXPECT_EQ("faults[4]", r[5]["source"]);
  EXPECT_EQ(600, r[5]["at_seconds"]);
  EXPECT_EQ("the job ended first", r[5]["reason"]);
  EXPECT_EQ(4u, injector.Executed().size());

  // An untouched child's failure is still one.
  const std::optional<ChildFailure> f = children.FirstFailure();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ("bystander", f->name);

  // Every record reached on_record as it was made, in order, the
  // fault_not_fired ones of Finish included.
  EXPECT_EQ(r, delivered);
}

// The random plan's joiners are targets too: its second fault hits the
// joiner its first restart started (and a second joiner replaces it).
TEST(FaultInjectorTest, TheRandomPlanStartsJoinersAndLaterFaultsHitThem) {
  ProcessSupervisor children("fault test", 5s);
  ASSERT_TRUE(children.StartCaptured("worker 0", {"sleep", "60"}).ok());
  FaultInjectorOptions o;
  RandomFaults random;
  random.mean_lifetime_seconds = 0.01;  // P(a lifetime > 1 s) = e^-100
  random.max_faults = 2;
  random.restart_delay_seconds = 0;
  o.plan.random = random;
  o.workers = {0};
  o.expect_exits = true;
  o.start_joiner = [&](int64_t n) { return children.StartCaptured("joiner " + std::to_string(n), {"sleep", "60"}); };
  FaultInjector injector(children, o);
  injector.Start();
  ASSERT_TRUE(Drive(
      injector, children, 0, [&] { return injector.records().size() >= 4; }, Deadline::After(30s)))
      << nlohmann::json(injector.records()).dump(1);
  const auto& r = injector.records();
  ASSERT_EQ(4u, r.size()) << nlohmann::json(r).dump(1);
  EXPECT_EQ("kill", r[0]["action"]);
  EXPECT_EQ(0, r[0]["worker"]);
  EXPECT_EQ("faults.random", r[0]["source"]);
  EXPECT_EQ("restart", r[1]["action"]);
  EXPECT_EQ(1, r[1]["joiner"]);
  EXPECT_EQ("kill", r[2]["action"]);
  EXPECT_EQ(1, r[2]["joiner"]);
  EXPECT_EQ(children.pid(1), r[2]["pid"]);
  EXPECT_EQ("restart", r[3]["action"]);
  EXPECT_EQ(2, r[3]["joiner"]);
  EXPECT_EQ(children.pid(2), r[3]["pid"]);
  const Deadline deadline = Deadline::After(30s);
  for (size_t i : {0u, 1u}) {
    auto code = children.WaitForExit(i, deadline);
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    EXPECT_EQ(128 + SIGKILL, *code) << children.name(i);
  }
  injector.Finish(0);
  EXPECT_EQ(4u, injector.records().size());
  EXPECT_EQ(std::nullopt, children.exit_code(2)) << "joiner 2 was not touched";
  EXPECT_FALSE(children.FirstFailure().has_value());
}

// A server fault: SIGKILL the shard's process, then start it again through
// the launcher's callback; a restart while the old process runs is refused
// (two processes on one checkpoint directory), and later faults hit the new
// process.
TEST(FaultInjectorTest, AServerIsKilledAndRestartedOnlyOnceItsOldProcessIsGone) {
  ProcessSupervisor children("fault test", 5s);
  for (const char* name : {"server 0", "worker 0"}) ASSERT_TRUE(children.StartCaptured(name, {"sleep", "60"}).ok());
  auto server_fault = [](int64_t index, FaultAction action, double at) {
    FaultSpec f = Timed(index, action, -1, at);
    f.server = 0;
    return f;
  };
  FaultInjectorOptions o;
  o.plan.faults = {server_fault(0, FaultAction::kRestart, 0.05),  // too early: server 0 still runs
                   server_fault(1, FaultAction::kKill, 0.1), server_fault(2, FaultAction::kRestart, 0.1),
                   server_fault(3, FaultAction::kStop, 0.3)};
  o.plan.faults[2].delay_seconds = 0.1;
  o.workers = {1};
  o.servers = {0};
  o.expect_exits = true;
  std::vector<int64_t> restarted;
  o.restart_server = [&](int64_t shard) {
    restarted.push_back(shard);
    auto index = children.StartCaptured("server " + std::to_string(shard), {"sleep", "60"});
    if (index.ok()) children.ExpectExit(*index);
    return index;
  };
  std::vector<std::string> notices;
  o.on_notice = [&notices](const std::string& s) { notices.push_back(s); };
  FaultInjector injector(children, o);
  const pid_t first = children.pid(0);
  injector.Start();
  const Deadline deadline = Deadline::After(30s);
  ASSERT_TRUE(Drive(
      injector, children, 0, [&] { return injector.records().size() == 4; }, deadline));

  const auto& r = injector.records();
  EXPECT_EQ("fault_not_fired", r[0]["event"]);
  EXPECT_EQ(0, r[0]["server"]);
  EXPECT_NE(std::string::npos, r[0]["reason"].get<std::string>().find("still runs")) << r[0].dump();
  EXPECT_EQ("fault", r[1]["event"]);
  EXPECT_EQ("kill", r[1]["action"]);
  EXPECT_EQ(0, r[1]["server"]);
  EXPECT_FALSE(r[1].contains("worker"));
  EXPECT_EQ(first, r[1]["pid"]);
  EXPECT_EQ(std::optional<int>(128 + SIGKILL), children.exit_code(0));
  ASSERT_EQ(std::vector<int64_t>{0}, restarted);
  ASSERT_EQ(3u, children.size());
  EXPECT_EQ("restart", r[2]["action"]);
  EXPECT_EQ(children.pid(2), r[2]["pid"]);
  EXPECT_EQ("stop", r[3]["action"]);
  EXPECT_EQ(children.pid(2), r[3]["pid"]) << "the stop hits the restarted process";
  EXPECT_EQ('T', WaitForState(children.pid(2), 'T', deadline));
  EXPECT_NE('T', ProcState(children.pid(1))) << "the worker was not touched";
  EXPECT_EQ(0u, notices[2].find("fault: restarted server 0 (pid " + std::to_string(children.pid(2)) + ")"))
      << notices[2];
  injector.Finish(0);
  children.Stop();
  EXPECT_FALSE(children.FirstFailure().has_value());
}

// The coordinator: its SIGKILL is the plan's (expected in every mode, so no
// failure of the job), the injector says it is down until the restart, and
// a restart while it still runs is refused (two coordinators on one state
// file would fight over it).
TEST(FaultInjectorTest, TheCoordinatorIsKilledAndRestartedOnItsStateFile) {
  ProcessSupervisor children("fault test", 5s);
  for (const char* name : {"coordinator", "worker 0"}) ASSERT_TRUE(children.StartCaptured(name, {"sleep", "60"}).ok());
  auto coordinator_fault = [](int64_t index, FaultAction action, double at) {
    FaultSpec f = Timed(index, action, -1, at);
    f.coordinator = true;
    return f;
  };
  FaultInjectorOptions o;
  o.plan.faults = {coordinator_fault(0, FaultAction::kRestart, 0.05),  // too early: it still runs
                   coordinator_fault(1, FaultAction::kKill, 0.1), coordinator_fault(2, FaultAction::kRestart, 0.1)};
  o.plan.faults[2].delay_seconds = 0.2;
  o.workers = {1};
  o.coordinator = 0;
  o.expect_exits = false;  // a fixed job: only the plan's coordinator kill is expected
  int restarts = 0;
  o.restart_coordinator = [&]() -> Result<size_t> {
    ++restarts;
    return children.StartCaptured("coordinator", {"sleep", "60"});
  };
  FaultInjector injector(children, o);
  const pid_t first = children.pid(0);
  EXPECT_TRUE(injector.CoordinatorRestartPending());
  injector.Start();
  const Deadline deadline = Deadline::After(30s);
  ASSERT_TRUE(Drive(
      injector, children, 0, [&] { return injector.records().size() == 2; }, deadline));
  EXPECT_TRUE(injector.CoordinatorDown()) << "killed, its restart 0.2 s later";
  EXPECT_TRUE(injector.CoordinatorRestartPending());
  ASSERT_TRUE(Drive(
      injector, children, 0, [&] { return injector.records().size() == 3; }, deadline));
  EXPECT_FALSE(injector.CoordinatorDown());
  EXPECT_FALSE(injector.CoordinatorRestartPending());
  EXPECT_EQ(1, injector.coordinator_restarts());

  const auto& r = injector.records();
  EXPECT_EQ("fault_not_fired", r[0]["event"]);
  EXPECT_EQ(true, r[0]["coordinator"]);
  EXPECT_NE(std::string::npos, r[0]["reason"].get<std::string>().find("still runs")) << r[0].dump();
  EXPECT_EQ("kill", r[1]["action"]);
  EXPECT_EQ(first, r[1]["pid"]);
  std::optional<records::Fault> kill = records::FaultFrom(r[1]);
  ASSERT_TRUE(kill.has_value()) << r[1].dump();
  EXPECT_EQ("the coordinator", records::TargetName(*kill));
  EXPECT_EQ(std::optional<int>(128 + SIGKILL), children.exit_code(0));
  ASSERT_EQ(1, restarts);
  ASSERT_EQ(3u, children.size());
  EXPECT_EQ("restart", r[2]["action"]);
  EXPECT_EQ(children.pid(2), r[2]["pid"]);
  EXPECT_FALSE(children.exit_code(1).has_value()) << "the worker was not touched";
  injector.Finish(0);
  children.Stop();
  EXPECT_FALSE(children.FirstFailure().has_value()) << "the plan's kill of the coordinator is no failure";
}


// In an elastic job every worker's exit is expected (the coordinator judges
// it), yet a worker that fails on its own is not a planned kill: the
// monitor marks it "failed" with the end of its log, and the supervisor
// still reports that log for the launcher's error (CI once saw only
// "killed (exited with code 2)" for a worker whose log said why).
TEST(FaultInjectorTest, AWorkerThatFailsOnItsOwnIsFailedWithItsLogNotKilled) {
  testing::ScratchDir dir;
  ProcessSupervisor children("fault test", 5s);
  auto planned = children.StartLogged("worker 0", {"sleep", "60"}, dir / "w0.log");
  auto own = children.StartLogged("worker 1", Sh("echo starting; echo 'tenax worker: error: the catalog is locked' >&2; exit 2"),
                                  dir / "w1.log");
  ASSERT_TRUE(planned.ok() && own.ok());
  children.ExpectExit(*planned);
  children.ExpectExit(*own);
  std::vector<std::pair<std::string, std::string>> states;  // (worker, state) per change, in order
  std::map<std::string, std::string> last;
  RunMonitor monitor(dir / "metrics.jsonl", {{}, [&](const std::vector<WorkerStatus>& ws) {
                       for (const auto& w : ws) {
                         if (last[w.name] != w.state) states.emplace_back(w.name, w.state);
                         last[w.name] = w.state;
                       }
                     }});
  monitor.AddWorker("worker 0", children.pid(*planned), "");
  monitor.AddWorker("worker 1", children.pid(*own), "");
  const std::string n0 = "h/" + std::to_string(children.pid(*planned));
  const std::string n1 = "h/" + std::to_string(children.pid(*own));
  const std::string n2 = "h/" + std::to_string(::getpid());  // a third member, alive throughout
  monitor.OnGeneration({1, {0, 1, 2}, {{0, n0}, {1, n1}, {2, n2}}, "first generation: 3 workers"});
  monitor.OnFaultRecord(nlohmann::json{{"event", "fault"}, {"action", "kill"}, {"worker", 0}, {"pid", children.pid(*planned)}, {"step", 3}});
  ASSERT_TRUE(children.Signal(*planned, SIGKILL).ok());
  for (size_t i : {*planned, *own}) {
    auto code = children.WaitForExit(i, Deadline::After(30s));
    ASSERT_TRUE(code.ok()) << code.status().message();
  }
  EXPECT_FALSE(children.FirstFailure().has_value());  // both exits were expected
  auto report = children.ExitReport(*own);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->exit_code, 2);
  ASSERT_FALSE(report->last_lines.empty());
  EXPECT_EQ(report->last_lines.back(), "tenax worker: error: the catalog is locked");
  EXPECT_FALSE(monitor.OnExit(children.pid(*planned), 137, "killed"));
  EXPECT_TRUE(monitor.OnExit(children.pid(*own), 2, report->last_lines.back()));
  monitor.OnGeneration({2, {1, 2}, {{1, n1}, {2, n2}}, "rank 0 lost"});
  monitor.OnGeneration({3, {2}, {{2, n2}}, "rank 1 lost"});
  const std::vector<std::pair<std::string, std::string>> want = {
      {"worker 0", "starting"}, {"worker 1", "starting"}, {"worker 0", "active"},
      {"worker 1", "active"},   {"worker 0", "killed"},   {"worker 1", "failed"}};  // a later generation listing it changes nothing
  EXPECT_EQ(states, want);
  // summary.json's faults: the planned kill, and the failure nobody planned
  // with its reason and the generation that went on without it.
  const nlohmann::json faults = monitor.FaultsWithReactions();
  ASSERT_EQ(faults.size(), 2u) << faults.dump(2);
  EXPECT_EQ(faults[0].value("fault", ""), "kill worker 0") << faults.dump(2);
  EXPECT_NE(faults[0].value("reaction", "").find("generation 2"), std::string::npos) << faults.dump(2);
  EXPECT_EQ(faults[1].value("fault", ""), "worker 1 failed on its own (exit code 2)") << faults.dump(2);
  EXPECT_EQ(faults[1].value("source", ""), "unplanned");
  EXPECT_EQ(faults[1].value("detail", ""), "tenax worker: error: the catalog is locked");
  EXPECT_EQ(faults[1].value("reaction", ""), "the other 1 worker re-formed as generation 3 and went on (rank 1 lost)");
  EXPECT_TRUE(faults[1].value("recovered", false));
  // The record a user reads in metrics.jsonl says why.
  std::ifstream in(dir / "metrics.jsonl");
  std::string line, failed;
  while (std::getline(in, line)) {
    if (line.find("\"failed\"") != std::string::npos) failed = line;
  }
  auto record = nlohmann::json::parse(failed, nullptr, false);
  ASSERT_FALSE(record.is_discarded()) << failed;
  EXPECT_EQ(record.value("worker", ""), "worker 1");
  EXPECT_EQ(record.value("detail", ""), "exited with code 2: tenax worker: error: the catalog is locked");
}

// A worker the plan SIGSTOPs hangs; the others drop it (a new generation
// without it) and go on. SIGCONTed later, it learns it was removed and
// exits 2 ("rank 0 was removed from job ..."). That exit is the plan's
// doing: it "left", and summary.json lists no failure of its own (the
// soak's rounds listed one for every stop and cont). A stopped worker that
// no generation dropped, continued and then failing, still failed on its
// own.
TEST(FaultInjectorTest, AStoppedWorkerDroppedByTheGroupLeavesOnWakingWithoutFailingOnItsOwn) {
  testing::ScratchDir dir;
  std::map<std::string, std::string> last;
  RunMonitor monitor(dir / "metrics.jsonl", {{}, [&](const std::vector<WorkerStatus>& ws) {
                       for (const auto& w : ws) last[w.name] = w.state + ": " + w.detail;
                     }});
  const pid_t p0 = 4000001, p1 = 4000002, p2 = 4000003;  // no such processes: the monitor only reads records
  monitor.AddWorker("worker 0", p0, "");
  monitor.AddWorker("worker 1", p1, "");
  monitor.AddWorker("worker 2", p2, "");
  auto name = [](pid_t p) { return "h/" + std::to_string(p); };
  monitor.OnGeneration({1, {0, 1, 2}, {{0, name(p0)}, {1, name(p1)}, {2, name(p2)}}, "first generation: 3 workers"});
  for (auto [w, p] : {std::pair{0, p0}, std::pair{1, p1}}) {
    monitor.OnFaultRecord(
        nlohmann::json{{"event", "fault"}, {"action", "stop"}, {"worker", w}, {"pid", p}, {"step", 5 + w}});
  }
  // Worker 0 is dropped while it hangs; worker 1 is woken before anyone noticed.
  monitor.OnGeneration({2, {1, 2}, {{1, name(p1)}, {2, name(p2)}}, "rank 0 lost: silent for 3000 ms"});
  EXPECT_EQ("stopped: SIGSTOP: hangs; not in generation 2", last["worker 0"]);
  for (auto [w, p] : {std::pair{0, p0}, std::pair{1, p1}}) {
    monitor.OnFaultRecord(
        nlohmann::json{{"event", "fault"}, {"action", "cont"}, {"worker", w}, {"pid", p}, {"step", 40}});
  }
  EXPECT_EQ("left: SIGCONT: generation 2 dropped it while it was stopped; it leaves", last["worker 0"]);
  EXPECT_EQ("active: SIGCONT", last["worker 1"]);
  EXPECT_FALSE(monitor.OnExit(p0, 2, "tenax worker: error: rank 0 was removed from job 'j' (failed)"));
  EXPECT_TRUE(monitor.OnExit(p1, 3, "tenax worker: error: the catalog is locked"));
  EXPECT_EQ("failed: exited with code 3: tenax worker: error: the catalog is locked", last["worker 1"]);
  const nlohmann::json faults = monitor.FaultsWithReactions();
  std::vector<std::string> unplanned;
  for (const auto& f : faults) {
    if (f.value("source", "") == "unplanned") unplanned.push_back(f.value("fault", ""));
  }
  EXPECT_EQ((std::vector<std::string>{"worker 1 failed on its own (exit code 3)"}), unplanned) << faults.dump(2);
}

// The coordinator SIGKILLed and restarted by the plan: its members keep
// their generation meanwhile, so the generation that forms next (here a
// worker's kill, later) is not the coordinator's reaction; the launcher
// following the restarted coordinator is. Before, summary.json answered
// "kill the coordinator" with "the other 2 workers re-formed as generation
// 2 ... (rank 0 lost)".
TEST(FaultInjectorTest, ACoordinatorKillIsAnsweredByItsRestartNotByAnotherFaultsGeneration) {
  testing::ScratchDir dir;
  RunMonitor monitor(dir / "metrics.jsonl", {});
  const pid_t p0 = 4000001, p1 = 4000002, p2 = 4000003, coordinator = 4000009, restarted = 4000010;
  monitor.AddWorker("worker 0", p0, "");
  monitor.AddWorker("worker 1", p1, "");
  monitor.AddWorker("worker 2", p2, "");
  auto name = [](pid_t p) { return "h/" + std::to_string(p); };
  monitor.OnGeneration({1, {0, 1, 2}, {{0, name(p0)}, {1, name(p1)}, {2, name(p2)}}, "first generation: 3 workers"});
  monitor.OnFaultRecord(nlohmann::json{
      {"event", "fault"}, {"action", "kill"}, {"coordinator", true}, {"pid", coordinator}, {"step", 100}});
  monitor.OnFaultRecord(nlohmann::json{
      {"event", "fault"}, {"action", "restart"}, {"coordinator", true}, {"pid", restarted}, {"step", 100}});
  monitor.OnCoordinatorFollowed();
  monitor.OnFaultRecord(nlohmann::json{{"event", "fault"}, {"action", "kill"}, {"worker", 0}, {"pid", p0}, {"step", 150}});
  monitor.OnGeneration({2, {1, 2}, {{1, name(p1)}, {2, name(p2)}}, "rank 0 lost"});
  const nlohmann::json faults = monitor.FaultsWithReactions();
  ASSERT_EQ(3u, faults.size()) << faults.dump(2);
  EXPECT_EQ("kill the coordinator", faults[0].value("fault", ""));
  EXPECT_EQ(0u, faults[0].value("reaction", "").find("restarted on its state file; the launcher followed it "))
      << faults[0].dump(2);
  EXPECT_TRUE(faults[0].value("recovered", false));
  EXPECT_EQ("restart the coordinator", faults[1].value("fault", ""));
  EXPECT_EQ("it resumed the job from its state file; the launcher followed it", faults[1].value("reaction", ""));
  EXPECT_EQ("kill worker 0", faults[2].value("fault", ""));
  EXPECT_EQ("the other 2 workers re-formed as generation 2 and went on (rank 0 lost)", faults[2].value("reaction", ""));
}

// summary.json's faults: the injector's records with their reactions, and
// past them the reactions alone (a worker's own failure, with no step).
// Every entry is valid JSON with the reaction's fields; nothing is made up
// for a key the reaction lacks (reading it once wrote `"step": ,`).
TEST(FaultInjectorTest, MergedFaultRecordsKeepOnlyWhatTheReactionsHave) {
  const nlohmann::json executed = nlohmann::json::array(
      {{{"event", "fault"}, {"action", "kill"}, {"worker", 0}, {"step", 40}, {"pid", 11}}});
  const nlohmann::json reactions = nlohmann::json::array(
      {{{"fault", "kill worker 0"}, {"target", "worker 0"}, {"reaction", "re-formed"}, {"recovered", true},
        {"recovered_seconds", 0.5}, {"time", 100.0}, {"action", "kill"}, {"step", 40}},
       {{"fault", "worker 1 failed on its own (exit code 2)"}, {"action", "failed"}, {"target", "worker 1"},
        {"source", "unplanned"}, {"reaction", "none observed before the job ended"}, {"recovered", false},
        {"recovered_seconds", nullptr}, {"time", 101.0}}});
  const nlohmann::json merged = MergeFaultRecords(executed, reactions);
  ASSERT_EQ(2u, merged.size()) << merged.dump();
  EXPECT_EQ(40, merged[0].value("step", 0));
  EXPECT_EQ(11, merged[0].value("pid", 0));
  EXPECT_EQ("re-formed", merged[0].value("reaction", ""));
  EXPECT_FALSE(merged[1].contains("step")) << merged[1].dump();
  EXPECT_EQ("failed", merged[1].value("action", ""));
  EXPECT_EQ("unplanned", merged[1].value("source", ""));
  // What summary.json gets parses back to the same entries.
  const auto parsed = nlohmann::json::parse(merged.dump(2), nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << merged.dump(2);
  EXPECT_EQ(merged, parsed);
}


// Link faults write the children's file: the windows in force, each link
// named by its hosts (placement's for workers), a partition as every link
// from its host to the others of its zone; a fault that names no link is
// recorded as not fired, with the reason.
TEST(FaultInjectorTest, LinkFaultsWriteTheWindowsEveryChildFollows) {
  testing::ScratchDir dir;
  ProcessSupervisor children("fault test", 5s);
  for (const char* name : {"worker 0", "worker 1", "worker 2"}) {
    ASSERT_TRUE(children.StartCaptured(name, {"sleep", "60"}).ok());
  }
  auto link = [](int64_t index, FaultAction action, int64_t step) {
    FaultSpec f = Stepped(index, action, -1, step);
    f.seconds = 2.5;
    return f;
  };
  FaultInjectorOptions o;
  o.plan.faults = {link(0, FaultAction::kSlowLink, 10), link(1, FaultAction::kPartition, 20),
                   link(2, FaultAction::kDropLink, 30), link(3, FaultAction::kDropLink, 30),
                   link(4, FaultAction::kSlowHost, 40)};
  o.plan.faults[0].link_workers = {0, 2};
  o.plan.faults[0].factor = 20;
  o.plan.faults[1].worker = 1;  // its host: a2, in za with a1 and a3
  o.plan.faults[2].link_workers = {0, 1};  // a1 and a2
  o.plan.faults[3].link_workers = {0, 3};  // worker 3 was placed nowhere
  o.plan.faults[4].worker = 2;             // its host b1: every link, in and out of its zone
  o.plan.faults[4].delay_ms = 20;
  o.workers = {0, 1, 2};
  o.link_faults_file = dir / "link_faults.json";
  o.zone_of_host = {{"a1", "za"}, {"a2", "za"}, {"a3", "za"}, {"b1", "zb"}};
  const std::map<int64_t, std::string> placed = {{0, "a1"}, {1, "a2"}, {2, "b1"}};
  o.host_of_worker = [&placed](int64_t w) { return placed.count(w) ? placed.at(w) : std::string(); };
  FaultInjector injector(children, o);
  injector.Start();
  auto book = [&]() -> net::LinkFaultBook {
    auto text = ReadFileText(dir / "link_faults.json", 1 << 20);
    if (!text.ok()) return {};
    auto b = net::LinkFaultBook::FromJson(*text);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? *b : net::LinkFaultBook{};
  };

  const int64_t before = net::WallMillis();
  injector.Poll(10);
  ASSERT_EQ(1u, injector.records().size());
  net::LinkFaultBook b = book();
  ASSERT_EQ(1u, b.faults.size());
  EXPECT_EQ("a1", b.faults[0].a);
  EXPECT_EQ("b1", b.faults[0].b);
  EXPECT_EQ(net::LinkFaultKind::kSlow, b.faults[0].kind);
  EXPECT_EQ(20, b.faults[0].factor);
  EXPECT_GE(b.faults[0].from_ms, before);
  EXPECT_EQ(2500, b.faults[0].until_ms - b.faults[0].from_ms);
  const auto& slow = injector.records()[0];
  EXPECT_EQ("fault", slow["event"]);
  EXPECT_EQ("slow_link", slow["action"]);
  EXPECT_EQ((std::vector<std::string>{"a1", "b1"}), slow["hosts"].get<std::vector<std::string>>());
  EXPECT_EQ(2.5, slow["seconds"]);
  EXPECT_EQ(20, slow["factor"]);
  EXPECT_FALSE(slow.contains("worker")) << "a link fault names hosts, not a worker: " << slow.dump();

  injector.Poll(20);  // the partition: a2 from a1 and a3, not from b1
  b = book();
  ASSERT_EQ(3u, b.faults.size()) << "the slow link is still in force";
  std::set<std::string> cut;
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ("a2", b.faults[i].a);
    EXPECT_EQ(net::LinkFaultKind::kDrop, b.faults[i].kind);
    cut.insert(b.faults[i].b);
  }
  EXPECT_EQ((std::set<std::string>{"a1", "a3"}), cut);
  EXPECT_EQ((std::vector<std::string>{"a2"}), injector.records()[1]["hosts"].get<std::vector<std::string>>());
  auto partition = records::FaultFrom(injector.records()[1]);
  ASSERT_TRUE(partition.has_value());
  EXPECT_EQ("host a2 (from its zone)", records::TargetName(*partition));

  injector.Poll(30);
  ASSERT_EQ(4u, injector.records().size());
  EXPECT_EQ("fault", injector.records()[2]["event"]);
  EXPECT_EQ(4u, book().faults.size());
  const auto& nowhere = injector.records()[3];
  EXPECT_EQ("fault_not_fired", nowhere["event"]);
  EXPECT_NE(std::string::npos, nowhere["reason"].get<std::string>().find("worker 3 was placed on no emulated host"))
      << nowhere.dump();

  injector.Poll(40);  // a bad NIC on b1: its 3 links, 10x slower and 20 ms more each way
  ASSERT_EQ(5u, injector.records().size());
  b = book();
  std::set<std::string> slowed;
  for (const auto& f : b.faults) {
    if (f.a != "b1") continue;
    EXPECT_EQ(net::LinkFaultKind::kSlow, f.kind);
    EXPECT_EQ(10, f.factor);
    EXPECT_EQ(20, f.delay_ms);
    slowed.insert(f.b);
  }
  EXPECT_EQ((std::set<std::string>{"a1", "a2", "a3"}), slowed);
  auto nic = records::FaultFrom(injector.records()[4]);
  ASSERT_TRUE(nic.has_value());
  EXPECT_EQ("host b1 (every link)", records::TargetName(*nic));
  EXPECT_EQ(20, nic->delay_ms.value_or(0));
  injector.Finish(40);
}

TEST(FaultInjectorTest, ALinkFaultWithoutATopologyOrALinkIsNotFiredAndSaysWhy) {
  ProcessSupervisor children("fault test", 5s);
  ASSERT_TRUE(children.StartCaptured("worker 0", {"sleep", "60"}).ok());
  FaultSpec f = Stepped(0, FaultAction::kDropLink, -1, 1);
  f.link_workers = {0, 1};
  f.seconds = 1;
  FaultInjectorOptions o;
  o.plan.faults = {f};
  o.workers = {0};
  {
    FaultInjector injector(children, o);  // no link-fault file: no topology
    injector.Start();
    injector.Poll(1);
    ASSERT_EQ(1u, injector.records().size());
    EXPECT_EQ("fault_not_fired", injector.records()[0]["event"]);
    EXPECT_NE(std::string::npos, injector.records()[0]["reason"].get<std::string>().find("no emulated topology"));
  }
  testing::ScratchDir dir;
  o.link_faults_file = dir / "link_faults.json";
  o.zone_of_host = {{"a1", "za"}};
  o.host_of_worker = [](int64_t) { return std::string("a1"); };  // both on one host
  FaultInjector injector(children, o);
  injector.Start();
  injector.Poll(1);
  ASSERT_EQ(1u, injector.records().size());
  EXPECT_EQ("fault_not_fired", injector.records()[0]["event"]);
  EXPECT_NE(std::string::npos, injector.records()[0]["reason"].get<std::string>().find("both ends are on host a1"))
      << injector.records()[0].dump();
  EXPECT_FALSE(std::filesystem::exists(dir / "link_faults.json")) << "nothing written for a fault that did not fire";
}

}  // namespace
}  // namespace tenax

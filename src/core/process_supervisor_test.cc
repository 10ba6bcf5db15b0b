// ProcessSupervisor with real child processes (/bin/sh scripts): failures
// named with their last lines, SIGTERM then SIGKILL, deadlines, interrupts,
// captured output larger than a pipe, and every child reaped.
#include "tenax/core/process_supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "testing.h"

namespace tenax {
namespace {

using namespace std::chrono_literals;
using testing::ScratchDir;

std::vector<std::string> Sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

// The pid is neither our unreaped child nor a running process.
void ExpectReaped(pid_t pid) {
  ASSERT_GT(pid, 0);
  errno = 0;
  EXPECT_EQ(-1, ::waitpid(pid, nullptr, WNOHANG)) << "pid " << pid << " was still ours to reap";
  EXPECT_EQ(ECHILD, errno) << "pid " << pid;
  errno = 0;
  EXPECT_EQ(-1, ::kill(pid, 0)) << "pid " << pid << " still exists";
  EXPECT_EQ(ESRCH, errno) << "pid " << pid;
}

void ExpectAllReaped(const ProcessSupervisor& sup) {
  for (size_t i = 0; i < sup.size(); ++i) ExpectReaped(sup.pid(i));
}

TEST(ProcessSupervisorTest, FirstFailureIsNamedWithTheLastLinesOfItsLog) {
  ScratchDir dir;
  ProcessSupervisor sup("job test", 5s);
  auto fine = sup.StartLogged("fine", Sh("echo fine"), dir / "fine.log");
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  auto slow = sup.StartLogged("slow", Sh("exec sleep 60"), dir / "slow.log");
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  // "bad" fails only once "fine" has written its line: on a loaded machine
  // (ctest -j2) "bad" could otherwise fail first, and the supervisor would
  // stop "fine" before it ran (CI saw exit 143 and an empty fine.log). The
  // wait is bounded: 10 s, then exit 9, which fails the test below.
  const std::string fine_log = dir / "fine.log";
  auto bad = sup.StartLogged("bad",
                             Sh("n=0; until grep -q fine '" + fine_log + "'; do n=$((n+1)); [ $n -gt 1000 ] && exit 9; "
                                "sleep 0.01; done; i=1; while [ $i -le 7 ]; do echo line $i; i=$((i+1)); done; exit 3"),
                             dir / "bad.log");
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_EQ(2u, *bad);

  const Status st = sup.WaitAll(Deadline::After(60s));
  EXPECT_EQ(StatusCode::kInternal, st.code()) << st.ToString();
  EXPECT_NE(std::string::npos, st.message().find("bad exited with code 3; its log (" + dir / "bad.log" + ") ends:"))
      << st.message();
  EXPECT_NE(std::string::npos, st.message().find("\n    line 7")) << st.message();
  EXPECT_EQ(std::string::npos, st.message().find("line 2")) << st.message();

  const std::optional<ChildFailure> f = sup.FirstFailure();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ("bad", f->name);
  EXPECT_EQ(3, f->exit_code);
  EXPECT_EQ(dir / "bad.log", f->log_path);
  EXPECT_EQ((std::vector<std::string>{"line 3", "line 4", "line 5", "line 6", "line 7"}), f->last_lines);
  // The others: one finished, one was stopped by the supervisor (SIGTERM), which is not a failure.
  EXPECT_EQ(std::optional<int>(0), sup.exit_code(0));
  EXPECT_EQ(std::optional<int>(128 + SIGTERM), sup.exit_code(1));
  EXPECT_EQ("fine\n", testing::ReadText(dir / "fine.log"));
  ExpectAllReaped(sup);
}

TEST(ProcessSupervisorTest, StopKillsAChildIgnoringSigtermAfterTheGracePeriod) {
  ProcessSupervisor sup("stop test", 300ms);
  auto polite = sup.StartCaptured("polite", Sh("echo ready; exec sleep 60"));
  ASSERT_TRUE(polite.ok()) << polite.status().ToString();
  auto stubborn = sup.StartCaptured("stubborn", Sh("trap '' TERM; echo ready; exec sleep 60"));
  ASSERT_TRUE(stubborn.ok()) << stubborn.status().ToString();
  for (size_t i : {*polite, *stubborn}) {
    auto line = sup.WaitForLine(i, "ready", Deadline::After(30s));  // the trap is set before this line
    ASSERT_TRUE(line.ok()) << line.status().ToString();
    EXPECT_EQ("ready", *line);
  }

  const auto start = SteadyClock::now();
  sup.Stop();
  const auto took = SteadyClock::now() - start;
  EXPECT_EQ(std::optional<int>(128 + SIGTERM), sup.exit_code(*polite));
  EXPECT_EQ(std::optional<int>(128 + SIGKILL), sup.exit_code(*stubborn));
  EXPECT_GE(took, 300ms);  // SIGKILL only after the grace period
  EXPECT_FALSE(sup.FirstFailure().has_value()) << "children stopped by the supervisor are not failures";
  ExpectAllReaped(sup);
  sup.Stop();  // idempotent
  EXPECT_EQ(std::optional<int>(128 + SIGKILL), sup.exit_code(*stubborn));
}

TEST(ProcessSupervisorTest, WaitAllDeadlineStopsAndNamesTheChildrenStillRunning) {
  ProcessSupervisor sup("deadline test", 5s);
  ASSERT_TRUE(sup.StartCaptured("quick", Sh("exit 0")).ok());
  ASSERT_TRUE(sup.StartCaptured("sleeper", Sh("exec sleep 60")).ok());

  const auto start = SteadyClock::now();
  const Status st = sup.WaitAll(Deadline::After(200ms));
  const auto took = SteadyClock::now() - start;
  EXPECT_EQ(StatusCode::kDeadlineExceeded, st.code()) << st.ToString();
  EXPECT_EQ("deadline test: sleeper still running at the deadline", st.message());
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 5s) << "the sleeper should have ended at SIGTERM, not at SIGKILL";
  EXPECT_EQ(std::optional<int>(0), sup.exit_code(0));
  EXPECT_EQ(std::optional<int>(128 + SIGTERM), sup.exit_code(1));
  ExpectAllReaped(sup);
}

TEST(ProcessSupervisorTest, CapturedOutputLargerThanAPipeKeepsEveryLineInOrder) {
  ProcessSupervisor sup("capture test", 5s);
  // About 170 KB: more than a pipe holds, so the child blocks unless the supervisor reads while waiting.
  ASSERT_TRUE(sup.StartCaptured("counter", Sh("seq 1 30000; printf 'no newline'")).ok());
  ASSERT_TRUE(sup.StartCaptured("quiet", Sh("exit 0")).ok());
  const Status st = sup.WaitAll(Deadline::After(60s));
  ASSERT_TRUE(st.ok()) << st.ToString();
  const std::vector<std::string>& lines = sup.Lines(0);
  ASSERT_EQ(30001u, lines.size());
  int64_t sum = 0;
  for (size_t i = 0; i < 30000; ++i) {
    ASSERT_EQ(std::to_string(i + 1), lines[i]) << "line " << i;
    sum += std::stoll(lines[i]);
  }
  EXPECT_EQ(int64_t{30000} * 30001 / 2, sum);
  EXPECT_EQ("no newline", lines.back());
  EXPECT_TRUE(sup.Lines(1).empty());
  ExpectAllReaped(sup);
}

// The nice value of every thread of `pid` (Linux keeps one per thread).
std::vector<int> NiceOfThreads(pid_t pid) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    errno = 0;
    const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(std::atol(task.path().filename().c_str())));
    if (errno == 0) out.push_back(nice);
  }
  return out;
}

// A spare started under `nice -n 19` (tenax run's cluster.spares) gets its
// priority back on admission: every thread, not only the main one.
TEST(ProcessSupervisorTest, SetNiceChangesEveryThreadOfTheChild) {
  ProcessSupervisor sup("nice test", 5s);
  auto index = sup.StartCaptured(
      "threads", {"nice", "-n", "19", "python3", "-c",
                  "import threading, time\n"
                  "ts = [threading.Thread(target=time.sleep, args=(60,), daemon=True) for _ in range(3)]\n"
                  "[t.start() for t in ts]\nprint('ready', flush=True)\ntime.sleep(60)\n"});
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  ASSERT_TRUE(sup.WaitForLine(*index, "ready", Deadline::After(30s)).ok());
  const pid_t pid = sup.pid(*index);
  EXPECT_EQ(std::vector<int>(4, 19), NiceOfThreads(pid)) << "nice passes to every thread";
  const Status st = sup.SetNice(*index, 0);
  if (::geteuid() == 0) {
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(std::vector<int>(4, 0), NiceOfThreads(pid));
  } else {  // lowering a nice value needs CAP_SYS_NICE: said, naming the child
    EXPECT_EQ(StatusCode::kIoError, st.code()) << st.ToString();
    EXPECT_NE(std::string::npos, st.message().find("threads (pid " + std::to_string(pid))) << st.ToString();
  }
  ASSERT_TRUE(sup.SetNice(*index, 19).ok()) << "raising is always allowed";
  EXPECT_EQ(std::vector<int>(4, 19), NiceOfThreads(pid));
  ASSERT_TRUE(sup.Signal(*index, SIGKILL).ok());
  sup.ExpectExit(*index);
  ASSERT_TRUE(sup.WaitForExit(*index, Deadline::After(30s)).ok());
  EXPECT_EQ(StatusCode::kFailedPrecondition, sup.SetNice(*index, 0).code()) << "an exited child is named, not reniced";
}

// The scheduling class of every thread of `pid`.
std::vector<int> PolicyOfThreads(pid_t pid) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const int policy = ::sched_getscheduler(static_cast<pid_t>(std::atol(task.path().filename().c_str())));
    if (policy >= 0) out.push_back(policy);
  }
  return out;
}

// A spare started mid-run waits in SCHED_IDLE (tenax run's cluster.spares)
// and trains, once admitted, in the normal class at the members' nice
// value: every thread, including one it starts after the move.
TEST(ProcessSupervisorTest, SetIdleMovesEveryThreadAndSetNiceBringsThemBack) {
  ProcessSupervisor sup("idle test", 5s);
  auto index = sup.StartCaptured(
      "threads", {"python3", "-c",
                  "import signal, threading, time\n"
                  "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])\n"
                  "ts = [threading.Thread(target=time.sleep, args=(60,), daemon=True) for _ in range(3)]\n"
                  "[t.start() for t in ts]\nprint('ready', flush=True)\n"
                  "signal.sigwait([signal.SIGUSR1])\n"
                  "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                  "print('fifth', flush=True)\ntime.sleep(60)\n"});
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  ASSERT_TRUE(sup.WaitForLine(*index, "ready", Deadline::After(30s)).ok());
  const pid_t pid = sup.pid(*index);
  EXPECT_EQ(std::vector<int>(4, SCHED_OTHER), PolicyOfThreads(pid));
  ASSERT_TRUE(sup.SetIdle(*index).ok());
  EXPECT_EQ(std::vector<int>(4, SCHED_IDLE), PolicyOfThreads(pid));
  ASSERT_TRUE(sup.Signal(*index, SIGUSR1).ok());  // it starts a fifth thread
  ASSERT_TRUE(sup.WaitForLine(*index, "fifth", Deadline::After(30s)).ok());
  EXPECT_EQ(std::vector<int>(5, SCHED_IDLE), PolicyOfThreads(pid)) << "a thread made later inherits the class";
  const Status st = sup.SetNice(*index, 3);
  if (::geteuid() == 0) {
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(std::vector<int>(5, SCHED_OTHER), PolicyOfThreads(pid));
    EXPECT_EQ(std::vector<int>(5, 3), NiceOfThreads(pid));
  } else {  // without RLIMIT_NICE leaving SCHED_IDLE is refused: said, naming the child
    EXPECT_NE(std::string::npos, st.message().find("threads (pid " + std::to_string(pid))) << st.ToString();
  }
  ASSERT_TRUE(sup.Signal(*index, SIGKILL).ok());
  sup.ExpectExit(*index);
  ASSERT_TRUE(sup.WaitForExit(*index, Deadline::After(30s)).ok());
  EXPECT_EQ(StatusCode::kFailedPrecondition, sup.SetIdle(*index).code()) << "an exited child is named";
}

TEST(ProcessSupervisorTest, AFailedInterruptStopsEveryChildWithItsStatus) {
  ProcessSupervisor sup("interrupt test", 5s);
  ASSERT_TRUE(sup.StartCaptured("a", Sh("exec sleep 60")).ok());
  ASSERT_TRUE(sup.StartCaptured("b", Sh("exec sleep 60")).ok());
  int calls = 0;
  const Status st = sup.WaitAll(Deadline::After(60s), [&calls]() -> Status {
    return ++calls >= 3 ? Cancelled("stopped by signal 2") : Status::Ok();
  });
  EXPECT_EQ(StatusCode::kCancelled, st.code()) << st.ToString();
  EXPECT_EQ("stopped by signal 2", st.message());
  EXPECT_EQ(3, calls);
  EXPECT_EQ(std::optional<int>(128 + SIGTERM), sup.exit_code(0));
  EXPECT_EQ(std::optional<int>(128 + SIGTERM), sup.exit_code(1));
  ExpectAllReaped(sup);
}

TEST(ProcessSupervisorTest, CapturedFailureReportsTheEndOfItsOutput) {
  ProcessSupervisor sup("captured failure", 5s, 2);
  ASSERT_TRUE(sup.StartCaptured("rank 0", Sh("echo a; echo b; printf c; exit 9")).ok());
  auto line = sup.WaitForLine(0, "never printed", Deadline::After(60s));
  EXPECT_EQ(StatusCode::kUnavailable, line.status().code()) << line.status().ToString();
  EXPECT_NE(std::string::npos,
            line.status().message().find("rank 0 exited with code 9; its output ends:\n    b\n    c"))
      << line.status().message();
  const Status st = sup.WaitAll(Deadline::After(60s));
  EXPECT_EQ("captured failure: rank 0 exited with code 9; its output ends:\n    b\n    c", st.message());
  EXPECT_EQ((std::vector<std::string>{"a", "b", "c"}), sup.Lines(0));
  ExpectAllReaped(sup);
}

TEST(ProcessSupervisorTest, TheDestructorStopsAndReapsRunningChildren) {
  pid_t pid = -1;
  {
    ProcessSupervisor sup("scoped", 5s);
    ASSERT_TRUE(sup.StartCaptured("sleeper", Sh("exec sleep 60")).ok());
    pid = sup.pid(0);
    ASSERT_EQ(0, ::kill(pid, 0)) << "running before the scope ends";
  }
  ExpectReaped(pid);
}

// Fault injection: the owner signals children on purpose. An expected exit
// is no failure; an untouched child's failure still is.
TEST(ProcessSupervisorTest, SignalledChildrenWhoseExitIsExpectedAreNotFailures) {
  ProcessSupervisor sup("signal test", 5s);
  const auto killed = sup.StartCaptured("killed", Sh("exec sleep 60"));
  const auto bystander = sup.StartCaptured("bystander", Sh("exec sleep 60"));
  ASSERT_TRUE(killed.ok() && bystander.ok());

  ASSERT_TRUE(sup.Signal(*killed, SIGKILL).ok());
  sup.ExpectExit(*killed);
  auto code = sup.WaitForExit(*killed, Deadline::After(30s));
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(128 + SIGKILL, *code);
  EXPECT_FALSE(sup.FirstFailure().has_value()) << "an expected exit is not a failure";
  EXPECT_EQ(std::nullopt, sup.exit_code(*bystander));
  const Status again = sup.Signal(*killed, SIGKILL);
  EXPECT_EQ(StatusCode::kFailedPrecondition, again.code()) << again.ToString();
  EXPECT_NE(std::string::npos,
            again.message().find("killed (pid " + std::to_string(sup.pid(*killed)) + ") already exited with code 137"))
      << again.message();
  auto still = sup.WaitForExit(*bystander, Deadline::After(50ms));
  EXPECT_EQ(StatusCode::kDeadlineExceeded, still.status().code()) << still.status().ToString();

  // A child started after others exited (a replacement) is watched like the first ones.
  const auto late = sup.StartCaptured("late", Sh("echo late; exit 4"));
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  auto late_code = sup.WaitForExit(*late, Deadline::After(30s));
  ASSERT_TRUE(late_code.ok()) << late_code.status().ToString();
  EXPECT_EQ(4, *late_code);
  ASSERT_TRUE(sup.Signal(*bystander, SIGKILL).ok());  // not expected: a failure too, after late's
  const Status st = sup.WaitAll(Deadline::After(30s));
  EXPECT_EQ(StatusCode::kInternal, st.code()) << st.ToString();
  EXPECT_EQ("signal test: late exited with code 4; its output ends:\n    late", st.message());
  EXPECT_EQ(std::optional<int>(128 + SIGKILL), sup.exit_code(*bystander));
  ExpectAllReaped(sup);
}

TEST(ProcessSupervisorTest, AProgramThatCannotStartIsNamed) {
  ScratchDir dir;
  ProcessSupervisor sup("start test", 5s);
  auto missing = sup.StartLogged("ghost", {"/nonexistent/program"}, dir / "ghost.log");
  EXPECT_EQ(StatusCode::kNotFound, missing.status().code()) << missing.status().ToString();
  EXPECT_NE(std::string::npos, missing.status().message().find("start test: ghost: /nonexistent/program: cannot start"))
      << missing.status().message();
  auto unknown = sup.StartCaptured("nobody", {"tenax-no-such-program"});
  EXPECT_EQ(StatusCode::kNotFound, unknown.status().code()) << unknown.status().ToString();
  EXPECT_EQ(0u, sup.size());
  // PATH is searched for bare names.
  auto echo = sup.StartCaptured("echo", {"echo", "from", "PATH"});
  ASSERT_TRUE(echo.ok()) << echo.status().ToString();
  ASSERT_TRUE(sup.WaitAll(Deadline::After(60s)).ok());
  EXPECT_EQ((std::vector<std::string>{"from PATH"}), sup.Lines(*echo));
  ExpectAllReaped(sup);
}

}  // namespace
}  // namespace tenax

// The test helpers themselves: a failed Status or Result fails the test with
// its message (and never aborts the binary).
#include "testing.h"

#include <gtest/gtest-spi.h>

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax {
namespace {

Result<int> Answer(bool ok) {
  if (ok) return 42;
  return NotFound("answer.txt: no such file");
}

TEST(TestingMacros, AssertOkPassesOnOkStatusAndResult) {
  ASSERT_OK(Status::Ok());
  ASSERT_OK(Answer(true));
  EXPECT_OK(Answer(true));
}

TEST(TestingMacros, AssertOkFailsWithTheMessage) {
  EXPECT_FATAL_FAILURE(ASSERT_OK(Answer(false)), "not_found: answer.txt: no such file");
  EXPECT_FATAL_FAILURE(ASSERT_OK(InvalidArgument("bad flag")), "invalid_argument: bad flag");
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(Answer(false)), "answer.txt: no such file");
}

TEST(TestingMacros, AssertOkAndAssignGivesTheValue) {
  ASSERT_OK_AND_ASSIGN(int v, Answer(true));
  EXPECT_EQ(v, 42);
  ASSERT_OK_AND_ASSIGN(v, Answer(true));  // assigns an existing variable
  EXPECT_EQ(v, 42);
}

TEST(TestingMacros, AssertOkAndAssignFailsAndReturns) {
  static bool reached = false;
  EXPECT_FATAL_FAILURE(
      {
        ASSERT_OK_AND_ASSIGN(int v, Answer(false));
        reached = v != 0;
      },
      "answer.txt: no such file");
  EXPECT_FALSE(reached);
}

std::string Describe(bool ok) {
  ASSIGN_OK_OR_RETURN(int v, Answer(ok), "failed");
  return std::to_string(v);
}

void DescribeVoid(bool ok, std::string* out) {
  ASSIGN_OK_OR_RETURN(int v, Answer(ok));
  *out = std::to_string(v);
}

TEST(TestingMacros, AssignOkOrReturnWorksInNonVoidFunctions) {
  EXPECT_EQ(Describe(true), "42");
  std::string s = "unchanged";
  EXPECT_NONFATAL_FAILURE(s = Describe(false), "answer.txt: no such file");
  EXPECT_EQ(s, "failed");
  std::string out = "unchanged";
  DescribeVoid(true, &out);
  EXPECT_EQ(out, "42");
  out = "unchanged";
  EXPECT_NONFATAL_FAILURE(DescribeVoid(false, &out), "answer.txt: no such file");
  EXPECT_EQ(out, "unchanged");
}

}  // namespace
}  // namespace tenax

namespace tenax::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(TestingChildren, RunProcessCapturesBothStreamsAndTheExitCode) {
  auto r = RunProcess({"sh", "-c", "printf 'to out'; printf 'to err' >&2; exit 7"});
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.out, "to out");
  EXPECT_EQ(r.err, "to err");
}

TEST(TestingChildren, RunProcessKillsAChildPastItsDeadlineAndKeepsItsOutput) {
  static ProcessResult r;
  const auto start = Clock::now();
  EXPECT_NONFATAL_FAILURE(r = RunProcess({"sh", "-c", "echo partial; echo half >&2; exec sleep 60"}, 300ms),
                          "did not finish within 0.3 s");
  EXPECT_LT(Clock::now() - start, 20s);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_EQ(r.out, "partial\n");
  EXPECT_EQ(r.err, "half\n");
}

TEST(TestingChildren, WaitForStderrLineFindsTheLineOrFailsAtTheDeadline) {
  static std::unique_ptr<Child> child;
  child = std::make_unique<Child>(std::vector<std::string>{"sh", "-c", "echo one >&2; echo two >&2; exec sleep 60"});
  EXPECT_TRUE(child->WaitForStderrLine("two"));
  EXPECT_EQ(child->stderr_text(), "one\ntwo\n");
  const auto start = Clock::now();
  static bool found = true;
  EXPECT_NONFATAL_FAILURE(found = child->WaitForStderrLine("three", 300ms),
                          "no stderr line containing 'three' within 0.3 s");
  EXPECT_FALSE(found);
  EXPECT_EQ(child->Wait(5s), 128 + SIGKILL);  // killed at the deadline, reaped
  EXPECT_LT(Clock::now() - start, 20s);
  child.reset();
}

TEST(TestingChildren, WaitEndsAtItsDeadline) {
  static std::unique_ptr<Child> child;
  child = std::make_unique<Child>(std::vector<std::string>{"sh", "-c", "echo started >&2; exec sleep 60"});
  ASSERT_TRUE(child->WaitForStderrLine("started"));
  static int code = 0;
  EXPECT_NONFATAL_FAILURE(code = child->Wait(300ms), "did not close stderr within 0.3 s");
  EXPECT_EQ(code, 128 + SIGKILL);
  child.reset();
}

TEST(TestingChildren, WaitForExitEndsAtItsDeadline) {
  static std::unique_ptr<Child> child;
  child = std::make_unique<Child>(std::vector<std::string>{"sh", "-c", "exec 2>&-; exec sleep 60"});
  static int code = 0;
  EXPECT_NONFATAL_FAILURE(code = child->Wait(300ms), "did not exit within 0.3 s");
  EXPECT_EQ(code, 128 + SIGKILL);
  child.reset();
}

TEST(TestingChildren, WaitReturnsTheExitCodeOfAChildThatEnds) {
  Child child({"sh", "-c", "echo bye >&2; exit 3"});
  EXPECT_EQ(child.Wait(), 3);
  EXPECT_EQ(child.stderr_text(), "bye\n");
  EXPECT_FALSE(child.WaitForStderrLine("anything"));  // stream ended
}

}  // namespace
}  // namespace tenax::testing

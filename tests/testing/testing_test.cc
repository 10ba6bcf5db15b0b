// The test helpers themselves: a failed Status or Result fails the test with
// its message (and never aborts the binary).
#include "testing.h"

#include <gtest/gtest-spi.h>

#include <string>

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

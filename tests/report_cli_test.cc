// `tenax report DIR` end to end: the real binary on the recorded run
// (tests/data/report_run) and on directories that are not runs: what the
// user sees (the line naming the file, exit codes, one error line).
#include <gtest/gtest.h>

#include <filesystem>

#include "testing.h"

namespace tenax {
namespace {

using testing::ProcessResult;
using testing::RunProcess;
using testing::ScratchDir;
using testing::TenaxBinary;

const std::string kFixture = std::string(TENAX_SOURCE_DIR) + "/tests/data/report_run";

ProcessResult Report(std::vector<std::string> args) {
  std::vector<std::string> argv = {TenaxBinary(), "report"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, std::chrono::seconds(60));
}

// Lines of `text` (the last one without its newline).
size_t LineCount(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

TEST(ReportCli, WritesTheReportIntoTheRunDirectory) {
  ScratchDir dir;
  const std::string run = dir / "run";
  std::filesystem::copy(kFixture, run, std::filesystem::copy_options::recursive);
  ProcessResult r = Report({run});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + run + "/report.html (5 charts with data, 15 events)\n");
  EXPECT_EQ(r.err, "");
  const std::string html = testing::ReadText(run + "/report.html");
  EXPECT_NE(html.find("data-chart=\"accuracy\" data-points=\"8\""), std::string::npos);
  EXPECT_NE(html.find("data-chart=\"workers\" data-points=\"33\""), std::string::npos);

  // --out elsewhere; an unfinished run says so.
  std::filesystem::remove(run + "/summary.json");
  r = Report({run, "--out", dir / "page.html"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + (dir / "page.html") + " (3 charts with data, 15 events; the run did not finish)\n");
  EXPECT_NE(testing::ReadText(dir / "page.html").find("The run did not finish"), std::string::npos);
}

TEST(ReportCli, BadInputGetsOneClearLineAndExit2) {
  ScratchDir dir;
  ProcessResult r = Report({dir.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tenax report: error: " + dir.path() + " has no metrics.jsonl: is it a tenax run directory?\n");
  EXPECT_EQ(r.out, "");

  r = Report({dir / "missing"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tenax report: error: " + (dir / "missing") +
                       ": no such directory: name the --out DIR of a `tenax run`\n");

  // A run whose report cannot be written: the path and the reason.
  std::filesystem::copy(kFixture, dir / "run", std::filesystem::copy_options::recursive);
  r = Report({dir / "run", "--out", dir / "no/such/dir/r.html"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(LineCount(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("tenax report: error: " + (dir / "no/such/dir/r.html")), std::string::npos) << r.err;

  r = Report({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(LineCount(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("dir is required"), std::string::npos) << r.err;

  r = Report({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--out FILE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("docs/report.md"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tenax

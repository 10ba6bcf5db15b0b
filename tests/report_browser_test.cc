// The report in a real browser: Debian's chromium, headless, renders the page
// `tenax report` wrote for the recorded run (tests/data/report_run). The
// page's own script counts the marks the browser laid out in every chart
// (#render-check); the test reads that from the rendered DOM, checks that
// the numbers the page shows are the run's (summary.json), and writes a
// screenshot into the build's test output directory for people to look at.
//
// chromium is required (scripts/install-deps.sh installs it): without it the
// test fails. Every browser process gets a deadline; its whole process group
// is killed when it ends or overruns, so no helper process outlives the test.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "testing.h"

namespace tenax {
namespace {

using testing::ScratchDir;

constexpr const char* kChromium = "/usr/bin/chromium";
const std::string kFixture = std::string(TENAX_SOURCE_DIR) + "/tests/data/report_run";
constexpr auto kBrowserDeadline = std::chrono::seconds(90);

struct BrowserResult {
  int exit_code = -1;  // 128 + signal if killed
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv in its own process group with stdout and stderr in files (a
// browser's helpers may keep pipes open after it exits), waits on a pidfd
// until `deadline`, then kills whatever is left of the group and reaps.
BrowserResult RunBrowser(const std::vector<std::string>& argv, const std::string& scratch) {
  BrowserResult r;
  const std::string out_path = scratch + "/browser.out", err_path = scratch + "/browser.err";
  const pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return r;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(126);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with the first kill below
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  const auto deadline = std::chrono::steady_clock::now() + kBrowserDeadline;
  bool exited = false;
  while (pidfd >= 0 && !exited) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{pidfd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready > 0) exited = true;
    if (ready < 0 && errno != EINTR) break;
  }
  if (pidfd >= 0) ::close(pidfd);
  r.timed_out = !exited;
  ::kill(-pid, SIGKILL);  // the browser's helpers, and the browser itself if it overran
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = testing::ReadText(out_path);
  r.err = testing::ReadText(err_path);
  if (r.timed_out) {
    ADD_FAILURE() << argv[0] << " did not finish within " << kBrowserDeadline.count() << " s; killed it.\nstderr:\n"
                  << r.err;
  }
  return r;
}

std::vector<std::string> ChromiumArgs(const std::string& user_data_dir) {
  return {kChromium,
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-dev-shm-usage",
          "--disable-background-networking",
          "--no-first-run",
          "--user-data-dir=" + user_data_dir,
          "--virtual-time-budget=5000"};
}

class ReportBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(kChromium, X_OK), 0)
        << kChromium << " is required for the report's browser check: install Debian's chromium "
        << "(scripts/install-deps.sh does)";
    run_ = scratch_ / "run";
    std::filesystem::copy(kFixture, run_, std::filesystem::copy_options::recursive);
    // The real command writes the page.
    testing::ProcessResult r = testing::RunProcess({testing::TenaxBinary(), "report", run_}, std::chrono::seconds(60));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    page_ = run_ + "/report.html";
    ASSERT_TRUE(std::filesystem::exists(page_));
  }

  ScratchDir scratch_;
  std::string run_;
  std::string page_;
};

TEST_F(ReportBrowserTest, EveryChartRendersItsMarks) {
  std::vector<std::string> argv = ChromiumArgs(scratch_ / "profile-dom");
  argv.push_back("--dump-dom");
  argv.push_back("file://" + page_);
  BrowserResult b = RunBrowser(argv, scratch_.path());
  ASSERT_FALSE(b.timed_out);
  ASSERT_EQ(b.exit_code, 0) << b.err;

  std::smatch pre;
  ASSERT_TRUE(std::regex_search(b.out, pre, std::regex("<pre id=\"render-check\">([^<]*)</pre>")))
      << "no #render-check in the rendered DOM:\n"
      << b.out.substr(0, 2000);
  const std::string check = pre[1];
  std::cout << "render check:\n" << check << "\n";
  std::map<std::string, std::pair<long, long>> charts;  // name -> (marks laid out, data-points)
  const std::regex line("chart=([a-z]+) marks=([0-9]+) points=([0-9]+)");
  for (auto it = std::sregex_iterator(check.begin(), check.end(), line); it != std::sregex_iterator(); ++it) {
    charts[(*it)[1]] = {std::stol((*it)[2]), std::stol((*it)[3])};
  }
  // The data-points the page declares (html_report_test checks them against the run).
  const std::map<std::string, long> expected = {
      {"accuracy", 8}, {"loss", 48}, {"workers", 33}, {"bytes", 3}, {"cost", 3}};
  EXPECT_EQ(charts.size(), expected.size()) << check;
  for (const auto& [name, points] : expected) {
    SCOPED_TRACE(name);
    auto c = charts.find(name);
    ASSERT_NE(c, charts.end()) << check;
    EXPECT_GT(c->second.first, 0);
    EXPECT_EQ(c->second.second, points);
    EXPECT_EQ(c->second.first, c->second.second) << "every mark the page declares is laid out by the browser";
  }
}

// The text of the first match of `re`'s group 1 in `text`, entities the
// DOM serializer writes decoded; "" when there is none.
std::string Find(const std::string& text, const std::regex& re, int group = 1) {
  std::smatch m;
  if (!std::regex_search(text, m, re)) return "";
  std::string v = m[group];
  for (const auto& [entity, c] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&nbsp;", " "}, {"&amp;", "&"}}) {
    for (size_t at = v.find(entity); at != std::string::npos; at = v.find(entity, at + c.size())) {
      v.replace(at, entity.size(), c);
    }
  }
  return v;
}

std::string Percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", fraction * 100);
  return buf;
}

// What a person sees in the page, checked against the run's own
// summary.json rather than against Chromium: the DOM Chromium holds after
// the page loaded and its script ran (--dump-dom), then a screenshot of the
// same page in the build tree for people to look at (not checked: a PNG's
// header says nothing about tenax).
TEST_F(ReportBrowserTest, TheRenderedPageShowsTheRunsSummaryAndIsSavedAsAScreenshot) {
  auto summary = nlohmann::json::parse(testing::ReadText(kFixture + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object());

  std::vector<std::string> dump = ChromiumArgs(scratch_ / "profile-summary");
  dump.push_back("--window-size=1280,2400");
  dump.push_back("--dump-dom");
  dump.push_back("file://" + page_);
  BrowserResult d = RunBrowser(dump, scratch_.path());
  ASSERT_FALSE(d.timed_out);
  ASSERT_EQ(d.exit_code, 0) << d.err;
  const std::string& dom = d.out;
  ASSERT_NE(dom.find("<main>"), std::string::npos) << dom.substr(0, 2000);

  // The page's script ran in this DOM: it replaced the placeholder with one
  // line per chart.
  const std::string check = Find(dom, std::regex("<pre id=\"render-check\">([^<]*)</pre>"));
  EXPECT_EQ(check.find("did not run"), std::string::npos) << check;
  for (const char* chart : {"accuracy", "loss", "workers", "bytes", "cost"}) {
    EXPECT_NE(check.find(std::string("chart=") + chart + " "), std::string::npos) << chart << " in:\n" << check;
  }

  // The header: the job and its steps.
  EXPECT_EQ(Find(dom, std::regex("<h1>([^<]*)</h1>")), "tenax run: " + summary["job_id"].get<std::string>());
  const std::string sub = Find(dom, std::regex("<div class=\"sub\">([^<]*)</div>"));
  EXPECT_NE(sub.find(std::to_string(summary["steps"].get<int64_t>()) + " steps"), std::string::npos) << sub;
  EXPECT_NE(sub.find("model " + summary["model"].get<std::string>()), std::string::npos) << sub;

  // The headline cards: the accuracy against the reference, the faults, the cost.
  auto card = [&](const std::string& label, int group) {
    return Find(dom,
                std::regex("<div class=\"label\">" + label +
                           "</div><div class=\"value[^\"]*\">([^<]*)</div><div class=\"note\">([^<]*)</div>"),
                group);
  };
  EXPECT_EQ(card("Final test accuracy", 1), Percent(summary["final_test_accuracy"].get<double>()));
  EXPECT_NE(card("Final test accuracy", 2).find("fault-free reference " +
                                                Percent(summary["reference_test_accuracy"].get<double>())),
            std::string::npos)
      << card("Final test accuracy", 2);
  const auto& faults = summary["faults"];
  ASSERT_TRUE(faults.is_array() && !faults.empty()) << summary.dump();
  EXPECT_EQ(card("Faults injected", 1), std::to_string(faults.size()));  // none of them "unplanned"
  char cost[32];
  std::snprintf(cost, sizeof cost, "$%.4f", summary["cost"]["total"].get<double>());  // under $1: 4 digits
  EXPECT_EQ(card("Cost", 1), cost);

  // The faults table: every fault of the summary with its reaction, in order.
  const std::string table = Find(dom, std::regex("<section id=\"faults\">[\\s\\S]*?<tbody>([\\s\\S]*?)</tbody>"));
  std::vector<std::vector<std::string>> rows;
  const std::regex row("<tr>([\\s\\S]*?)</tr>"), cell("<td[^>]*>([^<]*)</td>");
  for (auto r = std::sregex_iterator(table.begin(), table.end(), row); r != std::sregex_iterator(); ++r) {
    const std::string cells = (*r)[1];
    rows.emplace_back();
    for (auto c = std::sregex_iterator(cells.begin(), cells.end(), cell); c != std::sregex_iterator(); ++c) {
      rows.back().push_back(Find((*c)[0].str(), cell));
    }
  }
  ASSERT_EQ(rows.size(), faults.size()) << table;
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(faults[i].dump());
    ASSERT_EQ(rows[i].size(), 4u) << table;
    EXPECT_EQ(rows[i][0], faults[i]["fault"].get<std::string>());
    EXPECT_EQ(rows[i][2], faults[i]["reaction"].get<std::string>());
  }

  // The screenshot, for people.
  const std::string out_dir = TENAX_REPORT_SHOT_DIR;
  std::filesystem::create_directories(out_dir);
  const std::string shot = out_dir + "/report.png";
  std::filesystem::remove(shot);
  std::filesystem::copy_file(page_, out_dir + "/report.html", std::filesystem::copy_options::overwrite_existing);
  std::vector<std::string> argv = ChromiumArgs(scratch_ / "profile-shot");
  argv.push_back("--screenshot=" + shot);
  argv.push_back("--window-size=1280,2400");
  argv.push_back("--hide-scrollbars");
  argv.push_back("file://" + page_);
  BrowserResult b = RunBrowser(argv, scratch_.path());
  ASSERT_FALSE(b.timed_out);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_TRUE(std::filesystem::exists(shot)) << "chromium wrote no screenshot:\n" << b.err;
  std::cout << "screenshot: " << shot << " (" << std::filesystem::file_size(shot) << " bytes)\n";
}

}  // namespace
}  // namespace tenax

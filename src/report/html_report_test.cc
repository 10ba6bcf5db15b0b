// The report page of the recorded run: every chart with the number of marks
// its data calls for, the headline numbers, escaped text, no external
// resource, and the atomic write.
#include "tenax/report/html_report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "tenax/core/files.h"
#include "testing.h"

namespace tenax::report {
namespace {

const std::string kFixture = std::string(TENAX_SOURCE_DIR) + "/tests/data/report_run";

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

// data-points of the chart named `name`, or -1 if the page has no such chart.
long DataPoints(const std::string& html, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(html, m, std::regex("data-chart=\"" + name + "\" data-points=\"([0-9]+)\""))) return -1;
  return std::stol(m[1]);
}

std::string FixtureHtml() {
  auto rec = LoadRunRecord(kFixture);
  EXPECT_TRUE(rec.ok()) << rec.status().ToString();
  return rec.ok() ? RenderReportHtml(*rec) : "";
}

TEST(HtmlReport, EveryChartOfTheRecordedRun) {
  const std::string html = FixtureHtml();
  EXPECT_EQ(Count(html, "<svg class=\"chart\""), 5u);
  EXPECT_EQ(DataPoints(html, "accuracy"), 8);  // 4 epochs, this run and the reference
  EXPECT_EQ(DataPoints(html, "loss"), 48);     // 24 logging intervals each
  EXPECT_EQ(DataPoints(html, "workers"), 33);  // 18 state segments + 15 event markers
  EXPECT_EQ(DataPoints(html, "bytes"), 3);     // gradients, models, recovery (shuffling moved 0 bytes)
  EXPECT_EQ(DataPoints(html, "cost"), 3);      // coordinator, storage, worker
  EXPECT_EQ(Count(html, ">no data"), 0u);
  // The sections in the order a reader wants them.
  const char* sections[] = {"Test accuracy vs time", "Training loss vs time", "Workers", "Bytes moved by purpose",
                            "Cost", "Faults and reactions", "Events", "Placement"};
  size_t at = 0;
  for (const char* s : sections) {
    at = html.find(std::string("<h2>") + s + "</h2>", at);
    EXPECT_NE(at, std::string::npos) << s;
    if (at == std::string::npos) break;
  }
}

TEST(HtmlReport, Headline) {
  const std::string html = FixtureHtml();
  EXPECT_NE(html.find("<h1>tenax run: cloud-demo</h1>"), std::string::npos);
  EXPECT_NE(html.find(">87.02%</div>"), std::string::npos);
  EXPECT_NE(html.find("fault-free reference 87.12% (-0.1 points)"), std::string::npos);
  EXPECT_NE(html.find(">4 min 1 s</div>"), std::string::npos);  // launcher_wall_seconds 241.2
  EXPECT_NE(html.find("Faults injected</div><div class=\"value\">4</div><div class=\"note\">4 of 4 recovered"),
            std::string::npos);
  EXPECT_NE(html.find(">$0.0213</div>"), std::string::npos);
  EXPECT_EQ(html.find("The run did not finish"), std::string::npos);
  // A worker that failed on its own is counted apart in the headline.
  {
    auto rec = LoadRunRecord(kFixture);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    FaultReaction own;
    own.fault = "worker 2 failed on its own (exit code 134)";
    own.reaction = "the other 3 workers re-formed as generation 3 and went on (rank 2 lost)";
    own.recovered = true;
    own.planned = false;
    rec->faults.push_back(own);
    EXPECT_NE(RenderReportHtml(*rec).find("Faults injected</div><div class=\"value warn\">4</div><div class=\"note\">5 of 5 "
                                          "recovered; 1 worker failure nobody planned"),
              std::string::npos);
  }
  // The faults table: reaction and time to recover.
  EXPECT_NE(html.find("<td>kill worker 1 at step 370</td><td class=\"num\">1:15</td><td>the job re-formed without "
                      "worker 1 (generation 2); its share moved to workers 0, 2, 3</td><td class=\"num\">1.20 s</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">21.0 s</td>"), std::string::npos);
  // The workers' legend names the states that occurred.
  for (const char* state : {"starting", "active", "slow", "preempted", "killed", "rejoining", "left", "done"}) {
    EXPECT_NE(html.find(std::string(">") + state + "</text>"), std::string::npos) << state;
  }
}

TEST(HtmlReport, RunTextIsEscaped) {
  const std::string html = FixtureHtml();
  // The notice "node-2 replaced: <script>alert('x')</script> & back in the ring".
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_NE(html.find("node-2 replaced: &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; back in the ring"),
            std::string::npos);
  EXPECT_EQ(Count(html, "<script"), 1u);  // the page's own render check only

  RunRecord r;
  r.dir = "<dir>";
  r.job_id = "job\"><img src=x onerror=alert(1)>";
  r.events.push_back({1, EventKind::kNotice, "</td></tr></table><b>", "worker 9"});
  r.workers.push_back({"<w>", {{0, 1, "<state>", "<host>", "&detail"}}});
  const std::string page = RenderReportHtml(r);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("<w>"), std::string::npos);
  EXPECT_EQ(page.find("<state>"), std::string::npos);
  EXPECT_EQ(page.find("</td></tr></table><b>"), std::string::npos);
  EXPECT_EQ(page.find("<dir>"), std::string::npos);
}

TEST(HtmlReport, SelfContained) {
  const std::string html = FixtureHtml();
  // The only URL is the SVG namespace name (an identifier, never fetched).
  std::string without_ns = html;
  for (size_t at; (at = without_ns.find("xmlns=\"http://www.w3.org/2000/svg\"")) != std::string::npos;) {
    without_ns.erase(at, 34);
  }
  for (const char* needle : {"http:", "https:", "src=", "href=", "url(", "@import", "<link", "<img", "<iframe"}) {
    EXPECT_EQ(without_ns.find(needle), std::string::npos) << needle;
  }
  EXPECT_NE(html.find("<pre id=\"render-check\">"), std::string::npos);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
}

TEST(HtmlReport, UnfinishedRunWithoutPrices) {
  testing::ScratchDir dir;
  std::filesystem::copy_file(kFixture + "/metrics.jsonl", dir / "metrics.jsonl");
  ASSERT_OK_AND_ASSIGN(RunRecord r, LoadRunRecord(dir.path()));
  const std::string html = RenderReportHtml(r);
  EXPECT_NE(html.find("The run did not finish</b> (no summary.json)"), std::string::npos);
  EXPECT_EQ(DataPoints(html, "accuracy"), 4);  // no reference beside it
  EXPECT_EQ(DataPoints(html, "cost"), 0);
  EXPECT_NE(html.find(">no data: no price table was given</text>"), std::string::npos);
  EXPECT_NE(html.find("No price table was given"), std::string::npos);
  EXPECT_EQ(DataPoints(html, "bytes"), 0);
  EXPECT_NE(html.find(">no data: the run did not finish</text>"), std::string::npos);
  EXPECT_NE(html.find("no fault-free reference run"), std::string::npos);
  EXPECT_NE(html.find("reactions not recorded"), std::string::npos);
}

TEST(HtmlReport, EmptyRunStillRenders) {
  RunFiles f;
  f.dir = "run";
  f.metrics = "";
  ASSERT_OK_AND_ASSIGN(RunRecord r, ParseRunRecord(f));
  const std::string html = RenderReportHtml(r);
  for (const char* chart : {"accuracy", "loss", "workers", "bytes", "cost"}) EXPECT_EQ(DataPoints(html, chart), 0);
  EXPECT_EQ(Count(html, ">no data"), 5u);
}

TEST(HtmlReport, WriteReportWritesThePageAtomically) {
  testing::ScratchDir dir;
  std::filesystem::copy(kFixture, dir.path(), std::filesystem::copy_options::recursive);
  ASSERT_OK_AND_ASSIGN(ReportWritten w, WriteReport(dir.path(), ""));
  EXPECT_EQ(w.path, dir / "report.html");
  EXPECT_EQ(w.charts_with_data, 5u);
  EXPECT_EQ(w.events, 15u);
  EXPECT_TRUE(w.finished);
  ASSERT_OK_AND_ASSIGN(RunRecord r, LoadRunRecord(dir.path()));
  EXPECT_EQ(testing::ReadText(w.path), RenderReportHtml(r));
  // No temporary file is left next to it.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 3u);  // metrics.jsonl, summary.json, report.html

  ASSERT_OK_AND_ASSIGN(ReportWritten other, WriteReport(dir.path(), dir / "elsewhere.html"));
  EXPECT_EQ(other.path, dir / "elsewhere.html");
  EXPECT_TRUE(std::filesystem::exists(other.path));

  auto bad = WriteReport(dir / "missing", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  auto unwritable = WriteReport(dir.path(), dir / "no/such/dir/report.html");
  ASSERT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.status().message().find("no/such/dir"), std::string::npos);
}

}  // namespace
}  // namespace tenax::report

// The Prometheus text renderer (exact output for a snapshot, escaping, one
// HELP and TYPE per family) and the progress book that feeds it.
#include "prometheus_text.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "progress_book.h"

namespace tenax::coord {
namespace {

TEST(PrometheusText, RendersFamiliesOnceEachWithTheirSamplesTogether) {
  PrometheusText t;
  t.Declare("a_total", MetricType::kCounter, "Things counted.");
  t.Declare("b", MetricType::kGauge, "A level.");
  t.Add("a_total", {{"k", "1"}}, 3);
  t.Add("b", {}, 0.25);
  t.Add("a_total", {{"k", "2"}}, 4);  // after b's sample: still written with a's
  t.Declare("a_total", MetricType::kGauge, "ignored: declared already");
  EXPECT_EQ(
      "# HELP a_total Things counted.\n"
      "# TYPE a_total counter\n"
      "a_total{k=\"1\"} 3\n"
      "a_total{k=\"2\"} 4\n"
      "# HELP b A level.\n"
      "# TYPE b gauge\n"
      "b 0.25\n",
      t.Render());
}

TEST(PrometheusText, UndeclaredFamilyIsUntypedAndDeclaredEmptyFamilyKeepsItsHeader) {
  PrometheusText t;
  t.Declare("empty", MetricType::kGauge, "Nothing yet.");
  t.Add("loose", {{"x", "y"}}, 1);
  EXPECT_EQ("# HELP empty Nothing yet.\n# TYPE empty gauge\n# TYPE loose untyped\nloose{x=\"y\"} 1\n", t.Render());
}

TEST(PrometheusText, EscapesLabelValuesAndHelpAsTheFormatSays) {
  EXPECT_EQ(R"(a\\b\"c\nd)", EscapeLabelValue("a\\b\"c\nd"));
  EXPECT_EQ("plain-job_1", EscapeLabelValue("plain-job_1"));
  EXPECT_EQ(R"(back\\slash "quotes" stay\nnext line)", EscapeHelp("back\\slash \"quotes\" stay\nnext line"));
  PrometheusText t;
  t.Declare("m", MetricType::kGauge, "two\nlines");
  t.Add("m", {{"job", "we\"ird\\job\n"}}, 1);
  EXPECT_EQ("# HELP m two\\nlines\n# TYPE m gauge\nm{job=\"we\\\"ird\\\\job\\n\"} 1\n", t.Render());
}

TEST(PrometheusText, FormatsValuesExactly) {
  EXPECT_EQ("0", FormatMetricValue(0));
  EXPECT_EQ("0", FormatMetricValue(-0.0));
  EXPECT_EQ("1000000", FormatMetricValue(1e6));
  EXPECT_EQ("-42", FormatMetricValue(-42));
  EXPECT_EQ("0.1", FormatMetricValue(0.1));
  EXPECT_EQ("1e-07", FormatMetricValue(1e-7));
  EXPECT_EQ("123.456", FormatMetricValue(123.456));
  EXPECT_EQ("1e+20", FormatMetricValue(1e20));
  EXPECT_EQ("NaN", FormatMetricValue(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_EQ("+Inf", FormatMetricValue(std::numeric_limits<double>::infinity()));
  EXPECT_EQ("-Inf", FormatMetricValue(-std::numeric_limits<double>::infinity()));
  // Shortest form reads back exactly.
  const double v = 0.1 + 0.2;
  EXPECT_EQ(v, std::stod(FormatMetricValue(v)));
}

JobMetrics TwoWorkerSnapshot() {
  JobMetrics m;
  m.job_id = "cloud";
  m.step = 120;
  m.total_steps = 1000;
  m.epoch = 2;
  m.epochs = 5;
  m.samples_per_second = 1536.5;
  m.train_loss = 0.75;
  m.test_accuracy = 0.8125;
  m.workers = 2;
  m.generation = 3;
  m.leases_issued = 7;
  m.leases_expired = 1;
  m.units_reissued = 1;
  m.recovery_bytes = 1048576;
  m.worker_reports = {{0, 120, 0.5, 0.25}, {1, 118, 0.625, 1.5}};
  return m;
}

TEST(RenderJobMetrics, ExactTextForASnapshot) {
  EXPECT_EQ(R"(# HELP tenax_job_step The furthest training step any worker of the job reported.
# TYPE tenax_job_step gauge
tenax_job_step{job="cloud"} 120
# HELP tenax_job_total_steps Training steps the job runs in all (0 until known).
# TYPE tenax_job_total_steps gauge
tenax_job_total_steps{job="cloud"} 1000
# HELP tenax_job_epoch Epoch (1-based) of the furthest worker; 0 before any report.
# TYPE tenax_job_epoch gauge
tenax_job_epoch{job="cloud"} 2
# HELP tenax_job_epochs Epochs the job runs.
# TYPE tenax_job_epochs gauge
tenax_job_epochs{job="cloud"} 5
# HELP tenax_samples_per_second Training samples per second of the whole job (evaluation excluded).
# TYPE tenax_samples_per_second gauge
tenax_samples_per_second{job="cloud"} 1536.5
# HELP tenax_train_loss The latest training loss a worker reported (the mean over replicas at log points).
# TYPE tenax_train_loss gauge
tenax_train_loss{job="cloud"} 0.75
# HELP tenax_test_accuracy Test accuracy (0..1) at the latest evaluation.
# TYPE tenax_test_accuracy gauge
tenax_test_accuracy{job="cloud"} 0.8125
# HELP tenax_workers Workers that are members of the job now (training or done).
# TYPE tenax_workers gauge
tenax_workers{job="cloud"} 2
# HELP tenax_generation Membership generation: bumps whenever the set of members changes.
# TYPE tenax_generation gauge
tenax_generation{job="cloud"} 3
# HELP tenax_worker_step Global step of a worker after its latest report.
# TYPE tenax_worker_step gauge
tenax_worker_step{job="cloud",rank="0"} 120
tenax_worker_step{job="cloud",rank="1"} 118
# HELP tenax_worker_step_seconds A worker's mean seconds per step (data, compute and exchange) over its latest report interval.
# TYPE tenax_worker_step_seconds gauge
tenax_worker_step_seconds{job="cloud",rank="0"} 0.5
tenax_worker_step_seconds{job="cloud",rank="1"} 0.625
# HELP tenax_worker_last_report_age_seconds Seconds since the coordinator last heard a worker's progress.
# TYPE tenax_worker_last_report_age_seconds gauge
tenax_worker_last_report_age_seconds{job="cloud",rank="0"} 0.25
tenax_worker_last_report_age_seconds{job="cloud",rank="1"} 1.5
# HELP tenax_leases_issued_total Work-unit leases granted, re-issues included (asynchronous jobs).
# TYPE tenax_leases_issued_total counter
tenax_leases_issued_total{job="cloud"} 7
# HELP tenax_leases_expired_total Work-unit leases that expired or whose worker was lost (asynchronous jobs).
# TYPE tenax_leases_expired_total counter
tenax_leases_expired_total{job="cloud"} 1
# HELP tenax_units_reissued_total Leases granted for a work unit's second or later attempt (asynchronous jobs).
# TYPE tenax_units_reissued_total counter
tenax_units_reissued_total{job="cloud"} 1
# HELP tenax_recovery_bytes_total Bytes moved by store recoveries the job's workers started.
# TYPE tenax_recovery_bytes_total counter
tenax_recovery_bytes_total{job="cloud"} 1048576
# HELP tenax_job_done 1 once every worker finished, else 0.
# TYPE tenax_job_done gauge
tenax_job_done{job="cloud"} 0
# HELP tenax_job_failed 1 once the job failed, else 0.
# TYPE tenax_job_failed gauge
tenax_job_failed{job="cloud"} 0
)",
            RenderJobMetrics(TwoWorkerSnapshot()));
}

// Every line is a comment or a sample of the format's grammar; each family
// has exactly one HELP and one TYPE, before its samples, which are
// contiguous.
void ExpectWellFormed(const std::string& text) {
  const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)");
  const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter|untyped))");
  const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? (NaN|[+-]Inf|-?[0-9.e+-]+))");
  std::map<std::string, int> helps, types;
  std::set<std::string> closed;
  std::string current;
  std::istringstream in(text);
  ASSERT_FALSE(text.empty());
  ASSERT_EQ('\n', text.back());
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      ++helps[m[1]];
    } else if (std::regex_match(line, m, type)) {
      ++types[m[1]];
      if (!current.empty()) closed.insert(current);
      current = m[1];
      EXPECT_EQ(0u, closed.count(current)) << "family " << current << " reopened";
    } else if (std::regex_match(line, m, sample)) {
      EXPECT_EQ(current, m[1].str()) << "sample outside its family: " << line;
    } else {
      ADD_FAILURE() << "not a line of the text format: " << line;
    }
  }
  for (const auto& [name, n] : types) {
    EXPECT_EQ(1, n) << name;
    EXPECT_EQ(1, helps[name]) << name;
  }
  EXPECT_EQ(helps.size(), types.size());
}

TEST(RenderJobMetrics, IsWellFormedWithOddJobIdsAndManyWorkers) {
  JobMetrics m = TwoWorkerSnapshot();
  m.job_id = "a \"quoted\"\\job\nid";
  for (int r = 2; r < 40; ++r) m.worker_reports.push_back({r, 100 + r, 0.1 * r, 0.5});
  const std::string text = RenderJobMetrics(m);
  ExpectWellFormed(text);
  EXPECT_NE(std::string::npos, text.find("tenax_worker_step{job=\"a \\\"quoted\\\"\\\\job\\nid\",rank=\"39\"} 139\n"));
}

TEST(RenderJobMetrics, BeforeAnyReportTheFamiliesExistWithoutLossOrAccuracy) {
  JobMetrics m;
  m.job_id = "new";
  m.done = true;
  const std::string text = RenderJobMetrics(m);
  ExpectWellFormed(text);
  EXPECT_EQ(std::string::npos, text.find("tenax_train_loss{"));
  EXPECT_EQ(std::string::npos, text.find("tenax_test_accuracy{"));
  EXPECT_EQ(std::string::npos, text.find("tenax_worker_step{"));
  EXPECT_NE(std::string::npos, text.find("# TYPE tenax_worker_step gauge\n"));
  EXPECT_NE(std::string::npos, text.find("tenax_job_step{job=\"new\"} 0\n"));
  EXPECT_NE(std::string::npos, text.find("tenax_job_done{job=\"new\"} 1\n"));
}

wire::Progress Report(int64_t step, double loss, double sps, double step_seconds, double accuracy = -1,
                      int64_t recovery = 0) {
  wire::Progress p;
  p.set_step(step);
  p.set_total_steps(600);
  p.set_epoch(step / 100 + 1);
  p.set_epochs(6);
  p.set_loss(loss);
  p.set_samples_per_second(sps);
  p.set_step_seconds(step_seconds);
  p.set_test_accuracy(accuracy);
  p.set_recovery_bytes(recovery);
  return p;
}

MemberRecord Member(int rank, MemberState state) {
  MemberRecord m;
  m.rank = rank;
  m.state = state;
  return m;
}

TEST(ProgressBook, SyncJobFollowsTheFurthestStepAndTheCurrentMembers) {
  ProgressBook book("j", false, 0);
  const auto t0 = SteadyClock::now();
  book.OnProgress(0, Report(150, 0.9, 800, 0.04, -1, 100), t0);
  book.OnProgress(1, Report(100, 0.8, 790, 0.05, 0.7, 50), t0 + std::chrono::milliseconds(500));
  book.OnProgress(2, Report(90, 0.7, 780, 0.06, -1, 25), t0 + std::chrono::milliseconds(600));
  book.OnProgress(0, Report(140, 0.6, 770, 0.03), t0 + std::chrono::seconds(1));  // re-formed group: step 140 again
  JobRecord job;
  job.job_id = "j";
  job.generation = 4;
  job.phase = JobPhase::kRunning;
  // Rank 2 left: no series for it, but its recovery bytes still count.
  std::map<int, MemberRecord> members{
      {0, Member(0, MemberState::kJoined)}, {1, Member(1, MemberState::kDone)}, {2, Member(2, MemberState::kLeft)},
      {3, Member(3, MemberState::kJoined)}};  // joined, not reported yet
  const JobMetrics m = book.Snapshot(job, members, std::nullopt, t0 + std::chrono::seconds(2));
  EXPECT_EQ("j", m.job_id);
  EXPECT_EQ(150, m.step);  // the furthest ever, not rank 0's latest
  EXPECT_EQ(600, m.total_steps);
  EXPECT_EQ(2, m.epoch);
  EXPECT_EQ(6, m.epochs);
  EXPECT_EQ(770, m.samples_per_second);  // the newest report's: every rank reports the job's
  ASSERT_TRUE(m.train_loss.has_value());
  EXPECT_EQ(0.6, *m.train_loss);
  ASSERT_TRUE(m.test_accuracy.has_value());
  EXPECT_EQ(0.7, *m.test_accuracy);
  EXPECT_EQ(3, m.workers);
  EXPECT_EQ(4u, m.generation);
  EXPECT_EQ(50 + 25, m.recovery_bytes);  // latest per rank (rank 0's latest says 0), the departed rank 2's too
  ASSERT_EQ(2u, m.worker_reports.size());
  EXPECT_EQ(0, m.worker_reports[0].rank);
  EXPECT_EQ(140, m.worker_reports[0].step);
  EXPECT_EQ(0.03, m.worker_reports[0].step_seconds);
  EXPECT_DOUBLE_EQ(1.0, m.worker_reports[0].last_report_age_seconds);
  EXPECT_EQ(1, m.worker_reports[1].rank);
  EXPECT_DOUBLE_EQ(1.5, m.worker_reports[1].last_report_age_seconds);
  EXPECT_FALSE(m.done);
  EXPECT_FALSE(m.failed);
  EXPECT_EQ(0, m.leases_issued);
}

TEST(ProgressBook, AsyncJobAddsItsWorkersThroughputAndCarriesTheQueueCounts) {
  ProgressBook book("a", true, 400);
  const auto t0 = SteadyClock::now();
  JobRecord job;
  job.phase = JobPhase::kFailed;
  std::map<int, MemberRecord> members{{5, Member(5, MemberState::kJoined)}, {6, Member(6, MemberState::kJoined)}};
  JobMetrics before = book.Snapshot(job, members, std::nullopt, t0);
  EXPECT_EQ(400, before.total_steps);  // known before any report
  EXPECT_FALSE(before.train_loss.has_value());
  book.OnProgress(5, Report(40, 1.0, 300, 0.1), t0);
  book.OnProgress(6, Report(60, 1.0, 200, 0.15), t0);
  WorkQueueCounts counts;
  counts.units_issued = 9;
  counts.leases_expired = 2;
  counts.units_reissued = 3;
  const JobMetrics m = book.Snapshot(job, members, counts, t0);
  EXPECT_EQ(500, m.samples_per_second);
  EXPECT_EQ(60, m.step);
  EXPECT_EQ(9, m.leases_issued);
  EXPECT_EQ(2, m.leases_expired);
  EXPECT_EQ(3, m.units_reissued);
  EXPECT_TRUE(m.failed);
  EXPECT_FALSE(m.done);
}

}  // namespace
}  // namespace tenax::coord

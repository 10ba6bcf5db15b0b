// The run-directory loader on a recorded 4-worker run (tests/data/report_run:
// a kill, a preemption and rejoin, a straggler, a storage node failure with
// PRM recovery) and on the damaged runs users will hand it.
#include "tenax/report/run_record.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tenax/core/files.h"
#include "tenax/report/html_report.h"
#include "testing.h"

namespace tenax::report {
namespace {

const std::string kFixture = std::string(TENAX_SOURCE_DIR) + "/tests/data/report_run";

std::string Read(const std::string& path) {
  auto text = ReadFileText(path, 1 << 24);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

RunFiles FixtureFiles() {
  RunFiles f;
  f.dir = kFixture;
  f.metrics = Read(kFixture + "/metrics.jsonl");
  f.summary = Read(kFixture + "/summary.json");
  f.reference_metrics = Read(kFixture + "/reference/metrics.jsonl");
  f.reference_summary = Read(kFixture + "/reference/summary.json");
  return f;
}

const WorkerTimeline* Worker(const RunRecord& r, const std::string& name) {
  for (const WorkerTimeline& w : r.workers) {
    if (w.name == name) return &w;
  }
  return nullptr;
}

TEST(RunRecord, LoadsTheRecordedRun) {
  ASSERT_OK_AND_ASSIGN(RunRecord r, LoadRunRecord(kFixture));
  EXPECT_TRUE(r.finished);
  EXPECT_TRUE(r.has_reference);
  EXPECT_EQ(r.job_id, "cloud-demo");
  EXPECT_EQ(r.mode, "sync");
  EXPECT_EQ(r.model, "cnn");
  EXPECT_EQ(r.steps, 1200);
  EXPECT_EQ(r.epochs, 4);
  ASSERT_TRUE(r.final_test_accuracy && r.reference_test_accuracy && r.wall_seconds);
  EXPECT_DOUBLE_EQ(*r.final_test_accuracy, 0.8702);
  EXPECT_DOUBLE_EQ(*r.reference_test_accuracy, 0.8712);
  EXPECT_DOUBLE_EQ(*r.wall_seconds, 241.2);  // launcher_wall_seconds wins over the trainer's wall_seconds
  EXPECT_EQ(r.records, 61u);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();

  // Curves on the time axis: "time" minus summary.json's started_at.
  ASSERT_EQ(r.run.test_accuracy.size(), 4u);
  EXPECT_NEAR(r.run.test_accuracy[0].t, 64.0, 1e-3);  // epoch 1 at step 300
  EXPECT_DOUBLE_EQ(r.run.test_accuracy[0].value, 0.8123);
  EXPECT_DOUBLE_EQ(r.run.test_accuracy[3].value, 0.8702);
  ASSERT_EQ(r.run.train_loss.size(), 24u);
  EXPECT_NEAR(r.run.train_loss[0].t, 13.75, 1e-3);
  EXPECT_DOUBLE_EQ(r.run.train_loss[0].value, 1.0925);
  // The reference on its own start.
  ASSERT_EQ(r.reference.test_accuracy.size(), 4u);
  EXPECT_NEAR(r.reference.test_accuracy[0].t, 58.5, 1e-3);
  EXPECT_DOUBLE_EQ(r.reference.test_accuracy[3].value, 0.8712);
  EXPECT_EQ(r.reference.train_loss.size(), 24u);
  EXPECT_NEAR(r.reference.end_seconds, 220.5, 1e-3);
  EXPECT_NEAR(r.end_seconds, 241.2, 1e-9);  // the launcher's wall time outlasts the last record (239.5)

  // One timeline row per worker, in the order they started.
  ASSERT_EQ(r.workers.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.workers[static_cast<size_t>(i)].name, "worker " + std::to_string(i));
  // worker 2: preempted, a replacement rejoins on another host.
  const WorkerTimeline* w2 = Worker(r, "worker 2");
  ASSERT_NE(w2, nullptr);
  struct Expected {
    const char* state;
    double start, end;
    const char* host;
  };
  const Expected expected[] = {{"starting", 1.2, 4.0, "a-3"},   {"active", 4.0, 100.0, "a-3"},
                               {"preempted", 100.0, 110.0, "a-3"}, {"rejoining", 110.0, 121.0, "a-5"},
                               {"active", 121.0, 239.5, "a-5"},    {"done", 239.5, 241.2, "a-5"}};
  ASSERT_EQ(w2->segments.size(), std::size(expected));
  for (size_t i = 0; i < std::size(expected); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(w2->segments[i].state, expected[i].state);
    EXPECT_NEAR(w2->segments[i].start, expected[i].start, 1e-3);
    EXPECT_NEAR(w2->segments[i].end, expected[i].end, 1e-3);
    EXPECT_EQ(w2->segments[i].host, expected[i].host);
  }
  EXPECT_EQ(w2->segments[2].detail, "SIGTERM, 5 s notice");
  // worker 1: killed, then out of the job until the end.
  const WorkerTimeline* w1 = Worker(r, "worker 1");
  ASSERT_NE(w1, nullptr);
  ASSERT_EQ(w1->segments.size(), 4u);
  EXPECT_EQ(w1->segments[2].state, "killed");
  EXPECT_NEAR(w1->segments[2].end - w1->segments[2].start, 1.2, 1e-3);
  EXPECT_EQ(w1->segments[3].state, "left");
  EXPECT_NEAR(w1->segments[3].end, 241.2, 1e-9);
  // worker 3: slow from 40 s to 160 s.
  const WorkerTimeline* w3 = Worker(r, "worker 3");
  ASSERT_NE(w3, nullptr);
  ASSERT_EQ(w3->segments.size(), 5u);
  EXPECT_EQ(w3->segments[2].state, "slow");
  EXPECT_NEAR(w3->segments[2].start, 40.0, 1e-3);
  EXPECT_NEAR(w3->segments[2].end, 160.0, 1e-3);

  // Events, sorted by time; the storage fault record has no "time" and sits
  // at the end of the file: its elapsed_seconds places it.
  ASSERT_EQ(r.events.size(), 15u);
  for (size_t i = 1; i < r.events.size(); ++i) EXPECT_LE(r.events[i - 1].t, r.events[i].t);
  size_t faults = 0, notices = 0, stragglers = 0, recoveries = 0, generations = 0;
  for (const RunEvent& e : r.events) {
    faults += e.kind == EventKind::kFault;
    notices += e.kind == EventKind::kNotice;
    stragglers += e.kind == EventKind::kStraggler;
    recoveries += e.kind == EventKind::kRecovery;
    generations += e.kind == EventKind::kGeneration;
  }
  EXPECT_EQ(faults, 3u);
  EXPECT_EQ(notices, 5u);
  EXPECT_EQ(stragglers, 2u);
  EXPECT_EQ(recoveries, 2u);
  EXPECT_EQ(generations, 3u);
  auto storage = std::find_if(r.events.begin(), r.events.end(),
                              [](const RunEvent& e) { return e.target == "storage node-2"; });
  ASSERT_NE(storage, r.events.end());
  EXPECT_DOUBLE_EQ(storage->t, 140.0);
  EXPECT_EQ(storage->text, "kill storage node-2 (SIGKILL) at step 690, its data wiped");
  auto slow = std::find_if(r.events.begin(), r.events.end(),
                           [](const RunEvent& e) { return e.kind == EventKind::kStraggler; });
  ASSERT_NE(slow, r.events.end());
  EXPECT_EQ(slow->target, "worker 3");
  EXPECT_EQ(slow->text, "worker 3 is slow (2.4x the median step time, share 52 of 256, step 185)");
  auto done = std::find_if(r.events.begin(), r.events.end(), [](const RunEvent& e) {
    return e.kind == EventKind::kRecovery && e.text.find("done") != std::string::npos;
  });
  ASSERT_NE(done, r.events.end());
  EXPECT_EQ(done->text,
            "recovery (prm) done: dataset fashion-mnist-train, 12 chunks lost, 12 rebuilt, 9.4 MB, in 8.5 s");

  // Faults with the system's reactions, from summary.json.
  ASSERT_EQ(r.faults.size(), 4u);
  EXPECT_EQ(r.faults[0].fault, "kill worker 1 at step 370");
  EXPECT_EQ(r.faults[0].target, "worker 1");
  EXPECT_EQ(r.faults[0].recovered_seconds, 1.2);
  EXPECT_EQ(r.faults[1].recovered_seconds, 21.0);
  EXPECT_FALSE(r.faults[2].recovered_seconds.has_value());  // null in the summary
  EXPECT_EQ(r.faults[2].recovered, true);
  EXPECT_EQ(r.faults[3].target, "storage node-2");
  EXPECT_NE(r.faults[3].reaction.find("PRM rebuilt the 12 lost chunks"), std::string::npos);

  // Bytes by purpose, in the report's order.
  const std::vector<std::pair<std::string, double>> bytes = {
      {"gradients", 1843200000}, {"models", 2457600}, {"recovery", 9437184}, {"shuffling", 0}};
  EXPECT_EQ(r.bytes_moved, bytes);

  ASSERT_TRUE(r.cost.has_value());
  EXPECT_DOUBLE_EQ(r.cost->total, 0.0213);
  EXPECT_EQ(r.cost->currency, "USD");
  const std::vector<std::pair<std::string, double>> by_role = {
      {"coordinator", 0.0021}, {"storage", 0.0048}, {"worker", 0.0144}};
  EXPECT_EQ(r.cost->by_role, by_role);
  EXPECT_DOUBLE_EQ(r.cost->process_seconds.at("worker"), 868.3);

  const std::vector<std::pair<std::string, std::string>> placement = {
      {"hosts", "6"}, {"policy", "zone-aware"}, {"zones.zone-a", "a-1, a-2, a-3, a-4, a-5"}, {"zones.zone-b", "b-1"}};
  EXPECT_EQ(r.placement, placement);
}

TEST(RunRecord, TruncatedLastLineAndBrokenLinesAreSkippedWithAWarning) {
  RunFiles f = FixtureFiles();
  *f.metrics = "not json at all\n" + *f.metrics + "{\"event\":\"train\",\"step\":1250,\"lo";
  ASSERT_OK_AND_ASSIGN(RunRecord r, ParseRunRecord(f));
  EXPECT_EQ(r.records, 61u);
  EXPECT_EQ(r.run.train_loss.size(), 24u);
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_EQ(r.warnings[0], "metrics.jsonl line 1 is not a JSON object; ignored");
  EXPECT_EQ(r.warnings[1], "metrics.jsonl line 63 is truncated (the run was stopped while writing it); ignored");
}

TEST(RunRecord, WithoutReference) {
  RunFiles f = FixtureFiles();
  f.reference_metrics.reset();
  f.reference_summary.reset();
  ASSERT_OK_AND_ASSIGN(RunRecord r, ParseRunRecord(f));
  EXPECT_FALSE(r.has_reference);
  EXPECT_TRUE(r.reference.test_accuracy.empty());
  // The summary still knows the reference's accuracy.
  EXPECT_EQ(r.reference_test_accuracy, 0.8712);

  f.summary = "{\"final_test_accuracy\": 0.5}";
  ASSERT_OK_AND_ASSIGN(RunRecord bare, ParseRunRecord(f));
  EXPECT_FALSE(bare.reference_test_accuracy.has_value());
  EXPECT_EQ(bare.final_test_accuracy, 0.5);
}

TEST(RunRecord, AWorkerThatFailedOnItsOwnIsAnUnplannedFault) {
  RunFiles f = FixtureFiles();
  f.summary = R"json({"faults": [
    {"fault": "kill worker 1", "action": "kill", "target": "worker 1", "source": "faults[0]", "recovered": true},
    {"fault": "worker 2 failed on its own (exit code 134)", "action": "failed", "target": "worker 2",
     "source": "unplanned", "reaction": "the other 2 workers re-formed as generation 3 and went on (rank 2 lost)",
     "recovered": true, "recovered_seconds": 0.5}]})json";
  ASSERT_OK_AND_ASSIGN(RunRecord r, ParseRunRecord(f));
  ASSERT_EQ(r.faults.size(), 2u);
  EXPECT_TRUE(r.faults[0].planned);
  EXPECT_FALSE(r.faults[1].planned);
  EXPECT_EQ(r.faults[1].fault, "worker 2 failed on its own (exit code 134)");
  EXPECT_EQ(r.faults[1].target, "worker 2");
  EXPECT_EQ(r.faults[1].recovered_seconds, 0.5);
}

// One clock: a fault's time in the table is on the charts' axis (since the
// run started), not its at_seconds (since the launcher started the workers,
// after the reference run and the coordinator).
TEST(RunRecord, FaultTimesAreOnTheChartsAxis) {
  RunFiles f = FixtureFiles();
  f.summary = R"json({"started_at": 1000.0, "faults": [
    {"fault": "kill worker 1", "action": "kill", "target": "worker 1", "at_seconds": 8.8, "time": 1016.25},
    {"fault": "stop worker 2", "action": "stop", "target": "worker 2", "at_seconds": 3.5}]})json";
  f.metrics = R"json({"event": "train", "step": 10, "loss": 1.5, "time": 1004.0}
{"event": "fault", "action": "kill", "target": "worker 1", "time": 1016.25}
)json";
  ASSERT_OK_AND_ASSIGN(RunRecord r, ParseRunRecord(f));
  ASSERT_EQ(r.faults.size(), 2u);
  ASSERT_TRUE(r.faults[0].at_seconds.has_value());
  EXPECT_DOUBLE_EQ(*r.faults[0].at_seconds, 16.25);
  // The same kill's marker on the timeline, on the same axis.
  auto marker = std::find_if(r.events.begin(), r.events.end(), [](const RunEvent& e) { return e.kind == EventKind::kFault; });
  ASSERT_NE(marker, r.events.end());
  EXPECT_DOUBLE_EQ(marker->t, 16.25);
  // A summary without "time" (an older run) keeps at_seconds as it was.
  ASSERT_TRUE(r.faults[1].at_seconds.has_value());
  EXPECT_DOUBLE_EQ(*r.faults[1].at_seconds, 3.5);
}

TEST(RunRecord, ReferenceAccuracyFromTheReferenceRunWhenTheSummaryLacksIt) {
  RunFiles f = FixtureFiles();
  f.summary = "{\"mode\": \"sync\"}";
  f.reference_summary.reset();
  ASSERT_OK_AND_ASSIGN(RunRecord r, ParseRunRecord(f));
  EXPECT_EQ(r.reference_test_accuracy, 0.8712);  // the reference's last epoch
}

TEST(RunRecord, WithoutSummaryTheRecordsSpeak) {
  RunFiles f = FixtureFiles();
  f.summary.reset();
  ASSERT_OK_AND_ASSIGN(RunRecord r, ParseRunRecord(f));
  EXPECT_FALSE(r.finished);
  EXPECT_EQ(r.final_test_accuracy, 0.8702);  // the last epoch's
  // The start is the first record's time (0.5 s after started_at).
  EXPECT_NEAR(r.run.test_accuracy[0].t, 63.5, 1e-3);
  EXPECT_NEAR(r.end_seconds, 239.0, 1e-3);
  // Faults from the launcher's records, without reactions.
  ASSERT_EQ(r.faults.size(), 3u);
  EXPECT_EQ(r.faults[0].fault, "kill worker 1 (SIGKILL) at step 370");
  EXPECT_EQ(r.faults[1].fault, "preempt worker 2 (SIGTERM) at step 490");
  EXPECT_EQ(r.faults[2].target, "storage node-2");
  EXPECT_TRUE(r.faults[0].reaction.empty());
  EXPECT_TRUE(r.bytes_moved.empty());
  EXPECT_FALSE(r.cost.has_value());
  EXPECT_EQ(r.workers.size(), 4u);
}

TEST(RunRecord, BrokenSummaryIsAnUnfinishedRun) {
  RunFiles f = FixtureFiles();
  f.summary = "{\"mode\": \"sy";
  ASSERT_OK_AND_ASSIGN(RunRecord r, ParseRunRecord(f));
  EXPECT_FALSE(r.finished);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("summary.json is not a JSON object"), std::string::npos);
}

TEST(RunRecord, EmptyMetricsLoadsAsARunWithNoData) {
  RunFiles f;
  f.dir = "run";
  f.metrics = "";
  ASSERT_OK_AND_ASSIGN(RunRecord r, ParseRunRecord(f));
  EXPECT_EQ(r.records, 0u);
  EXPECT_FALSE(r.finished);
  EXPECT_TRUE(r.run.test_accuracy.empty());
  EXPECT_TRUE(r.workers.empty());
  EXPECT_TRUE(r.events.empty());
  EXPECT_FALSE(r.final_test_accuracy.has_value());
}

TEST(RunRecord, OddRecordsAreTolerated) {
  RunFiles f;
  f.dir = "run";
  f.metrics =
      "{\"event\":\"train\",\"loss\":\"abc\",\"time\":100}\n"               // loss of the wrong type
      "{\"event\":\"train\",\"loss\":0.5,\"elapsed_seconds\":7}\n"           // no time: elapsed_seconds
      "{\"event\":\"train\",\"loss\":0.4}\n"                                 // neither: the previous record's
      "{\"event\":\"what is this\",\"time\":101}\n"                          // unknown event
      "[1,2,3]\n"                                                             // not an object
      "{\"event\":\"worker_state\",\"worker\":2,\"state\":\"active\",\"time\":102}\n"  // worker as a number
      "{\"event\":\"worker_state\",\"state\":\"active\",\"time\":103}\n"     // nobody's state: ignored
      "{\"event\":\"fault\",\"action\":7,\"worker\":{\"x\":1},\"step\":1e300,\"time\":104}\n"
      "{\"event\":\"epoch\",\"test_accuracy\":0.7,\"time\":\"late\"}\n"
      "{\"event\":\"straggler\",\"state\":\"slow\",\"worker\":3,\"ratio\":null,\"time\":105}\n";
  ASSERT_OK_AND_ASSIGN(RunRecord r, ParseRunRecord(f));
  EXPECT_EQ(r.records, 9u);
  ASSERT_EQ(r.run.train_loss.size(), 2u);
  EXPECT_DOUBLE_EQ(r.run.train_loss[0].t, 7);
  EXPECT_DOUBLE_EQ(r.run.train_loss[1].t, 7);
  ASSERT_EQ(r.workers.size(), 1u);
  EXPECT_EQ(r.workers[0].name, "worker 2");
  EXPECT_DOUBLE_EQ(r.workers[0].segments[0].start, 2);
  EXPECT_DOUBLE_EQ(r.workers[0].segments[0].end, 7);  // the run's last record
  ASSERT_EQ(r.faults.size(), 1u);
  EXPECT_EQ(r.faults[0].fault, "7");  // the action as written; the step did not fit
  ASSERT_EQ(r.run.test_accuracy.size(), 1u);
  EXPECT_EQ(r.final_test_accuracy, 0.7);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[1].text, "worker 3 is slow");
}

// What `tenax run examples/cloud.toml` recorded (tests/data/report_cloud_run:
// runs/cloud2 of 2026-11-25, metrics.jsonl and summary.json of the run and
// of its fault-free reference, as written). The loader's numbers are checked
// against the files' own records, read here independently.
std::vector<nlohmann::json> Lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(RunRecord, ARecordedCloudRunLoadsWithEveryFaultWorkerAndCurve) {
  const std::string dir = std::string(TENAX_SOURCE_DIR) + "/tests/data/report_cloud_run";
  ASSERT_OK_AND_ASSIGN(RunRecord r, LoadRunRecord(dir));
  const auto summary = nlohmann::json::parse(testing::ReadText(dir + "/summary.json"));
  EXPECT_TRUE(r.finished);
  EXPECT_TRUE(r.has_reference);
  EXPECT_EQ(r.final_test_accuracy, summary["final_test_accuracy"].get<double>());
  EXPECT_EQ(r.reference_test_accuracy, summary["reference_test_accuracy"].get<double>());
  // One accuracy point per epoch record, one loss point per train record, in both runs.
  auto count = [](const std::vector<nlohmann::json>& records, const std::string& event) {
    return static_cast<size_t>(std::count_if(records.begin(), records.end(),
                                             [&](const nlohmann::json& j) { return j.value("event", "") == event; }));
  };
  const auto run = Lines(dir + "/metrics.jsonl"), ref = Lines(dir + "/reference/metrics.jsonl");
  EXPECT_GE(r.run.test_accuracy.size(), count(run, "epoch"));
  EXPECT_EQ(r.run.train_loss.size(), count(run, "train"));
  EXPECT_EQ(r.reference.train_loss.size(), count(ref, "train"));
  EXPECT_GT(count(run, "epoch"), 0u);
  // Every worker the launcher recorded has a row, each faulted one ends in its state.
  std::map<std::string, std::string> last_state;
  for (const auto& j : run) {
    if (j.value("event", "") == "worker_state") last_state[j.value("worker", "")] = j.value("state", "");
  }
  ASSERT_EQ(r.workers.size(), last_state.size());
  for (const auto& w : r.workers) {
    ASSERT_FALSE(w.segments.empty()) << w.name;
    EXPECT_EQ(w.segments.back().state, last_state[w.name]) << w.name;
  }
  EXPECT_EQ(last_state["worker 1"], "killed");
  EXPECT_EQ(last_state["worker 2"], "left");
  // The faults with their reactions, as summary.json lists them.
  ASSERT_EQ(r.faults.size(), summary["faults"].size());
  for (size_t i = 0; i < r.faults.size(); ++i) {
    EXPECT_EQ(r.faults[i].reaction, summary["faults"][i]["reaction"].get<std::string>());
    ASSERT_TRUE(r.faults[i].recovered_seconds.has_value()) << r.faults[i].fault;
    EXPECT_EQ(*r.faults[i].recovered_seconds, summary["faults"][i]["recovered_seconds"].get<double>());
  }
  // Bytes by purpose, the purposes in their order.
  ASSERT_GE(r.bytes_moved.size(), 4u);
  EXPECT_EQ(r.bytes_moved[0].first, "gradients");
  EXPECT_EQ(r.bytes_moved[0].second, summary["bytes_moved"]["gradients"].get<double>());
  EXPECT_EQ(r.bytes_moved[2].first, "recovery");
  EXPECT_EQ(r.bytes_moved[2].second, summary["bytes_moved"]["recovery"].get<double>());
  ASSERT_TRUE(r.cost.has_value());
  EXPECT_EQ(r.cost->total, summary["cost"]["total"].get<double>());
  // And the page has data in every chart.
  const std::string html = RenderReportHtml(r);
  EXPECT_EQ(html.find("data-points=\"0\""), std::string::npos);
}

TEST(RunRecord, NotARunDirectory) {
  testing::ScratchDir dir;
  auto none = LoadRunRecord(dir.path());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none.status().message(), dir.path() + " has no metrics.jsonl: is it a tenax run directory?");

  auto missing = LoadRunRecord(dir / "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no such directory"), std::string::npos);

  ASSERT_OK(WriteFileAtomic(dir / "file", "x"));
  auto file = LoadRunRecord(dir / "file");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("is not a directory"), std::string::npos);

  // A metrics.jsonl that is a directory is refused, not read as empty.
  std::filesystem::create_directories(dir / "odd/metrics.jsonl");
  auto odd = LoadRunRecord(dir / "odd");
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tenax::report

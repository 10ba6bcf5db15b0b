// A run directory (`tenax run ... --out DIR`) read into plain values for the
// report: accuracy and loss on one time axis, each worker's states as
// segments, the events, the faults with the system's reactions, bytes moved
// by purpose, cost and the headline numbers. docs/report.md and
// helpers' run_schema.md describe the files.
//
// The loader is tolerant by design: a run that crashed, was stopped or is
// still being written is exactly when a user wants its report. Missing keys,
// keys of the wrong type, unknown events, records without "time", malformed
// or truncated lines, a missing summary.json or reference/ directory all load
// (what could not be used is listed in `warnings`). Only a directory that is
// not a run at all (no metrics.jsonl, unreadable) is an error.
//
// Pure functions of their inputs, no threads, no exceptions escape.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::report {

// One value at `t` seconds since the run's start.
struct TimePoint {
  double t = 0;
  double value = 0;
};

// The learning curves of one run (this run or its fault-free reference),
// each sorted by time.
struct Curves {
  std::vector<TimePoint> test_accuracy;  // 0..1, from "epoch" (and "final") records
  std::vector<TimePoint> train_loss;     // from "train" records
  double end_seconds = 0;                // the last record's time (or the run's wall time)
};

// A worker in one state from `start` to `end` (seconds since the start).
struct StateSegment {
  double start = 0;
  double end = 0;
  std::string state;  // "active", "slow", "preempted", ... (as recorded)
  std::string host;
  std::string detail;
};

// One row of the workers timeline, in the order workers first appear.
struct WorkerTimeline {
  std::string name;  // "worker 1", "joiner 1"
  std::vector<StateSegment> segments;
};

enum class EventKind { kFault, kStraggler, kRecovery, kNotice, kGeneration };
const char* EventKindName(EventKind kind);  // "fault", "straggler", ...

// Something that happened, for the timeline's markers and the event list.
struct RunEvent {
  double t = 0;
  EventKind kind = EventKind::kNotice;
  std::string text;    // one readable line
  std::string target;  // the timeline row it belongs to ("worker 3"), "" for the whole job
};

// An injected fault and what the system did about it (summary.json "faults";
// from the fault records when the run did not finish).
struct FaultReaction {
  std::string fault;     // "kill worker 1 at step 300"
  std::string action;    // kill, preempt, stop, cont, restart
  std::string target;    // "worker 1", "storage node-2"
  std::optional<double> at_seconds;  // on the charts' axis: seconds since the run started
  std::string reaction;  // "" when not recorded
  std::optional<double> recovered_seconds;
  std::optional<bool> recovered;
  bool planned = true;   // false: a worker that failed on its own ("source": "unplanned")
};

struct CostRecord {
  double total = 0;
  std::string currency;
  std::vector<std::pair<std::string, double>> by_role;          // sorted by role
  std::map<std::string, double> process_seconds;                // by role
};

struct RunRecord {
  std::string dir;
  bool finished = false;  // summary.json was read
  bool has_reference = false;

  // Headline (from summary.json, else from the records).
  std::string job_id;
  std::string mode;
  std::string model;
  std::optional<double> final_test_accuracy;      // 0..1
  std::optional<double> reference_test_accuracy;  // 0..1
  std::optional<double> wall_seconds;
  std::optional<int64_t> steps;
  std::optional<int64_t> epochs;

  Curves run;
  Curves reference;  // empty unless has_reference
  double end_seconds = 0;  // the end of the run's time axis

  std::vector<WorkerTimeline> workers;
  std::vector<RunEvent> events;  // sorted by time
  std::vector<FaultReaction> faults;
  // gradients, models, recovery, shuffling first (in that order), then any
  // other purpose the summary lists.
  std::vector<std::pair<std::string, double>> bytes_moved;
  std::optional<CostRecord> cost;
  // summary.json "placement" flattened to "key.sub" = value lines; its shape
  // is not relied on.
  std::vector<std::pair<std::string, std::string>> placement;

  size_t records = 0;                 // usable records in metrics.jsonl
  std::vector<std::string> warnings;  // lines skipped and why, at most a few
};

// The contents of a run directory's files; an absent file is std::nullopt.
struct RunFiles {
  std::string dir;  // for messages and RunRecord::dir
  std::optional<std::string> metrics;
  std::optional<std::string> summary;
  std::optional<std::string> reference_metrics;
  std::optional<std::string> reference_summary;
};

// Builds the record from file contents (the fuzzed entry). InvalidArgument
// only when `metrics` is absent ("DIR has no metrics.jsonl: ...").
Result<RunRecord> ParseRunRecord(const RunFiles& files);

// Reads DIR/metrics.jsonl, DIR/summary.json and DIR/reference/* (or the
// summary's reference_dir). NotFound/InvalidArgument for a DIR that does not
// exist, is not a directory or has no metrics.jsonl; IoError when a file
// exists but cannot be read.
Result<RunRecord> LoadRunRecord(const std::string& dir);

}  // namespace tenax::report

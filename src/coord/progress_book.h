// What the coordinator remembers of its workers' progress reports, for its
// metrics (coord/prometheus_text.h): every rank's latest report and when
// it arrived, the latest evaluation and loss. Internal to the coordinator
// (coordinator.cc); the membership, phase and work-queue counts come from
// the coordinator's other parts at snapshot time.
//
// Threading: the coordinator's thread (Snapshot's result is a plain value
// handed to the metrics endpoint). Failures: none; reports are decoded
// (coord_codec.h) before they get here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "coord_wire.pb.h"
#include "job_state.h"
#include "prometheus_text.h"
#include "tenax/coord/work_queue.h"
#include "tenax/core/deadline.h"

namespace tenax::coord {

class ProgressBook {
 public:
  // async: the job's throughput is the sum of its workers' (each reports
  // its own); otherwise every rank already reports the whole job's.
  // total_steps: known up front (async jobs), else 0 until reported.
  ProgressBook(std::string job_id, bool async, int64_t total_steps);

  // Member `rank` reported `p` at `at`.
  void OnProgress(int rank, const wire::Progress& p, SteadyClock::time_point at);

  // The job now: per-worker series for the current members (joined or
  // done) that reported; `counts` are the work queue's (async jobs).
  JobMetrics Snapshot(const JobRecord& job, const std::map<int, MemberRecord>& members,
                      const std::optional<WorkQueueCounts>& counts, SteadyClock::time_point now) const;

 private:
  struct Report {
    wire::Progress latest;
    SteadyClock::time_point at;
  };
  std::string job_id_;
  bool async_;
  int64_t total_steps_;
  std::map<int, Report> reports_;           // every rank ever heard (recovery bytes only grow)
  std::optional<wire::Progress> furthest_;  // the report with the highest step so far
  std::optional<wire::Progress> newest_;    // the report received last
  std::optional<double> accuracy_;          // the latest evaluation
};

}  // namespace tenax::coord

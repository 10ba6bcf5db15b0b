// Follows one job from outside as a *watcher* of its coordinator (what the
// local launcher does): it connects, sends Watch, and turns what the
// coordinator relays into typed events. Progress is that of the slowest rank,
// reported once every rank has reported and only when the slowest rank's
// step changed (or, on request, whenever the highest step any rank reported
// rose); the coordinator's Failure verdict and Done end the job.
//
// Ownership: the watcher owns its Node (a client only, no listener).
// Threading: one thread; Next() drives the Node, so call it more often than
// the peer timeout, or the coordinator counts the watcher as lost.
// Failure: losing the coordinator is an error of Next(), not an event.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "tenax/core/deadline.h"
#include "tenax/coord/work_queue.h"
#include "tenax/core/status.h"

namespace tenax::net {
class Node;
}

namespace tenax::coord {

struct JobWatcherOptions {
  std::string host;  // the coordinator
  uint16_t port = 0;
  std::string job_id;
  int world = 0;  // ranks to hear from before reporting progress
  std::string secret;
  std::chrono::milliseconds peer_timeout{10000};
  std::string name = "watcher";  // in the coordinator's logs
  // Also report progress whenever the highest step any rank reported rises,
  // even before every rank reported or while the slowest rank does not move
  // (a lost rank of an elastic job never reports again). Such events have
  // max_step_only set. Off: progress only when the slowest rank moved.
  bool report_max_step = false;
};

// The job as far as its slowest rank got.
struct JobProgress {
  int64_t step = 0;
  int64_t total_steps = 0;
  int64_t epoch = 0;  // 1-based
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;  // 0 when the workers did not say (then total_steps / epochs)
  double loss = 0;
  double samples_per_second = 0;
  double elapsed_seconds = 0;
  std::optional<double> test_accuracy;  // set when that rank just evaluated
  int64_t max_step = 0;                 // the highest step any rank reported so far
  double step_seconds = 0;              // the slowest step time among the ranks' latest reports
  int64_t recovery_bytes = 0;           // summed over the ranks' latest reports
  // Only max_step rose (JobWatcherOptions::report_max_step): the fields
  // above are the slowest reporting rank's as before, perhaps of fewer
  // ranks than `world`, and test_accuracy is unset.
  bool max_step_only = false;
};

// The coordinator's verdict: the job failed because of `rank` on `host`.
struct JobFailed {
  int rank = -1;
  std::string host;  // "" when the failure is not one rank's (or unreadable)
  std::string reason;
  // "rank R on H failed: reason", or the reason alone without a host.
  std::string Describe() const;
};

// Every rank finished.
struct JobDone {};

// An async job's work-queue counts: when they changed, and once more
// right before JobDone (the final counts).
struct JobQueue {
  WorkQueueCounts counts;
};

// An elastic job's new membership (a loss, a leave or a join). Progress
// from then on is that of the slowest of these members.
struct JobGeneration {
  uint64_t generation = 0;
  std::vector<int> members;  // member ids
  std::map<int, std::string> member_names;  // member id -> its name ("host/pid" from tenax worker)
  std::string why;
};

using JobEvent = std::variant<JobProgress, JobFailed, JobDone, JobGeneration, JobQueue>;

class JobWatcher {
 public:
  // Connects and asks to watch `options.job_id`. The transport's status
  // (DeadlineExceeded, Refused for a wrong secret...) if that fails.
  static Result<std::unique_ptr<JobWatcher>> Connect(const JobWatcherOptions& options, Deadline deadline);
  ~JobWatcher();

  // The next event, or nullopt when none came before `deadline`. PeerLost
  // (or the transport's status) once the coordinator is gone. Between
  // messages it checks without blocking and pauses 5 ms, leaving the cores
  // to the workers.
  Result<std::optional<JobEvent>> Next(Deadline deadline);

  // Tells the coordinator that the process of worker `rank` ended before
  // the job formed (`reason`: how). An elastic job's coordinator then lets a
  // waiting spare take the place of a worker that may never have joined
  // (the coordinator saw no connection of it to lose), or without spares
  // starts short of it; other jobs ignore it. Best effort: the transport's
  // status if it could not be sent.
  Status TellWorkerExited(int rank, const std::string& reason, Deadline deadline);

 private:
  struct State;
  explicit JobWatcher(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tenax::coord

// What `tenax run` tells the user while a job runs, and what it records
// for the report (docs/report.md): every worker's state (WorkerStatus,
// local_launcher.h) from the fault plan's records, the coordinator's
// generations and the job's own events (stragglers, store recoveries)
// tailed from the run's metrics.jsonl; one notice line per event; and, at
// the end, every injected fault with the system's reaction and its time to
// recover, for summary.json.
//
// Records it writes to metrics.jsonl: {"event": "worker_state", "worker",
// "state", "host", "detail"} per transition and {"event": "notice",
// "text"} per event line. Times are unix seconds (JsonLinesWriter's
// "time"): the records come from several processes.
//
// Threading: the launcher's thread only. Failure: a metrics write that
// fails is reported once as a notice; the job goes on.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tenax/coord/job_watcher.h"
#include "tenax/coord/work_queue.h"
#include "tenax/core/metrics.h"
#include "tenax/core/run_records.h"
#include "tenax/launch/local_launcher.h"

namespace tenax {

class RunMonitor {
 public:
  struct Callbacks {
    std::function<void(const std::string&)> notice;                // may be empty
    std::function<void(const std::vector<WorkerStatus>&)> workers;  // may be empty
  };
  // `metrics_path`: the run's metrics.jsonl (appended to).
  // `injected_stragglers`: the workers [stragglers] slows ("worker 3"):
  // their detection is a reaction to an injected fault; others the job
  // detects are events only.
  RunMonitor(std::string metrics_path, Callbacks callbacks, std::vector<std::string> injected_stragglers = {});

  // A worker process the launcher started ("worker 2", "joiner 1",
  // "spare 1" or "migrant 1": state "spare" until a generation makes it a
  // member).
  void AddWorker(const std::string& name, pid_t pid, const std::string& host);
  // The state of the worker with `pid` ("" for none).
  std::string StateOf(pid_t pid) const;
  // The spare with `pid` told the run it is warm (its "spare_waiting"
  // record: prepared, joined, waiting for a place) and still waits.
  bool SpareReady(pid_t pid) const;
  // A record of the fault injector, as it is made.
  void OnFaultRecord(nlohmann::json record);
  // A new membership from the coordinator.
  void OnGeneration(const coord::JobGeneration& g);
  // The job reported progress: without generations (a job that is not
  // elastic) the started workers are active from then on.
  void OnProgress();
  // An async job's work-queue counts (polled by the launcher): a line per
  // lease that expired, unit re-issued and result rejected since the last.
  void OnQueueCounts(const coord::WorkQueueCounts& counts);
  // The launcher follows the job's coordinator again after the plan
  // restarted it: the reaction to that kill and that restart.
  void OnCoordinatorFollowed();
  // A child exited with `code`. A worker no fault was aimed at that exits
  // non-zero failed on its own: state "failed", with `why` (the end of its
  // log) as the detail, and true is returned so the launcher can name it
  // if the job then fails. False for planned exits and other children,
  // and for a worker the plan stopped that a generation dropped while it
  // hung: it "left" (exiting on waking is how it leaves).
  bool OnExit(pid_t pid, int code, const std::string& why = "");
  // Reads the job's new events from metrics.jsonl (at most every 200 ms).
  void Poll();
  // An event line (also recorded).
  void Notice(const std::string& text);
  // The job ended: the members still active are done.
  void Finish();

  // summary.json's "faults": every fault with "reaction" and
  // "recovered_seconds" (null when the system had not recovered by the
  // end), plus the straggler the job detected, plus every worker that
  // failed on its own (OnExit; "source": "unplanned"), which a user must
  // not have to dig out of metrics.jsonl.
  nlohmann::json FaultsWithReactions() const;
  // Bytes the store recoveries reported moving (their "done" records).
  double RecoveryBytes() const;

 private:
  struct Worker {
    WorkerStatus status;
    pid_t pid = 0;
    bool spare_ready = false;  // a spare's "spare_waiting" record was read
    // The plan SIGSTOPped it and a generation formed without it: woken
    // (SIGCONT), it learns it was removed and exits; that exit is the
    // plan's doing, not a failure of its own.
    int64_t dropped_while_stopped = 0;  // the generation that dropped it; 0: none
  };
  struct Event {  // what the reactions are computed from
    double time = 0;
    nlohmann::json record;
  };
  template <typename Record>
  struct Timed {  // a typed record and when the launcher saw it (unix seconds)
    double time = 0;
    Record record;
  };

  static double Now();
  Worker* ByPid(pid_t pid);
  Worker* ByName(const std::string& name);
  void SetState(Worker& w, const std::string& state, const std::string& detail);
  void Record(nlohmann::json record);
  void Publish();
  void OnJobEvent(const nlohmann::json& e);
  // FaultsWithReactions' parts: the first generation formed at or after `t`
  // that `ok` accepts; one injected fault's entry; the detected injected
  // stragglers' entries (their names go to `detected`); an undetected one's;
  // a worker's own failure's entry.
  const Event* FirstGenerationAfter(double t, const std::function<bool(const nlohmann::json&)>& ok) const;
  nlohmann::json ReactionToFault(const Timed<records::Fault>& f) const;
  std::vector<nlohmann::json> DetectedStragglers(double train_start, std::vector<std::string>& detected) const;
  nlohmann::json UndetectedStraggler(const std::string& who, double train_start) const;
  nlohmann::json ReactionToOwnFailure(const Event& e) const;

  std::string metrics_path_;
  Callbacks cb_;
  std::vector<std::string> injected_stragglers_;
  std::optional<JsonLinesWriter> writer_;
  bool write_failed_ = false;
  double start_ = 0;
  std::vector<Worker> workers_;
  JsonLinesTail tail_;  // the job's records in metrics.jsonl
  double last_poll_ = 0;
  std::vector<Timed<records::Fault>> faults_;  // the injector's fired faults
  std::vector<Event> generations_;  // {"number", "members", "why", "names"}
  std::vector<double> coordinator_followed_;  // OnCoordinatorFollowed's times (unix seconds)
  std::vector<Timed<records::Straggler>> stragglers_;  // the job's straggler records
  std::vector<Timed<records::Recovery>> recoveries_;   // the job's recovery records
  std::vector<Event> own_failures_;  // {"worker", "pid", "code", "why"}: OnExit's failures
  coord::WorkQueueCounts queue_;    // the last counts OnQueueCounts saw
};

}  // namespace tenax

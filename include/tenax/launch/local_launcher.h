// The local launcher (`tenax run`): one multi-process job on this machine.
// It validates the job, starts `tenax coordinator` (state in
// out_dir/coordinator.db, its port read from out_dir/coordinator.port) and
// then cluster.workers `tenax worker` processes under one ProcessSupervisor,
// each with stdout+stderr in out_dir/logs/<name>.log; follows the job as a
// watcher of the coordinator (coord/job_watcher.h); and once it is done,
// waits for every child and completes rank 0's summary.json with the
// launcher's wall time.
//
// Fault plans (the job's [[faults]] and [faults.random], job/fault_plan.h)
// are executed here with real signals on the children, and new workers
// started for `restart` (joiners, without a rank). In an elastic job every
// worker's exit is the coordinator's to judge (the others go on), each new
// generation is a notice line, and workers that had not joined when the
// job ended are stopped.
//
// It lives in train, not cli, because it is the training job's
// orchestration (it reads the job's TrainConfig and reports TrainProgress);
// it is not in coord because it starts training processes.
//
// Process-wide effects: sets up logging ("run"), the stop handlers, and
// $TENAX_SECRET (a random secret unless one is configured), which the
// children inherit. Threading: the calling thread, which must outlive the
// children (they get SIGTERM when it ends).
// Failure: on the coordinator's failure verdict, a lost coordinator or a
// stop signal every child gets SIGTERM, SIGKILL after 5 s, and all are
// reaped before the status returns (PeerLost naming the failed rank and
// host, PeerLost with the first child's failure, Cancelled).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/train/progress.h"

namespace tenax {

// One worker process as the launcher sees it, for a live view. States:
// "starting" (started, not yet in a generation), "active", "slow" (the job
// detected it as a straggler), "preempted" (sent SIGTERM), "killed"
// (SIGKILLed or died), "stopped" (SIGSTOPped), "rejoining" (a replacement
// started, not yet a member), "spare" (a warm spare waiting outside the
// job, cluster.spares), "left" (out of the job), "done".
struct WorkerStatus {
  std::string name;    // "worker 2", "joiner 1"
  std::string state;   // one of the states above
  std::string host;    // the emulated host it runs on ("" without a topology)
  std::string detail;  // free text: "share 41 of 256", "1.8x the median step time"
  double since_seconds = 0;  // seconds since the launcher started the workers, when the state began
};

struct LaunchOptions {
  std::string job_path;                // mode = "sync"
  std::vector<std::string> overrides;  // "key=value"; applied here and passed to every child
  std::string out_dir;                 // the run directory (created if needed)
  // The binary whose `coordinator` and `worker` subcommands are started;
  // "" = this executable.
  std::string tenax_binary;
  // Run without the job's fault plan (`tenax run --no-faults`: the
  // fault-free reference); the caller turns [stragglers] off with a --set.
  bool without_faults = false;
  ProgressFn on_progress;  // the job's progress, as far as its slowest rank got; may be empty
  // One-line notices for the user (where the logs are, that children are
  // being stopped); may be empty.
  std::function<void(const std::string&)> on_notice;
  // Every worker's state, called whenever one changes; may be empty.
  std::function<void(const std::vector<WorkerStatus>&)> on_workers;
};

struct LaunchOutcome {
  nlohmann::json summary;  // out_dir/summary.json as written, with launcher_wall_seconds
  int64_t workers = 0;
  // The job ran in a launcher re-run inside an emulated topology's
  // namespaces, which already showed its result lines.
  bool reported_by_child = false;
  // The job asks for out_dir/report.html (report.html); false in the
  // launcher re-run inside a topology (its parent writes it, once the
  // summary is complete).
  bool write_report = false;
};

Result<LaunchOutcome> LaunchLocalJob(const LaunchOptions& options);

}  // namespace tenax

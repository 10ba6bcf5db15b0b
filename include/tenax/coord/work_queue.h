// The work units of an asynchronous job (mode "async", docs/async.md), kept
// by the coordinator in SQLite next to its JobStore tables (same file, its
// own connection and tables), in the style of BOINC's transitioner:
//
//   * the job is cut into units: unit u covers the global steps
//     [start_step, start_step + steps) of the job's sampling schedule
//     (train/training_loop.h), trained by one worker as local steps;
//   * a worker leases a unit (attempt a, deadline = now + lease); a lease
//     that expires is re-issued as attempt a+1 (counted as a re-issue);
//   * the parameter-server shards that must merge a result each validate
//     their part and report it (ReportCheck); when every shard still
//     needing the unit reported, ONE transaction decides: all valid -> the
//     unit is accepted with that attempt (every later result of the unit,
//     from any attempt, is refused as a duplicate), else it is rejected and
//     re-issued. A unit errors out after max_attempts failed copies (the
//     job then fails: something is wrong with its data or model);
//   * each shard reports the merge it made (RecordMerged, with the shard's
//     merge sequence number); a shard restarted from an older checkpoint
//     reports how many merges its checkpoint holds (ShardRestored) and the
//     units merged after it are re-opened for that shard only, so every
//     shard merges every unit exactly once;
//   * a partial result (a worker's preemption notice: steps_done < steps)
//     is accepted for its steps, and the remaining steps become a new unit.
//
// Every decision is logged in the `unit_event` table (and returned), so a
// test or a user can check from the log that each unit was merged exactly
// once per shard. A restarted coordinator reopening the file continues with
// the same units, leases, attempts and decisions.
//
// Times are milliseconds on a clock the caller passes in (the coordinator
// uses the wall clock, so leases survive its restart; tests pass their own).
// Threading: one WorkQueue per thread. Failures: IoError naming the file for
// anything SQLite reports; InvalidArgument for calls that name a unit,
// attempt or shard the queue does not know (untrusted peers send them:
// nothing changes, the caller logs it and answers the peer).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tenax/core/status.h"

struct sqlite3;
namespace tenax {
class SqliteDb;
}

namespace tenax::coord {

struct WorkQueueOptions {
  int64_t total_steps = 0;  // the job's steps; units cover [0, total_steps)
  int64_t unit_steps = 20;  // steps per unit (the last one may be shorter)
  int shards = 1;           // parameter-server shards that merge every unit
  int64_t lease_ms = 30000;
  int max_attempts = 5;     // failed copies (expired or rejected) before a unit errors out
};

struct UnitLease {
  int64_t unit = 0;
  int64_t attempt = 0;  // 1 for the first copy
  int64_t start_step = 0;
  int64_t steps = 0;
  int64_t deadline_ms = 0;
  std::string worker;   // who holds it (a name for logs: "worker 3 (host/pid)")
  // The shards that must merge this attempt's result (all of them, unless
  // the unit was re-opened for one shard restarted from a checkpoint).
  std::vector<int> shards;
};

// What Lease() returned: a unit, nothing leasable right now (every open
// unit is leased or waiting for its verdict: ask again later), or the job's
// units are all accepted and merged by every shard.
struct LeaseOutcome {
  enum class Kind { kUnit, kWait, kAllDone } kind = Kind::kWait;
  UnitLease lease;
};

// The verdict on one result, once every shard that must merge the unit has
// checked its part.
struct UnitVerdict {
  enum class Kind {
    kPending,    // not every shard has reported yet
    kAccepted,   // merge it: `merge_shards` must merge this attempt's result
    kRejected,   // a shard found it invalid (`reason`); the unit is re-issued
    kDuplicate,  // the unit was already accepted (another attempt, or this one again): drop it
    kStale,      // an attempt the queue never issued, or a lease that expired and was re-issued
                 // AND whose unit is no longer open: drop it
  } kind = Kind::kPending;
  int64_t unit = 0, attempt = 0;
  std::vector<int> merge_shards;
  std::string reason;
};

struct WorkQueueCounts {
  int64_t units = 0;             // units now (grows when partial results split one)
  int64_t units_issued = 0;      // leases granted (first copies and re-issues)
  int64_t units_reissued = 0;    // leases granted for an attempt > 1
  int64_t results_rejected = 0;  // verdicts kRejected
  int64_t leases_expired = 0;
  int64_t partial_results = 0;   // accepted with steps_done < steps
  int64_t accepted = 0;          // units accepted
  int64_t merged_everywhere = 0; // units every shard merged
  int64_t failed_units = 0;      // units that errored out (max_attempts)
  bool operator==(const WorkQueueCounts&) const = default;
};

// One line of the decision log.
struct UnitEvent {
  int64_t seq = 0;
  int64_t at_ms = 0;
  int64_t unit = 0, attempt = 0;
  int shard = -1;        // -1 when not about one shard
  std::string what;      // "issued", "expired", "released", "checked", "accepted", "rejected",
                         // "duplicate", "merged", "reopened", "split", "failed"
  std::string detail;
};

class WorkQueue {
 public:
  // Opens (creating its tables) or resumes the queue in the SQLite file at
  // `path`. A resumed queue keeps its stored options (total_steps,
  // unit_steps, shards): FailedPrecondition if `options` differ, naming both.
  static Result<std::unique_ptr<WorkQueue>> Open(const std::string& path, const WorkQueueOptions& options);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Re-issues every lease whose deadline is <= now_ms (logged "expired");
  // returns how many. Called before every Lease and periodically.
  Result<int> ExpireLeases(int64_t now_ms);

  // `worker`'s process is gone (its connection to the coordinator was
  // lost): its leases expire now rather than at their deadlines, so its
  // units are issued again at once. Returns how many.
  Result<int> ExpireLeasesOf(const std::string& worker, const std::string& why, int64_t now_ms);

  // The lowest open unit not leased right now (expired leases first
  // re-issued), leased to `worker` until now_ms + lease_ms.
  Result<LeaseOutcome> Lease(const std::string& worker, int64_t now_ms);

  // The worker gives its lease back without a result (it is stopping): the
  // unit is open again at once (not counted as a failed copy).
  Status Release(int64_t unit, int64_t attempt, const std::string& why, int64_t now_ms);

  // Shard `shard` checked its part of the result of (unit, attempt)
  // covering steps_done steps from the unit's start: valid, or not with
  // `reason`. Returns the verdict once every shard that must merge the unit
  // reported (kPending before). A result of an expired attempt is still
  // checked and accepted if the unit is open (its work is as good as the
  // re-issued copy's; the re-issued copy's lease is then cancelled and its
  // result will be kDuplicate). A shard that reports again on an attempt
  // already accepted for it and not yet merged (it asks again after a
  // reconnect) gets kAccepted again with merge_shards = {shard}.
  // steps_done must be 1..steps.
  Result<UnitVerdict> ReportCheck(int64_t unit, int64_t attempt, int shard, bool valid, const std::string& reason,
                                  int64_t steps_done, int64_t now_ms);

  // Shard `shard` merged (unit, attempt) as its merge number `merge_seq`
  // (1, 2, ... in the shard's own order; persisted in its checkpoints).
  // InvalidArgument unless the unit was accepted with that attempt and the
  // shard had yet to merge it. The same report again (same attempt and
  // merge_seq: a shard re-telling a merge whose report a coordinator restart
  // may have lost) changes nothing and is Ok.
  Status RecordMerged(int64_t unit, int64_t attempt, int shard, int64_t merge_seq, int64_t now_ms);

  // Shard `shard` restarted (a new process) from a checkpoint holding its
  // first `merges_in_checkpoint` merges: every unit it merged with a higher
  // merge_seq, and every unit accepted for it whose merge it never
  // reported (the result died with the old process), is re-opened for this
  // shard only (logged "reopened") and will be leased again; returns those
  // units. A shard that only reconnected (same process) lost nothing and
  // must not call this.
  Result<std::vector<int64_t>> ShardRestored(int shard, int64_t merges_in_checkpoint, int64_t now_ms);

  // The (unit, attempt) pairs accepted for `shard` whose merge it has not
  // reported, by unit: after a coordinator restart a shard that reconnects
  // is told "merge" for each again (it merged them and re-tells it, or
  // merges them now), since a verdict or a merge report may have died with
  // the old coordinator.
  Result<std::vector<std::pair<int64_t, int64_t>>> AcceptedNotMerged(int shard);

  Result<WorkQueueCounts> Counts();
  // The decision log, oldest first.
  Result<std::vector<UnitEvent>> Events();
  // True when every unit is accepted and merged by every shard.
  Result<bool> AllDone();
  // The (unit, shard) pairs the job needs merged, each exactly once, in
  // order: every unit on every shard, except a unit split off a partial
  // result that only some shards needed (a unit re-opened for a shard
  // restarted from its checkpoint): its remainder is needed by those shards
  // alone. What a check of the merge log counts against.
  Result<std::vector<std::pair<int64_t, int>>> RequiredMerges();

 private:
  WorkQueue() = default;
  std::unique_ptr<SqliteDb> sqlite_;
  sqlite3* db_ = nullptr;  // sqlite_'s connection
  std::string path_;
  WorkQueueOptions options_;
};

}  // namespace tenax::coord

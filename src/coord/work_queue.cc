#include "tenax/coord/work_queue.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "tenax/core/sqlite_db.h"

namespace tenax::coord {
namespace {

using Stmt = SqliteStatement;

// Per (unit, shard): whether the shard still has to merge the unit.
//   pending  - needs an accepted result
//   accepted - a result was accepted for it (attempt), the merge not reported
//   merged   - merged (attempt, merge_seq)
//   none     - this shard never needs it (a remainder of a unit re-opened
//              for another shard only)
// The tables whose rows drive decisions carry a checksum of their values
// (core/sqlite_db.h, RowChecksumColumn); Open verifies them.
constexpr ChecksummedTable kOptionsTable{
    "wq_options", "id, total_steps, unit_steps, shards, issued, reissued, rejected, expired, partial, accepted",
    "'the options'"};
constexpr ChecksummedTable kUnitTable{
    "wq_unit", "unit, start_step, steps, attempts, failed_copies, failed, lease_attempt, lease_worker, lease_deadline",
    "'unit ' || unit"};
constexpr ChecksummedTable kNeedTable{"wq_need", "unit, shard, state, attempt, merge_seq",
                                      "'unit ' || unit || ', shard ' || shard"};
constexpr ChecksummedTable kAttemptTable{"wq_attempt", "unit, attempt, shards, worker, state",
                                         "'unit ' || unit || ', attempt ' || attempt"};
constexpr ChecksummedTable kCheckTable{"wq_check", "unit, attempt, shard, valid, reason, steps_done",
                                       "'unit ' || unit || ', attempt ' || attempt || ', shard ' || shard"};

std::string Schema() {
  return R"sql(
CREATE TABLE IF NOT EXISTS wq_options (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  total_steps INTEGER NOT NULL, unit_steps INTEGER NOT NULL, shards INTEGER NOT NULL,
  issued INTEGER NOT NULL DEFAULT 0, reissued INTEGER NOT NULL DEFAULT 0, rejected INTEGER NOT NULL DEFAULT 0,
  expired INTEGER NOT NULL DEFAULT 0, partial INTEGER NOT NULL DEFAULT 0, accepted INTEGER NOT NULL DEFAULT 0,
  )sql" + RowChecksumColumn(kOptionsTable) + R"sql(
);
CREATE TABLE IF NOT EXISTS wq_unit (
  unit INTEGER PRIMARY KEY, start_step INTEGER NOT NULL, steps INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0, failed_copies INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0,
  lease_attempt INTEGER NOT NULL DEFAULT 0, lease_worker TEXT NOT NULL DEFAULT '', lease_deadline INTEGER NOT NULL DEFAULT 0,
  )sql" + RowChecksumColumn(kUnitTable) + R"sql(
);
CREATE TABLE IF NOT EXISTS wq_need (
  unit INTEGER NOT NULL, shard INTEGER NOT NULL, state TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0, merge_seq INTEGER NOT NULL DEFAULT 0,
  )sql" + RowChecksumColumn(kNeedTable) + R"sql(,
  PRIMARY KEY (unit, shard)
);
CREATE TABLE IF NOT EXISTS wq_attempt (
  unit INTEGER NOT NULL, attempt INTEGER NOT NULL, shards TEXT NOT NULL, worker TEXT NOT NULL,
  state TEXT NOT NULL,
  )sql" + RowChecksumColumn(kAttemptTable) + R"sql(,
  PRIMARY KEY (unit, attempt)
);
CREATE TABLE IF NOT EXISTS wq_check (
  unit INTEGER NOT NULL, attempt INTEGER NOT NULL, shard INTEGER NOT NULL,
  valid INTEGER NOT NULL, reason TEXT NOT NULL, steps_done INTEGER NOT NULL,
  )sql" + RowChecksumColumn(kCheckTable) + R"sql(,
  PRIMARY KEY (unit, attempt, shard)
);
-- The lease path's lookups, so that a lease costs the same at the end of a
-- long job as at its start (tenax bench coord-load: at 1000 members every
-- lease scanned the finished units and every lease's expiry check the whole
-- table): pending needs in unit order, and the held leases by deadline and
-- by worker.
CREATE INDEX IF NOT EXISTS wq_need_by_state ON wq_need (state, unit);
CREATE INDEX IF NOT EXISTS wq_unit_held_by_deadline ON wq_unit (lease_deadline) WHERE lease_attempt > 0;
CREATE INDEX IF NOT EXISTS wq_unit_held_by_worker ON wq_unit (lease_worker) WHERE lease_attempt > 0;
CREATE TABLE IF NOT EXISTS wq_event (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, at_ms INTEGER NOT NULL, unit INTEGER NOT NULL, attempt INTEGER NOT NULL,
  shard INTEGER NOT NULL, what TEXT NOT NULL, detail TEXT NOT NULL
);
)sql";
}

std::string JoinInts(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::vector<int> SplitInts(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (!part.empty()) out.push_back(std::stoi(part));
  }
  return out;
}

struct UnitRow {
  int64_t unit = 0, start_step = 0, steps = 0, attempts = 0, failed_copies = 0;
  bool failed = false;
  int64_t lease_attempt = 0, lease_deadline = 0;
  std::string lease_worker;
};

}  // namespace

namespace {

// The queue's SQL helpers; every public call runs them inside one
// transaction (InTransaction below).
class WorkQueueSql {
 public:
  WorkQueueSql(SqliteDb& db, const WorkQueueOptions& o) : sqlite_(db), db_(db.get()), o_(o) {}

  SqliteDb& sqlite() { return sqlite_; }
  Status Error(const std::string& what) const { return sqlite_.Error(what); }
  Status Exec(const std::string& sql) { return sqlite_.Exec(sql); }
  Status Run(Stmt& s, const char* what) {
    if (!s.ok()) return Error(std::string("cannot prepare ") + what);
    const int rc = s.Step();
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? Status::Ok() : Error(what);
  }

  Status Event(int64_t now, int64_t unit, int64_t attempt, int shard, const char* what, const std::string& detail) {
    Stmt s(db_, "INSERT INTO wq_event (at_ms, unit, attempt, shard, what, detail) VALUES (?, ?, ?, ?, ?, ?)");
    s.Bind(1, now).Bind(2, unit).Bind(3, attempt).Bind(4, int64_t{shard}).Bind(5, std::string(what)).Bind(6, detail);
    return Run(s, "cannot log an event");
  }
  Status Count(const char* column, int64_t by = 1) {
    const std::string sql = std::string("UPDATE wq_options SET ") + column + " = " + column + " + ? WHERE id = 1";
    Stmt s(db_, sql.c_str());
    s.Bind(1, by);
    return Run(s, "cannot count");
  }

  Result<std::optional<UnitRow>> Unit(int64_t unit) {
    Stmt s(db_,
           "SELECT unit, start_step, steps, attempts, failed_copies, failed, lease_attempt, lease_deadline, "
           "lease_worker FROM wq_unit WHERE unit = ?");
    if (!s.ok()) return Error("cannot read a unit");
    s.Bind(1, unit);
    const int rc = s.Step();
    if (rc == SQLITE_DONE) return std::optional<UnitRow>();
    if (rc != SQLITE_ROW) return Error("cannot read a unit");
    return std::optional<UnitRow>(UnitRow{s.Int(0), s.Int(1), s.Int(2), s.Int(3), s.Int(4), s.Int(5) != 0, s.Int(6),
                                          s.Int(7), s.Text(8)});
  }
  Status SetLease(int64_t unit, int64_t attempt, const std::string& worker, int64_t deadline) {
    Stmt s(db_, "UPDATE wq_unit SET lease_attempt = ?, lease_worker = ?, lease_deadline = ? WHERE unit = ?");
    s.Bind(1, attempt).Bind(2, worker).Bind(3, deadline).Bind(4, unit);
    return Run(s, "cannot write a lease");
  }
  Status ClearLease(int64_t unit) { return SetLease(unit, 0, "", 0); }

  // A failed copy (expired or rejected); the unit errors out at max_attempts.
  Status FailedCopy(int64_t unit, int64_t attempt, int64_t now) {
    Stmt s(db_, "UPDATE wq_unit SET failed_copies = failed_copies + 1 WHERE unit = ?");
    s.Bind(1, unit);
    TENAX_RETURN_IF_ERROR(Run(s, "cannot count a failed copy"));
    TENAX_ASSIGN_OR_RETURN(auto row, Unit(unit));
    TENAX_ASSIGN_OR_RETURN(auto pending, ShardsIn(unit, "pending"));
    if (row && !row->failed && row->failed_copies >= o_.max_attempts && !pending.empty()) {
      Stmt f(db_, "UPDATE wq_unit SET failed = 1 WHERE unit = ?");
      f.Bind(1, unit);
      TENAX_RETURN_IF_ERROR(Run(f, "cannot fail a unit"));
      TENAX_RETURN_IF_ERROR(Event(now, unit, attempt, -1, "failed",
                                  std::to_string(row->failed_copies) + " failed copies (async.max_attempts = " +
                                      std::to_string(o_.max_attempts) + ")"));
    }
    return Status::Ok();
  }

  Result<std::vector<int>> ShardsIn(int64_t unit, const std::string& state) {
    Stmt s(db_, "SELECT shard FROM wq_need WHERE unit = ? AND state = ? ORDER BY shard");
    if (!s.ok()) return Error("cannot read shard needs");
    s.Bind(1, unit).Bind(2, state);
    std::vector<int> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.push_back(static_cast<int>(s.Int(0)));
    if (rc != SQLITE_DONE) return Error("cannot read shard needs");
    return out;
  }
  struct Need {
    std::string state;
    int64_t attempt = 0, merge_seq = 0;
  };
  Result<std::optional<Need>> NeedOf(int64_t unit, int shard) {
    Stmt s(db_, "SELECT state, attempt, merge_seq FROM wq_need WHERE unit = ? AND shard = ?");
    if (!s.ok()) return Error("cannot read a shard need");
    s.Bind(1, unit).Bind(2, int64_t{shard});
    const int rc = s.Step();
    if (rc == SQLITE_DONE) return std::optional<Need>();
    if (rc != SQLITE_ROW) return Error("cannot read a shard need");
    return std::optional<Need>(Need{s.Text(0), s.Int(1), s.Int(2)});
  }
  Status SetNeed(int64_t unit, int shard, const std::string& state, int64_t attempt, int64_t merge_seq) {
    Stmt s(db_, "INSERT OR REPLACE INTO wq_need (unit, shard, state, attempt, merge_seq) VALUES (?, ?, ?, ?, ?)");
    s.Bind(1, unit).Bind(2, int64_t{shard}).Bind(3, state).Bind(4, attempt).Bind(5, merge_seq);
    return Run(s, "cannot write a shard need");
  }
  Status AddUnit(int64_t unit, int64_t start, int64_t steps, const std::vector<int>& needing) {
    Stmt s(db_, "INSERT INTO wq_unit (unit, start_step, steps) VALUES (?, ?, ?)");
    s.Bind(1, unit).Bind(2, start).Bind(3, steps);
    TENAX_RETURN_IF_ERROR(Run(s, "cannot add a unit"));
    for (int sh = 0; sh < o_.shards; ++sh) {
      const bool needs = std::find(needing.begin(), needing.end(), sh) != needing.end();
      TENAX_RETURN_IF_ERROR(SetNeed(unit, sh, needs ? "pending" : "none", 0, 0));
    }
    return Status::Ok();
  }

  struct AttemptRow {
    std::vector<int> shards;
    std::string state;  // "issued", "rejected", "accepted"
  };
  Result<std::optional<AttemptRow>> Attempt(int64_t unit, int64_t attempt) {
    Stmt s(db_, "SELECT shards, state FROM wq_attempt WHERE unit = ? AND attempt = ?");
    if (!s.ok()) return Error("cannot read an attempt");
    s.Bind(1, unit).Bind(2, attempt);
    const int rc = s.Step();
    if (rc == SQLITE_DONE) return std::optional<AttemptRow>();
    if (rc != SQLITE_ROW) return Error("cannot read an attempt");
    return std::optional<AttemptRow>(AttemptRow{SplitInts(s.Text(0)), s.Text(1)});
  }
  Status SetAttemptState(int64_t unit, int64_t attempt, const std::string& state) {
    Stmt s(db_, "UPDATE wq_attempt SET state = ? WHERE unit = ? AND attempt = ?");
    s.Bind(1, state).Bind(2, unit).Bind(3, attempt);
    return Run(s, "cannot write an attempt");
  }

  SqliteDb& sqlite_;
  sqlite3* db_;
  const WorkQueueOptions& o_;
};

// The write transaction every public call runs in (SqliteDb: BEGIN
// IMMEDIATE ... COMMIT, ROLLBACK when `fn` fails).
template <typename Fn>
auto InTransaction(WorkQueueSql& q, Fn&& fn) -> decltype(fn()) {
  return q.sqlite().WriteTransaction(std::forward<Fn>(fn));
}

}  // namespace

WorkQueue::~WorkQueue() = default;

Result<std::unique_ptr<WorkQueue>> WorkQueue::Open(const std::string& path, const WorkQueueOptions& o) {
  if (o.total_steps < 1 || o.unit_steps < 1 || o.shards < 1 || o.shards > 64 || o.lease_ms < 1 || o.max_attempts < 1) {
    return InvalidArgument("work queue options out of range (total_steps " + std::to_string(o.total_steps) +
                           ", unit_steps " + std::to_string(o.unit_steps) + ", shards " + std::to_string(o.shards) +
                           ", lease_ms " + std::to_string(o.lease_ms) + ", max_attempts " +
                           std::to_string(o.max_attempts) + ")");
  }
  std::unique_ptr<WorkQueue> q(new WorkQueue());
  q->path_ = path;
  q->options_ = o;
  // SqliteDb: WAL, the 30 s busy timeout, and retries while another process
  // (the launcher reads the queue once a second) sets up the WAL index.
  TENAX_ASSIGN_OR_RETURN(SqliteDb opened, SqliteDb::Open(path, "work queue"));
  q->sqlite_ = std::make_unique<SqliteDb>(std::move(opened));
  q->db_ = q->sqlite_->get();
  WorkQueueSql sql(*q->sqlite_, q->options_);
  // An accepted result must survive a power loss, not only a crash of the
  // coordinator: FULL syncs the WAL at every commit.
  TENAX_RETURN_IF_ERROR(sql.Exec("PRAGMA synchronous = FULL"));
  TENAX_RETURN_IF_ERROR(InTransaction(sql, [&]() -> Status {
    TENAX_RETURN_IF_ERROR(sql.Exec(Schema()));
    for (const ChecksummedTable& t : {kOptionsTable, kUnitTable, kNeedTable, kAttemptTable, kCheckTable}) {
      TENAX_RETURN_IF_ERROR(q->sqlite_->VerifyRowChecksums(t));
    }
    Stmt s(q->db_, "SELECT total_steps, unit_steps, shards FROM wq_options WHERE id = 1");
    if (!s.ok()) return sql.Error("cannot read the queue's options");
    const int rc = s.Step();
    if (rc == SQLITE_ROW) {
      if (s.Int(0) != o.total_steps || s.Int(1) != o.unit_steps || s.Int(2) != o.shards) {
        return FailedPrecondition(path + " holds a work queue of " + std::to_string(s.Int(0)) + " steps in units of " +
                                  std::to_string(s.Int(1)) + " for " + std::to_string(s.Int(2)) +
                                  " shard(s); this job has " + std::to_string(o.total_steps) + ", " +
                                  std::to_string(o.unit_steps) + " and " + std::to_string(o.shards));
      }
      return Status::Ok();
    }
    if (rc != SQLITE_DONE) return sql.Error("cannot read the queue's options");
    Stmt ins(q->db_, "INSERT INTO wq_options (id, total_steps, unit_steps, shards) VALUES (1, ?, ?, ?)");
    ins.Bind(1, o.total_steps).Bind(2, o.unit_steps).Bind(3, int64_t{o.shards});
    TENAX_RETURN_IF_ERROR(sql.Run(ins, "cannot write the queue's options"));
    std::vector<int> all;
    for (int s2 = 0; s2 < o.shards; ++s2) all.push_back(s2);
    int64_t unit = 0;
    for (int64_t start = 0; start < o.total_steps; start += o.unit_steps, ++unit) {
      TENAX_RETURN_IF_ERROR(sql.AddUnit(unit, start, std::min(o.unit_steps, o.total_steps - start), all));
    }
    return Status::Ok();
  }));
  return q;
}

namespace {

// Expires the leases `select` (a SELECT unit, lease_attempt ... with one
// parameter, `key`) finds, each logged "expired" with `why`.
template <typename Key>
Result<int> ExpireWhere(WorkQueueSql& q, sqlite3* db, const char* select, const Key& key, const std::string& why,
                        int64_t now_ms) {
  return InTransaction(q, [&]() -> Result<int> {
    std::vector<std::pair<int64_t, int64_t>> expired;
    {
      Stmt s(db, select);
      if (!s.ok()) return q.Error("cannot read leases");
      s.Bind(1, key);
      int rc;
      while ((rc = s.Step()) == SQLITE_ROW) expired.emplace_back(s.Int(0), s.Int(1));
      if (rc != SQLITE_DONE) return q.Error("cannot read leases");
    }
    for (const auto& [unit, attempt] : expired) {
      TENAX_RETURN_IF_ERROR(q.ClearLease(unit));
      TENAX_RETURN_IF_ERROR(q.Count("expired"));
      TENAX_RETURN_IF_ERROR(q.Event(now_ms, unit, attempt, -1, "expired", why));
      TENAX_RETURN_IF_ERROR(q.FailedCopy(unit, attempt, now_ms));
    }
    return static_cast<int>(expired.size());
  });
}

}  // namespace

Result<int> WorkQueue::ExpireLeases(int64_t now_ms) {
  WorkQueueSql q(*sqlite_, options_);
  return ExpireWhere(q, db_, "SELECT unit, lease_attempt FROM wq_unit WHERE lease_attempt > 0 AND lease_deadline <= ?",
                     now_ms, "the lease passed its deadline", now_ms);
}

Result<int> WorkQueue::ExpireLeasesOf(const std::string& worker, const std::string& why, int64_t now_ms) {
  WorkQueueSql q(*sqlite_, options_);
  return ExpireWhere(q, db_, "SELECT unit, lease_attempt FROM wq_unit WHERE lease_attempt > 0 AND lease_worker = ?",
                     worker, worker + " is gone: " + why, now_ms);
}

Result<LeaseOutcome> WorkQueue::Lease(const std::string& worker, int64_t now_ms) {
  TENAX_RETURN_IF_ERROR(ExpireLeases(now_ms).status());
  WorkQueueSql q(*sqlite_, options_);
  return InTransaction(q, [&]() -> Result<LeaseOutcome> {
    LeaseOutcome out;
    // The lowest unit that a shard still needs and nobody holds: walks the
    // pending needs in unit order (wq_need_by_state), skipping only the
    // units held now, never the finished ones.
    Stmt s(db_,
           "SELECT n.unit FROM wq_need n JOIN wq_unit u ON u.unit = n.unit WHERE n.state = 'pending' AND "
           "u.failed = 0 AND u.lease_attempt = 0 ORDER BY n.unit LIMIT 1");
    if (!s.ok()) return q.Error("cannot find a unit");
    const int rc = s.Step();
    if (rc == SQLITE_DONE) {
      Stmt left(db_, "SELECT COUNT(*) FROM wq_need WHERE state IN ('pending', 'accepted')");
      if (!left.ok() || left.Step() != SQLITE_ROW) return q.Error("cannot count open units");
      out.kind = left.Int(0) == 0 ? LeaseOutcome::Kind::kAllDone : LeaseOutcome::Kind::kWait;
      return out;
    }
    if (rc != SQLITE_ROW) return q.Error("cannot find a unit");
    const int64_t unit = s.Int(0);
    TENAX_ASSIGN_OR_RETURN(auto row, q.Unit(unit));
    TENAX_ASSIGN_OR_RETURN(std::vector<int> shards, q.ShardsIn(unit, "pending"));
    const int64_t attempt = row->attempts + 1;
    Stmt a(db_, "UPDATE wq_unit SET attempts = ? WHERE unit = ?");
    a.Bind(1, attempt).Bind(2, unit);
    TENAX_RETURN_IF_ERROR(q.Run(a, "cannot count an attempt"));
    Stmt ins(db_, "INSERT INTO wq_attempt (unit, attempt, shards, worker, state) VALUES (?, ?, ?, ?, 'issued')");
    ins.Bind(1, unit).Bind(2, attempt).Bind(3, JoinInts(shards)).Bind(4, worker);
    TENAX_RETURN_IF_ERROR(q.Run(ins, "cannot record an attempt"));
    const int64_t deadline = now_ms + options_.lease_ms;
    TENAX_RETURN_IF_ERROR(q.SetLease(unit, attempt, worker, deadline));
    TENAX_RETURN_IF_ERROR(q.Count("issued"));
    if (attempt > 1) TENAX_RETURN_IF_ERROR(q.Count("reissued"));
    TENAX_RETURN_IF_ERROR(q.Event(now_ms, unit, attempt, -1, "issued",
                                  "to " + worker + " for shard(s) " + JoinInts(shards)));
    out.kind = LeaseOutcome::Kind::kUnit;
    out.lease = UnitLease{unit, attempt, row->start_step, row->steps, deadline, worker, shards};
    return out;
  });
}

Status WorkQueue::Release(int64_t unit, int64_t attempt, const std::string& why, int64_t now_ms) {
  WorkQueueSql q(*sqlite_, options_);
  return InTransaction(q, [&]() -> Status {
    TENAX_ASSIGN_OR_RETURN(auto row, q.Unit(unit));
    if (!row || row->lease_attempt != attempt || attempt == 0) {
      return InvalidArgument("unit " + std::to_string(unit) + " attempt " + std::to_string(attempt) +
                             " holds no lease to release");
    }
    TENAX_RETURN_IF_ERROR(q.ClearLease(unit));
    TENAX_RETURN_IF_ERROR(q.SetAttemptState(unit, attempt, "released"));
    return q.Event(now_ms, unit, attempt, -1, "released", why);
  });
}

namespace {

// The range checks of a reported check against its unit: InvalidArgument
// naming `what` (the unit and attempt) and the bad value.
Status CheckReportInRange(const std::string& what, const UnitRow& row, int64_t attempt, int shard, int shards,
                          int64_t steps_done) {
  if (attempt < 1 || attempt > row.attempts) {
    return InvalidArgument(what + " was never issued (highest " + std::to_string(row.attempts) + ")");
  }
  if (shard < 0 || shard >= shards) {
    return InvalidArgument(what + ": shard " + std::to_string(shard) + " of " + std::to_string(shards));
  }
  if (steps_done < 1 || steps_done > row.steps) {
    return InvalidArgument(what + ": " + std::to_string(steps_done) + " steps done of " + std::to_string(row.steps));
  }
  return Status::Ok();
}

// Stores one shard's check of (unit, attempt), logged "checked".
Status RecordCheck(WorkQueueSql& q, sqlite3* db, int64_t unit, int64_t attempt, int shard, bool valid,
                   const std::string& reason, int64_t steps_done, int64_t now_ms) {
  Stmt ins(db,
           "INSERT OR IGNORE INTO wq_check (unit, attempt, shard, valid, reason, steps_done) VALUES (?, ?, ?, ?, ?, ?)");
  ins.Bind(1, unit).Bind(2, attempt).Bind(3, int64_t{shard}).Bind(4, int64_t{valid ? 1 : 0}).Bind(5, reason)
      .Bind(6, steps_done);
  TENAX_RETURN_IF_ERROR(q.Run(ins, "cannot record a check"));
  return q.Event(now_ms, unit, attempt, shard, "checked",
                 (valid ? "valid, " : "invalid: " + reason + ", ") + std::to_string(steps_done) + " step(s)");
}

// Every check of an attempt so far: by shard, {valid, steps_done}; and the
// reason of the first invalid one read.
struct AttemptChecks {
  std::map<int, std::pair<bool, int64_t>> by_shard;
  std::string first_reason;
};

Result<AttemptChecks> ChecksOf(WorkQueueSql& q, sqlite3* db, int64_t unit, int64_t attempt) {
  AttemptChecks out;
  Stmt s(db, "SELECT shard, valid, steps_done, reason FROM wq_check WHERE unit = ? AND attempt = ?");
  if (!s.ok()) return q.Error("cannot read checks");
  s.Bind(1, unit).Bind(2, attempt);
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.by_shard[static_cast<int>(s.Int(0))] = {s.Int(1) != 0, s.Int(2)};
    if (s.Int(1) == 0 && out.first_reason.empty()) out.first_reason = s.Text(3);
  }
  if (rc != SQLITE_DONE) return q.Error("cannot read checks");
  return out;
}

// Rejects attempt v.attempt of `row` (its lease, if it still holds it,
// cleared; a failed copy counted) with `why` as the verdict's reason.
Result<UnitVerdict> RejectAttempt(WorkQueueSql& q, const UnitRow& row, UnitVerdict v, const std::string& why,
                                  int64_t now_ms) {
  TENAX_RETURN_IF_ERROR(q.SetAttemptState(v.unit, v.attempt, "rejected"));
  if (row.lease_attempt == v.attempt) TENAX_RETURN_IF_ERROR(q.ClearLease(v.unit));
  TENAX_RETURN_IF_ERROR(q.Count("rejected"));
  TENAX_RETURN_IF_ERROR(q.Event(now_ms, v.unit, v.attempt, -1, "rejected", why));
  TENAX_RETURN_IF_ERROR(q.FailedCopy(v.unit, v.attempt, now_ms));
  v.kind = UnitVerdict::Kind::kRejected;
  v.reason = why;
  return v;
}

// A partial result covers its first steps_done steps; the rest of `row`
// becomes a new unit needed by the same shards.
Status SplitOffTheRest(WorkQueueSql& q, sqlite3* db, const UnitRow& row, int64_t attempt, int64_t steps_done,
                       const std::vector<int>& shards, int64_t now_ms) {
  Stmt next(db, "SELECT COALESCE(MAX(unit), -1) + 1 FROM wq_unit");
  if (!next.ok() || next.Step() != SQLITE_ROW) return q.Error("cannot number a unit");
  const int64_t rest = next.Int(0);
  Stmt shrink(db, "UPDATE wq_unit SET steps = ? WHERE unit = ?");
  shrink.Bind(1, steps_done).Bind(2, row.unit);
  TENAX_RETURN_IF_ERROR(q.Run(shrink, "cannot shrink a unit"));
  TENAX_RETURN_IF_ERROR(q.AddUnit(rest, row.start_step + steps_done, row.steps - steps_done, shards));
  TENAX_RETURN_IF_ERROR(q.Count("partial"));
  return q.Event(now_ms, row.unit, attempt, -1, "split",
                 "steps [" + std::to_string(row.start_step + steps_done) + ", " +
                     std::to_string(row.start_step + row.steps) + ") became unit " + std::to_string(rest));
}

// Accepts `attempt` of `row`: one decision for every shard of the attempt;
// another attempt still leased is cancelled.
Status AcceptAttempt(WorkQueueSql& q, sqlite3* db, const UnitRow& row, int64_t attempt, int64_t steps_done,
                     const std::vector<int>& shards, int64_t now_ms) {
  const int64_t unit = row.unit;
  for (int s : shards) TENAX_RETURN_IF_ERROR(q.SetNeed(unit, s, "accepted", attempt, 0));
  TENAX_RETURN_IF_ERROR(q.SetAttemptState(unit, attempt, "accepted"));
  if (row.lease_attempt != 0) {
    if (row.lease_attempt != attempt) {
      TENAX_RETURN_IF_ERROR(q.Event(now_ms, unit, row.lease_attempt, -1, "cancelled",
                                    "attempt " + std::to_string(attempt) + " was accepted first"));
    }
    TENAX_RETURN_IF_ERROR(q.ClearLease(unit));
  }
  TENAX_RETURN_IF_ERROR(q.Count("accepted"));
  TENAX_RETURN_IF_ERROR(q.Event(now_ms, unit, attempt, -1, "accepted",
                                std::to_string(steps_done) + " step(s), shard(s) " + JoinInts(shards)));
  if (steps_done < row.steps) TENAX_RETURN_IF_ERROR(SplitOffTheRest(q, db, row, attempt, steps_done, shards, now_ms));
  return Status::Ok();
}

}  // namespace

Result<UnitVerdict> WorkQueue::ReportCheck(int64_t unit, int64_t attempt, int shard, bool valid,
                                           const std::string& reason, int64_t steps_done, int64_t now_ms) {
  WorkQueueSql q(*sqlite_, options_);
  return InTransaction(q, [&]() -> Result<UnitVerdict> {
    UnitVerdict v;
    v.unit = unit;
    v.attempt = attempt;
    const std::string what = "unit " + std::to_string(unit) + " attempt " + std::to_string(attempt);
    TENAX_ASSIGN_OR_RETURN(auto row, q.Unit(unit));
    if (!row) return InvalidArgument(what + ": no such unit");
    TENAX_RETURN_IF_ERROR(CheckReportInRange(what, *row, attempt, shard, options_.shards, steps_done));
    TENAX_ASSIGN_OR_RETURN(auto att, q.Attempt(unit, attempt));
    if (!att) return InvalidArgument(what + " has no record");
    if (std::find(att->shards.begin(), att->shards.end(), shard) == att->shards.end()) {
      return InvalidArgument(what + " was not issued for shard " + std::to_string(shard));
    }
    TENAX_ASSIGN_OR_RETURN(auto need, q.NeedOf(unit, shard));
    if (need && need->state == "accepted" && need->attempt == attempt) {
      v.kind = UnitVerdict::Kind::kAccepted;  // asked again (a reconnect): the same answer
      v.merge_shards = {shard};
      return v;
    }
    if (!need || need->state != "pending") {
      v.kind = UnitVerdict::Kind::kDuplicate;
      v.reason = "unit " + std::to_string(unit) + " was already " + (need ? need->state : "done") + " for shard " +
                 std::to_string(shard) + (need && need->attempt ? " by attempt " + std::to_string(need->attempt) : "");
      TENAX_RETURN_IF_ERROR(q.Event(now_ms, unit, attempt, shard, "duplicate", v.reason));
      return v;
    }
    if (att->state != "issued") {
      v.kind = UnitVerdict::Kind::kStale;
      v.reason = what + " was " + att->state;
      return v;
    }
    TENAX_RETURN_IF_ERROR(RecordCheck(q, db_, unit, attempt, shard, valid, reason, steps_done, now_ms));
    TENAX_ASSIGN_OR_RETURN(AttemptChecks checks, ChecksOf(q, db_, unit, attempt));
    std::set<int64_t> steps_seen;
    bool all_valid = true;
    for (const auto& [s, c] : checks.by_shard) {
      all_valid &= c.first;
      steps_seen.insert(c.second);
    }
    if (!all_valid) {
      return RejectAttempt(q, *row, v, checks.first_reason.empty() ? "invalid" : checks.first_reason, now_ms);
    }
    if (steps_seen.size() > 1) {
      return RejectAttempt(q, *row, v, "the shards' parts of the result cover different step counts", now_ms);
    }
    for (int s : att->shards) {
      if (!checks.by_shard.count(s)) {
        v.kind = UnitVerdict::Kind::kPending;
        return v;
      }
    }
    TENAX_RETURN_IF_ERROR(AcceptAttempt(q, db_, *row, attempt, steps_done, att->shards, now_ms));
    v.kind = UnitVerdict::Kind::kAccepted;
    v.merge_shards = att->shards;
    return v;
  });
}

Status WorkQueue::RecordMerged(int64_t unit, int64_t attempt, int shard, int64_t merge_seq, int64_t now_ms) {
  WorkQueueSql q(*sqlite_, options_);
  return InTransaction(q, [&]() -> Status {
    TENAX_ASSIGN_OR_RETURN(auto need, q.NeedOf(unit, shard));
    if (need && need->state == "merged" && need->attempt == attempt && need->merge_seq == merge_seq) {
      return Status::Ok();  // told again after a reconnect: already recorded
    }
    if (!need || need->state != "accepted" || need->attempt != attempt) {
      return InvalidArgument("shard " + std::to_string(shard) + " reports merging unit " + std::to_string(unit) +
                             " attempt " + std::to_string(attempt) + ", which was not accepted for it (" +
                             (need ? need->state : "no such unit") + ")");
    }
    TENAX_RETURN_IF_ERROR(q.SetNeed(unit, shard, "merged", attempt, merge_seq));
    return q.Event(now_ms, unit, attempt, shard, "merged", "merge " + std::to_string(merge_seq));
  });
}

Result<std::vector<int64_t>> WorkQueue::ShardRestored(int shard, int64_t merges_in_checkpoint, int64_t now_ms) {
  WorkQueueSql q(*sqlite_, options_);
  return InTransaction(q, [&]() -> Result<std::vector<int64_t>> {
    if (shard < 0 || shard >= options_.shards) return InvalidArgument("no shard " + std::to_string(shard));
    std::vector<std::pair<int64_t, std::string>> lost;
    {
      Stmt s(db_,
             "SELECT unit, state, attempt, merge_seq FROM wq_need WHERE shard = ? AND "
             "((state = 'merged' AND merge_seq > ?) OR state = 'accepted') ORDER BY unit");
      if (!s.ok()) return q.Error("cannot read merges");
      s.Bind(1, int64_t{shard}).Bind(2, merges_in_checkpoint);
      int rc;
      while ((rc = s.Step()) == SQLITE_ROW) {
        lost.emplace_back(s.Int(0), s.Text(1) == "merged" ? "merge " + std::to_string(s.Int(3)) + " is after the checkpoint's " +
                                                                std::to_string(merges_in_checkpoint)
                                                          : "accepted but never merged");
      }
      if (rc != SQLITE_DONE) return q.Error("cannot read merges");
    }
    std::vector<int64_t> units;
    for (const auto& [unit, why] : lost) {
      TENAX_RETURN_IF_ERROR(q.SetNeed(unit, shard, "pending", 0, 0));
      TENAX_RETURN_IF_ERROR(q.Event(now_ms, unit, 0, shard, "reopened", "shard restarted: " + why));
      units.push_back(unit);
    }
    // Checks its previous process made of results not yet accepted: the
    // results lived in that process's memory, so they cannot be merged
    // now. Forgotten, so that no unit is accepted on them (the soak found a
    // unit accepted on a dead process's check, told "merge" to the new
    // process, which did not hold it: the job waited forever). Their
    // attempts wait for the new process's checks, or expire and are issued
    // again.
    {
      Stmt d(db_,
             "DELETE FROM wq_check WHERE shard = ?1 AND EXISTS (SELECT 1 FROM wq_need n WHERE n.unit = wq_check.unit "
             "AND n.shard = ?1 AND n.state = 'pending')");
      d.Bind(1, int64_t{shard});
      TENAX_RETURN_IF_ERROR(q.Run(d, "cannot forget the restarted shard's checks"));
    }
    return units;
  });
}

Result<std::vector<std::pair<int64_t, int64_t>>> WorkQueue::AcceptedNotMerged(int shard) {
  Stmt s(db_, "SELECT unit, attempt FROM wq_need WHERE shard = ? AND state = 'accepted' ORDER BY unit");
  if (!s.ok()) return IoError(path_ + ": cannot read the accepted units of shard " + std::to_string(shard));
  s.Bind(1, int64_t{shard});
  std::vector<std::pair<int64_t, int64_t>> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.emplace_back(s.Int(0), s.Int(1));
  if (rc != SQLITE_DONE) return IoError(path_ + ": cannot read the accepted units of shard " + std::to_string(shard));
  return out;
}

Result<WorkQueueCounts> WorkQueue::Counts() {
  WorkQueueSql q(*sqlite_, options_);
  WorkQueueCounts c;
  Stmt s(db_, "SELECT issued, reissued, rejected, expired, partial, accepted FROM wq_options WHERE id = 1");
  if (!s.ok() || s.Step() != SQLITE_ROW) return q.Error("cannot read counts");
  c.units_issued = s.Int(0);
  c.units_reissued = s.Int(1);
  c.results_rejected = s.Int(2);
  c.leases_expired = s.Int(3);
  c.partial_results = s.Int(4);
  c.accepted = s.Int(5);
  Stmt u(db_,
         "SELECT COUNT(*), SUM(failed), SUM(NOT EXISTS (SELECT 1 FROM wq_need n WHERE n.unit = wq_unit.unit AND "
         "n.state IN ('pending', 'accepted'))) FROM wq_unit");
  if (!u.ok() || u.Step() != SQLITE_ROW) return q.Error("cannot count units");
  c.units = u.Int(0);
  c.failed_units = u.Int(1);
  c.merged_everywhere = u.Int(2);
  return c;
}

Result<std::vector<UnitEvent>> WorkQueue::Events() {
  WorkQueueSql q(*sqlite_, options_);
  Stmt s(db_, "SELECT seq, at_ms, unit, attempt, shard, what, detail FROM wq_event ORDER BY seq");
  if (!s.ok()) return q.Error("cannot read events");
  std::vector<UnitEvent> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.push_back({s.Int(0), s.Int(1), s.Int(2), s.Int(3), static_cast<int>(s.Int(4)), s.Text(5), s.Text(6)});
  }
  if (rc != SQLITE_DONE) return q.Error("cannot read events");
  return out;
}

Result<bool> WorkQueue::AllDone() {
  WorkQueueSql q(*sqlite_, options_);
  Stmt s(db_, "SELECT COUNT(*) FROM wq_need WHERE state IN ('pending', 'accepted')");
  if (!s.ok() || s.Step() != SQLITE_ROW) return q.Error("cannot count open units");
  return s.Int(0) == 0;
}

Result<std::vector<std::pair<int64_t, int>>> WorkQueue::RequiredMerges() {
  WorkQueueSql q(*sqlite_, options_);
  Stmt s(db_, "SELECT unit, shard FROM wq_need WHERE state != 'none' ORDER BY unit, shard");
  if (!s.ok()) return q.Error("cannot read the merges the job needs");
  std::vector<std::pair<int64_t, int>> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.emplace_back(s.Int(0), static_cast<int>(s.Int(1)));
  if (rc != SQLITE_DONE) return q.Error("cannot read the merges the job needs");
  return out;
}

}  // namespace tenax::coord

#include "tenax/coord/job_store.h"

#include <sqlite3.h>

namespace tenax::coord {
namespace {

// A prepared statement, finalized on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() const { return stmt_; }
  void Bind(int i, const std::string& s) { sqlite3_bind_text(stmt_, i, s.c_str(), static_cast<int>(s.size()), SQLITE_TRANSIENT); }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  int Step() { return sqlite3_step(stmt_); }
  std::string Text(int i) const {
    auto p = sqlite3_column_text(stmt_, i);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, i)))
             : std::string();
  }
  int64_t Int(int i) const { return sqlite3_column_int64(stmt_, i); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS job (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  job_id TEXT NOT NULL,
  config_toml TEXT NOT NULL,
  world INTEGER NOT NULL,
  state TEXT NOT NULL,
  generation INTEGER NOT NULL,
  failure TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS member (
  rank INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  host TEXT NOT NULL,
  port INTEGER NOT NULL,
  state TEXT NOT NULL,
  lease_until_ms INTEGER NOT NULL
);
)sql";

}  // namespace

Status JobStore::Error(const std::string& what) const {
  return IoError("state file " + path_ + ": " + what + ": " + (db_ ? sqlite3_errmsg(db_) : "cannot open"));
}

Status JobStore::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return IoError("state file " + path_ + ": " + msg);
  }
  return Status::Ok();
}

Result<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path) {
  std::unique_ptr<JobStore> s(new JobStore());
  s->path_ = path;
  if (sqlite3_open_v2(path.c_str(), &s->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    return s->Error("cannot open");
  }
  sqlite3_busy_timeout(s->db_, 5000);
  // A file that is not a database fails here, with SQLite's own words.
  TENAX_RETURN_IF_ERROR(s->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
  TENAX_RETURN_IF_ERROR(s->Exec(kSchema));
  return s;
}

JobStore::~JobStore() { sqlite3_close(db_); }

Result<JobRecord> JobStore::OpenJob(const std::string& job_id, const std::string& config_toml, int world) {
  {
    Statement q(db_, "SELECT job_id, config_toml, world, state, generation, failure FROM job WHERE id = 1");
    if (!q.ok()) return Error("read job");
    if (q.Step() == SQLITE_ROW) {
      JobRecord r{q.Text(0), q.Text(1), static_cast<int>(q.Int(2)), q.Text(3), static_cast<uint64_t>(q.Int(4)),
                  q.Text(5), true};
      if (r.job_id != job_id) {
        return FailedPrecondition("state file " + path_ + " belongs to job '" + r.job_id + "', not '" + job_id +
                                  "' (use another --state file)");
      }
      if (r.world != world) {
        return FailedPrecondition("state file " + path_ + ": job '" + job_id + "' was started with " +
                                  std::to_string(r.world) + " workers, the job file now asks for " +
                                  std::to_string(world));
      }
      return r;
    }
  }
  Statement ins(db_, "INSERT INTO job (id, job_id, config_toml, world, state, generation) VALUES (1, ?, ?, ?, 'joining', 0)");
  if (!ins.ok()) return Error("create job");
  ins.Bind(1, job_id);
  ins.Bind(2, config_toml);
  ins.Bind(3, static_cast<int64_t>(world));
  if (ins.Step() != SQLITE_DONE) return Error("create job");
  return JobRecord{job_id, config_toml, world, "joining", 0, "", false};
}

Status JobStore::SetJobState(const std::string& state, const std::string& failure, uint64_t generation) {
  Statement u(db_, "UPDATE job SET state = ?, failure = ?, generation = ? WHERE id = 1");
  if (!u.ok()) return Error("update job");
  u.Bind(1, state);
  u.Bind(2, failure);
  u.Bind(3, static_cast<int64_t>(generation));
  return u.Step() == SQLITE_DONE ? Status::Ok() : Error("update job");
}

Result<std::vector<MemberRecord>> JobStore::Members() {
  Statement q(db_, "SELECT rank, name, host, port, state, lease_until_ms FROM member ORDER BY rank");
  if (!q.ok()) return Error("read members");
  std::vector<MemberRecord> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    out.push_back({static_cast<int>(q.Int(0)), q.Text(1), q.Text(2), static_cast<uint16_t>(q.Int(3)), q.Text(4), q.Int(5)});
  }
  if (rc != SQLITE_DONE) return Error("read members");
  return out;
}

Status JobStore::PutMember(const MemberRecord& m) {
  Statement u(db_, "INSERT OR REPLACE INTO member (rank, name, host, port, state, lease_until_ms) VALUES (?, ?, ?, ?, ?, ?)");
  if (!u.ok()) return Error("write member");
  u.Bind(1, static_cast<int64_t>(m.rank));
  u.Bind(2, m.name);
  u.Bind(3, m.host);
  u.Bind(4, static_cast<int64_t>(m.port));
  u.Bind(5, m.state);
  u.Bind(6, m.lease_until_ms);
  return u.Step() == SQLITE_DONE ? Status::Ok() : Error("write member " + std::to_string(m.rank));
}

Status JobStore::RemoveMember(int rank) {
  Statement u(db_, "DELETE FROM member WHERE rank = ?");
  if (!u.ok()) return Error("remove member");
  u.Bind(1, static_cast<int64_t>(rank));
  return u.Step() == SQLITE_DONE ? Status::Ok() : Error("remove member");
}

Status JobStore::RenewLeases(const std::vector<int>& ranks, int64_t lease_until_ms) {
  TENAX_RETURN_IF_ERROR(Exec("BEGIN"));
  for (int r : ranks) {
    Statement u(db_, "UPDATE member SET lease_until_ms = ? WHERE rank = ?");
    u.Bind(1, lease_until_ms);
    u.Bind(2, static_cast<int64_t>(r));
    if (!u.ok() || u.Step() != SQLITE_DONE) {
      (void)Exec("ROLLBACK");
      return Error("renew leases");
    }
  }
  return Exec("COMMIT");
}

}  // namespace tenax::coord

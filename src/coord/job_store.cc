#include "job_store.h"

#include <sqlite3.h>

#include <set>

namespace tenax::coord {
namespace {

using Statement = SqliteStatement;

// Every table drives decisions (who is a member, of which generation, in
// which state): each row carries a checksum of its values (core/sqlite_db.h,
// RowChecksumColumn), verified when the file is opened.
constexpr ChecksummedTable kJobTable{"job", "id, job_id, config_toml, world, state, generation, failure", "'the job'"};
constexpr ChecksummedTable kMemberTable{"member", "rank, name, host, port, state, lease_until_ms", "'rank ' || rank"};
constexpr ChecksummedTable kGenerationTable{"generation", "number, first_step, why", "'generation ' || number"};
constexpr ChecksummedTable kGenerationMemberTable{"generation_member",
                                                  "generation, rank, name, host, port, state, lease_until_ms",
                                                  "'generation ' || generation || ', rank ' || rank"};
constexpr ChecksummedTable kStableTable{"stable_generation", "id, number", "'the stable generation'"};
constexpr ChecksummedTable kJobTables[] = {kJobTable, kMemberTable, kGenerationTable, kGenerationMemberTable,
                                           kStableTable};

std::string Schema() {
  return R"sql(
CREATE TABLE IF NOT EXISTS job (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  job_id TEXT NOT NULL,
  config_toml TEXT NOT NULL,
  world INTEGER NOT NULL,
  state TEXT NOT NULL,
  generation INTEGER NOT NULL,
  failure TEXT NOT NULL DEFAULT '',
  )sql" + RowChecksumColumn(kJobTable) + R"sql(
);
CREATE TABLE IF NOT EXISTS member (
  rank INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  host TEXT NOT NULL,
  port INTEGER NOT NULL,
  state TEXT NOT NULL,
  lease_until_ms INTEGER NOT NULL,
  )sql" + RowChecksumColumn(kMemberTable) + R"sql(
);
CREATE TABLE IF NOT EXISTS generation (
  number INTEGER PRIMARY KEY,
  first_step INTEGER NOT NULL,
  why TEXT NOT NULL,
  )sql" + RowChecksumColumn(kGenerationTable) + R"sql(
);
CREATE TABLE IF NOT EXISTS generation_member (
  generation INTEGER NOT NULL REFERENCES generation(number),
  rank INTEGER NOT NULL,
  name TEXT NOT NULL,
  host TEXT NOT NULL,
  port INTEGER NOT NULL,
  state TEXT NOT NULL,
  lease_until_ms INTEGER NOT NULL,
  )sql" + RowChecksumColumn(kGenerationMemberTable) + R"sql(,
  PRIMARY KEY (generation, rank)
);
CREATE TABLE IF NOT EXISTS stable_generation (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  number INTEGER NOT NULL,
  )sql" + RowChecksumColumn(kStableTable) + R"sql(
);
)sql";
}

// The member columns, the same in `member` and `generation_member`.
constexpr const char* kMemberColumns = "rank, name, host, port, state, lease_until_ms";

// Binds a member to parameters first..first+5, in kMemberColumns' order.
void BindMember(Statement& u, int first, const MemberRecord& m) {
  u.Bind(first, static_cast<int64_t>(m.rank));
  u.Bind(first + 1, m.name);
  u.Bind(first + 2, m.host);
  u.Bind(first + 3, static_cast<int64_t>(m.port));
  u.Bind(first + 4, std::string(ToString(m.state)));
  u.Bind(first + 5, m.lease_until_ms);
}

// The rows of a SELECT of kMemberColumns. DataLoss names `what` and the rank
// of a row tenax never writes; IoError with SQLite's words if reading fails.
Result<std::vector<MemberRecord>> ReadMembers(sqlite3* db, const std::string& path, Statement& q,
                                              const std::string& what) {
  std::vector<MemberRecord> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    auto state = ParseMemberState(q.Text(4));
    if (!state || q.Int(0) < 0 || q.Int(3) < 0 || q.Int(3) > 65535) {
      return DataLoss("state file " + path + ": " + what + " rank " + std::to_string(q.Int(0)) + " holds state '" +
                      q.Text(4) + "' and port " + std::to_string(q.Int(3)) +
                      ", which tenax never writes (damaged file?)");
    }
    out.push_back(
        {static_cast<int>(q.Int(0)), q.Text(1), q.Text(2), static_cast<uint16_t>(q.Int(3)), *state, q.Int(5)});
  }
  if (rc != SQLITE_DONE) return IoError("state file " + path + ": read " + what + "s: " + sqlite3_errmsg(db));
  return out;
}

}  // namespace

Status JobStore::Error(const std::string& what) const { return sql_->Error(what); }

Status JobStore::Exec(const std::string& sql) { return sql_->Exec(sql); }

Result<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path) {
  std::unique_ptr<JobStore> s(new JobStore());
  s->path_ = path;
  TENAX_ASSIGN_OR_RETURN(SqliteDb db, SqliteDb::Open(path, "state file"));
  s->sql_ = std::make_unique<SqliteDb>(std::move(db));
  s->db_ = s->sql_->get();
  TENAX_RETURN_IF_ERROR(s->CheckOwnership());
  return s;
}

Status JobStore::CheckOwnership() {
  TENAX_ASSIGN_OR_RETURN(int64_t app_id, sql_->ApplicationId());
  // A stamped file gets the tables a newer tenax added (CREATE IF NOT
  // EXISTS); it may also hold the store's catalog (store/catalog.h).
  if (app_id == kTenaxApplicationId) {
    TENAX_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;" + Schema() + "COMMIT;"));
    for (const ChecksummedTable& t : kJobTables) TENAX_RETURN_IF_ERROR(sql_->VerifyRowChecksums(t));
    return Status::Ok();
  }
  if (app_id != 0) {
    return FailedPrecondition("state file " + path_ + " belongs to another program (SQLite application id " +
                              std::to_string(app_id) + "); use another --state file");
  }
  TENAX_ASSIGN_OR_RETURN(std::set<std::string> tables, sql_->Tables());
  // An empty file is new; tables `job` and `member` with tenax's columns are
  // a state file written before files were stamped (it gets the generation
  // tables now). Anything else is not ours.
  const bool ours = tables == std::set<std::string>{"job", "member"} &&
                    Statement(db_, "SELECT job_id, config_toml, world, state, generation, failure FROM job").ok() &&
                    Statement(db_, "SELECT rank, name, host, port, state, lease_until_ms FROM member").ok();
  if (!tables.empty() && !ours) {
    std::string names;
    for (const auto& t : tables) names += (names.empty() ? "" : ", ") + t;
    return FailedPrecondition("state file " + path_ + " is not a tenax coordinator state file (it holds tables " +
                              names + "); use another --state file");
  }
  TENAX_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;" + Schema() + "PRAGMA application_id = " +
                             std::to_string(kTenaxApplicationId) + "; COMMIT;"));
  for (const ChecksummedTable& t : kJobTables) TENAX_RETURN_IF_ERROR(sql_->VerifyRowChecksums(t));
  return Status::Ok();
}

JobStore::~JobStore() = default;

Result<JobRecord> JobStore::OpenJob(const std::string& job_id, const std::string& config_toml, int world) {
  {
    Statement q(db_, "SELECT job_id, config_toml, world, state, generation, failure FROM job WHERE id = 1");
    if (!q.ok()) return Error("read job");
    if (q.Step() == SQLITE_ROW) {
      auto phase = ParseJobPhase(q.Text(3));
      if (!phase || q.Int(2) < 1 || q.Int(4) < 0) {
        return DataLoss("state file " + path_ + ": the job row holds state '" + q.Text(3) + "', " +
                        std::to_string(q.Int(2)) + " workers and generation " + std::to_string(q.Int(4)) +
                        ", which tenax never writes (damaged file?)");
      }
      JobRecord r{q.Text(0), q.Text(1), static_cast<int>(q.Int(2)), *phase, static_cast<uint64_t>(q.Int(4)),
                  q.Text(5), true, 0, {}, {}};
      TENAX_RETURN_IF_ERROR(ReadStable(r));
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
  return JobRecord{job_id, config_toml, world, JobPhase::kJoining, 0, "", false, 0, {}, {}};
}

Status JobStore::ReadStable(JobRecord& r) {
  if (r.generation > 0) {
    Statement n(db_, "SELECT rank FROM generation_member WHERE generation = ? ORDER BY rank");
    if (!n.ok()) return Error("read the members of the newest generation");
    n.Bind(1, static_cast<int64_t>(r.generation));
    int nrc;
    while ((nrc = n.Step()) == SQLITE_ROW) r.newest_members.insert(static_cast<int>(n.Int(0)));
    if (nrc != SQLITE_DONE) return Error("read the members of the newest generation");
  }
  Statement q(db_, "SELECT number FROM stable_generation WHERE id = 1");
  if (!q.ok()) return Error("read the stable generation");
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return Status::Ok();  // none formed yet, or a file from before it was kept
  if (rc != SQLITE_ROW) return Error("read the stable generation");
  if (q.Int(0) < 1 || static_cast<uint64_t>(q.Int(0)) > r.generation) {
    return DataLoss("state file " + path_ + ": stable generation " + std::to_string(q.Int(0)) +
                    " is not one of generations 1.." + std::to_string(r.generation) +
                    ", which tenax never writes (damaged file?)");
  }
  Statement m(db_, "SELECT rank FROM generation_member WHERE generation = ? ORDER BY rank");
  if (!m.ok()) return Error("read the members of the stable generation");
  m.Bind(1, q.Int(0));
  std::set<int> members;
  int mrc;
  while ((mrc = m.Step()) == SQLITE_ROW) members.insert(static_cast<int>(m.Int(0)));
  if (mrc != SQLITE_DONE) return Error("read the members of the stable generation");
  if (members.empty()) {
    return DataLoss("state file " + path_ + ": stable generation " + std::to_string(q.Int(0)) +
                    " has no members (damaged file?)");
  }
  r.stable_generation = static_cast<uint64_t>(q.Int(0));
  r.stable_members = std::move(members);
  return Status::Ok();
}

Status JobStore::SetStableGeneration(uint64_t generation) {
  Statement u(db_, "INSERT OR REPLACE INTO stable_generation (id, number) VALUES (1, ?)");
  if (!u.ok()) return Error("write the stable generation");
  u.Bind(1, static_cast<int64_t>(generation));
  return u.Step() == SQLITE_DONE ? Status::Ok() : Error("write the stable generation " + std::to_string(generation));
}

Status JobStore::SetJobState(JobPhase phase, const std::string& failure, uint64_t generation) {
  Statement u(db_, "UPDATE job SET state = ?, failure = ?, generation = ? WHERE id = 1");
  if (!u.ok()) return Error("update job");
  u.Bind(1, std::string(ToString(phase)));
  u.Bind(2, failure);
  u.Bind(3, static_cast<int64_t>(generation));
  return u.Step() == SQLITE_DONE ? Status::Ok() : Error("update job");
}

Result<std::vector<MemberRecord>> JobStore::Members() {
  Statement q(db_, (std::string("SELECT ") + kMemberColumns + " FROM member ORDER BY rank").c_str());
  if (!q.ok()) return Error("read members");
  return ReadMembers(db_, path_, q, "member");
}

Status JobStore::PutMember(const MemberRecord& m) {
  Statement u(db_, (std::string("INSERT OR REPLACE INTO member (") + kMemberColumns + ") VALUES (?, ?, ?, ?, ?, ?)").c_str());
  if (!u.ok()) return Error("write member");
  BindMember(u, 1, m);
  return u.Step() == SQLITE_DONE ? Status::Ok() : Error("write member " + std::to_string(m.rank));
}

Status JobStore::RemoveMember(int rank) {
  Statement u(db_, "DELETE FROM member WHERE rank = ?");
  if (!u.ok()) return Error("remove member");
  u.Bind(1, static_cast<int64_t>(rank));
  return u.Step() == SQLITE_DONE ? Status::Ok() : Error("remove member");
}

Status JobStore::RenewLeases(const std::vector<int>& ranks, int64_t lease_until_ms) {
  return sql_->WriteTransaction([&]() -> Status {
    for (int r : ranks) {
      Statement u(db_, "UPDATE member SET lease_until_ms = ? WHERE rank = ?");
      u.Bind(1, lease_until_ms);
      u.Bind(2, static_cast<int64_t>(r));
      if (!u.ok() || u.Step() != SQLITE_DONE) return Error("renew leases");
    }
    return Status::Ok();
  });
}

Status JobStore::PutGeneration(const GenerationRecord& g) {
  return sql_->WriteTransaction([&]() -> Status {
    auto fail = [&](const std::string& what) { return Error(what + " " + std::to_string(g.number)); };
    {
      Statement del(db_, "DELETE FROM generation_member WHERE generation = ?");
      if (!del.ok()) return fail("write generation");
      del.Bind(1, static_cast<int64_t>(g.number));
      if (del.Step() != SQLITE_DONE) return fail("write generation");
    }
    {
      Statement u(db_, "INSERT OR REPLACE INTO generation (number, first_step, why) VALUES (?, ?, ?)");
      if (!u.ok()) return fail("write generation");
      u.Bind(1, static_cast<int64_t>(g.number));
      u.Bind(2, g.first_step);
      u.Bind(3, g.why);
      if (u.Step() != SQLITE_DONE) return fail("write generation");
    }
    for (const MemberRecord& m : g.members) {
      Statement u(db_, (std::string("INSERT INTO generation_member (generation, ") + kMemberColumns +
                        ") VALUES (?, ?, ?, ?, ?, ?, ?)")
                           .c_str());
      if (!u.ok()) return fail("write the members of generation");
      u.Bind(1, static_cast<int64_t>(g.number));
      BindMember(u, 2, m);
      if (u.Step() != SQLITE_DONE) return fail("write the members of generation");
    }
    return Status::Ok();
  });
}

Result<std::vector<GenerationRecord>> JobStore::Generations() {
  std::vector<GenerationRecord> out;
  {
    Statement q(db_, "SELECT number, first_step, why FROM generation ORDER BY number");
    if (!q.ok()) return Error("read generations");
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW) {
      if (q.Int(0) < 0 || q.Int(1) < 0) {
        return DataLoss("state file " + path_ + ": generation " + std::to_string(q.Int(0)) + " starts at step " +
                        std::to_string(q.Int(1)) + ", which tenax never writes (damaged file?)");
      }
      out.push_back({static_cast<uint64_t>(q.Int(0)), q.Int(1), q.Text(2), {}});
    }
    if (rc != SQLITE_DONE) return Error("read generations");
  }
  for (GenerationRecord& g : out) {
    Statement q(db_, (std::string("SELECT ") + kMemberColumns +
                      " FROM generation_member WHERE generation = ? ORDER BY rank")
                         .c_str());
    if (!q.ok()) return Error("read the members of generation " + std::to_string(g.number));
    q.Bind(1, static_cast<int64_t>(g.number));
    TENAX_ASSIGN_OR_RETURN(g.members, ReadMembers(db_, path_, q, "generation " + std::to_string(g.number) + ", member"));
  }
  return out;
}

}  // namespace tenax::coord

#include "tenax/core/sqlite_db.h"

#include <sqlite3.h>

#include <chrono>
#include <thread>

namespace tenax {

SqliteStatement::SqliteStatement(sqlite3* db, const char* sql) {
  ok_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) == SQLITE_OK;
}
SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }
SqliteStatement& SqliteStatement::Bind(int i, const std::string& s) {
  sqlite3_bind_text(stmt_, i, s.c_str(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  return *this;
}
SqliteStatement& SqliteStatement::Bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
int SqliteStatement::Step() { return ok_ ? sqlite3_step(stmt_) : SQLITE_MISUSE; }
bool SqliteStatement::IsRow(int rc) { return rc == SQLITE_ROW; }
bool SqliteStatement::IsDone(int rc) { return rc == SQLITE_DONE; }
std::string SqliteStatement::Text(int i) const {
  auto p = sqlite3_column_text(stmt_, i);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, i)))
           : std::string();
}
int64_t SqliteStatement::Int(int i) const { return sqlite3_column_int64(stmt_, i); }

Result<SqliteDb> SqliteDb::Open(const std::string& path, const std::string& what) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  SqliteDb db(raw, path, what);
  if (rc != SQLITE_OK) return db.Error("cannot open");
  // Several processes share one file (a job's workers open the store's
  // catalog at once, and a recovery claims it while they read): on a loaded
  // 2-core machine a writer can hold the lock for seconds.
  sqlite3_busy_timeout(raw, 30000);
  // A file that is not a database fails here, with SQLite's own words.
  // Processes opening one file at the same moment (a job's workers and the
  // store's catalog) may get SQLITE_BUSY here without the busy handler being
  // asked (the WAL index is being set up by another): retry for as long as
  // the busy timeout would have waited.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    const int pragma = sqlite3_exec(raw, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", nullptr, nullptr,
                                     nullptr);
    if (pragma == SQLITE_OK) break;
    if ((pragma != SQLITE_BUSY && pragma != SQLITE_LOCKED) || std::chrono::steady_clock::now() >= until) {
      TENAX_RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));  // its words
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // another process holds the lock
  }
  return db;
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }

Status SqliteDb::Error(const std::string& what) const {
  return IoError(what_ + " " + path_ + ": " + what + ": " + (db_ ? sqlite3_errmsg(db_) : "cannot open"));
}

Status SqliteDb::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return IoError(what_ + " " + path_ + ": " + msg);
  }
  return Status::Ok();
}

int64_t SqliteDb::Changes() const { return sqlite3_changes(db_); }

Result<int64_t> SqliteDb::ApplicationId() {
  SqliteStatement q(db_, "PRAGMA application_id");
  if (!q.ok() || q.Step() != SQLITE_ROW) return Error("read application id");
  return q.Int(0);
}

Result<std::set<std::string>> SqliteDb::Tables() {
  std::set<std::string> tables;
  SqliteStatement q(db_, "SELECT name FROM sqlite_master WHERE type = 'table'");
  if (!q.ok()) return Error("list tables");
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) tables.insert(q.Text(0));
  if (rc != SQLITE_DONE) return Error("list tables");
  return tables;
}

}  // namespace tenax

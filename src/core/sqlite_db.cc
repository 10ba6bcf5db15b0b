#include "tenax/core/sqlite_db.h"

#include <sqlite3.h>

#include <chrono>
#include <span>
#include <thread>

#include "tenax/core/checksum.h"

namespace tenax {
namespace {

// tenax_row_crc(v1, v2, ...): CRC32C over each value's type and bytes
// (integers as 8 little-endian bytes, text and blobs with their length),
// so that 1 and '1', or 'ab','c' and 'a','bc', differ.
void RowCrc(sqlite3_context* context, int argc, sqlite3_value** argv) {
  uint32_t crc = 0;
  auto add = [&crc](const void* p, size_t n) {
    crc = Crc32c(std::span<const uint8_t>(static_cast<const uint8_t*>(p), n), crc);
  };
  for (int i = 0; i < argc; ++i) {
    const auto type = static_cast<uint8_t>(sqlite3_value_type(argv[i]));
    add(&type, 1);
    switch (type) {
      case SQLITE_INTEGER: {
        const auto v = static_cast<uint64_t>(sqlite3_value_int64(argv[i]));
        uint8_t b[8];
        for (int k = 0; k < 8; ++k) b[k] = static_cast<uint8_t>(v >> (8 * k));
        add(b, 8);
        break;
      }
      case SQLITE_FLOAT: {
        const double d = sqlite3_value_double(argv[i]);
        add(&d, sizeof d);
        break;
      }
      case SQLITE_TEXT:
      case SQLITE_BLOB: {
        const void* p = type == SQLITE_TEXT ? static_cast<const void*>(sqlite3_value_text(argv[i]))
                                            : sqlite3_value_blob(argv[i]);
        const auto n = static_cast<uint64_t>(sqlite3_value_bytes(argv[i]));
        add(&n, sizeof n);
        if (p && n) add(p, n);
        break;
      }
      default:
        break;  // NULL: its type alone
    }
  }
  sqlite3_result_int64(context, static_cast<int64_t>(crc));
}

}  // namespace

bool RegisterRowChecksumFunction(sqlite3* db) {
  return sqlite3_create_function_v2(db, "tenax_row_crc", -1, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                    nullptr, RowCrc, nullptr, nullptr, nullptr) == SQLITE_OK;
}

std::string RowChecksumColumn(const ChecksummedTable& table) {
  return std::string("row_crc INTEGER GENERATED ALWAYS AS (tenax_row_crc(") + table.columns + ")) STORED";
}

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
  // Row checksums (RowChecksumColumn) are computed by this function on
  // every write: every connection that writes those tables needs it.
  if (!RegisterRowChecksumFunction(raw)) return db.Error("cannot register tenax_row_crc");
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

Status SqliteDb::VerifyRowChecksums(const ChecksummedTable& table) {
  {
    // A table written by a tenax without row checksums has no such column.
    const std::string info = std::string("SELECT 1 FROM pragma_table_xinfo('") + table.name + "') WHERE name = 'row_crc'";
    SqliteStatement q(db_, info.c_str());
    if (!q.ok()) return Error(std::string("read the columns of ") + table.name);
    const int rc = q.Step();
    if (rc == SQLITE_DONE) return Status::Ok();
    if (rc != SQLITE_ROW) return Error(std::string("read the columns of ") + table.name);
  }
  const std::string sql = std::string("SELECT ") + table.key + ", COUNT(*) OVER () FROM " + table.name +
                          " WHERE row_crc IS NOT tenax_row_crc(" + table.columns + ") LIMIT 1";
  SqliteStatement q(db_, sql.c_str());
  if (!q.ok()) return Error(std::string("check the rows of ") + table.name);
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return Status::Ok();
  if (rc != SQLITE_ROW) return Error(std::string("check the rows of ") + table.name);
  return DataLoss(what_ + " " + path_ + ": table " + table.name + ", " + q.Text(0) +
                  ": its values do not match the row's checksum (changed outside tenax, or flipped on disk); " +
                  std::to_string(q.Int(1)) + " row(s) of " + table.name +
                  " so. The file cannot be trusted: restore it from a copy, or start afresh");
}

}  // namespace tenax

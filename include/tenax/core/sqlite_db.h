// SQLite files of tenax (layer `core`): the coordinator's job state and the
// store's catalog share one file format convention, so they share this.
//
// - `SqliteDb` owns a connection opened read-write (created if absent) in
//   WAL mode with a 30 s busy timeout; `Exec` runs statements, errors name
//   the file.
// - Several processes share these files (a job's workers open the store's
//   catalog at once), so every transaction that writes begins with
//   `BEGIN IMMEDIATE`: a deferred one that read first and then writes gets
//   SQLITE_BUSY at once, without the busy timeout, when another connection
//   committed in between (SQLite cannot upgrade a stale snapshot).
// - Every tenax file is stamped with `kTenaxApplicationId` ("TNXC", SQLite's
//   PRAGMA application_id), so a file of another program is refused rather
//   than written into, and the coordinator's tables and the store's catalog
//   may live in the same file (the "coordinator's SQLite").
// - `SqliteStatement` is a prepared statement, finalized on scope exit.
// - Row checksums: SQLite's integrity check sees structure, not values, so
//   a value flipped on disk in a row that drives decisions (a lease, a
//   merge verdict, a chunk's place, a generation's members) would be read
//   as true. Such tables end with RowChecksumColumn(their columns): a
//   column SQLite computes on every insert and update from the row's
//   values (tenax_row_crc, a CRC32C every SqliteDb connection has), and
//   VerifyRowChecksums names the rows whose values no longer match it.
//
// Threading: the connection is opened serialized (SQLITE_OPEN_FULLMUTEX),
// so single calls from several threads are safe; a transaction spans calls,
// so callers that share one SqliteDb between threads serialize their
// transactions themselves (the coordinator's work queue does). Otherwise
// one SqliteDb per thread. Failures are IoError with SQLite's
// own words (including "file is not a database").
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "tenax/core/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tenax {

inline constexpr int64_t kTenaxApplicationId = 0x544e5843;  // "TNXC"

class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, const char* sql);
  ~SqliteStatement();
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  bool ok() const { return ok_; }
  SqliteStatement& Bind(int i, const std::string& s);  // returns *this, to chain
  SqliteStatement& Bind(int i, int64_t v);
  int Step();          // SQLite's result code (SQLITE_ROW, SQLITE_DONE, ...)
  static bool IsRow(int rc);
  static bool IsDone(int rc);
  std::string Text(int i) const;
  int64_t Int(int i) const;

 private:
  sqlite3_stmt* stmt_ = nullptr;
  bool ok_ = false;
};

// A table whose rows carry a checksum: its name, its columns as SQL ("a, b,
// c": every column but the checksum) and an SQL expression naming a row
// in errors ("'unit ' || unit").
struct ChecksummedTable {
  const char* name;
  const char* columns;
  const char* key;
};

// The checksum column's definition, the last of the table's CREATE TABLE.
std::string RowChecksumColumn(const ChecksummedTable& table);
// Gives a connection the tenax_row_crc function (SqliteDb::Open does): a
// connection without it can read those tables but not write them.
bool RegisterRowChecksumFunction(sqlite3* db);

class SqliteDb {
 public:
  // `what` names the file in errors ("state file", "store catalog").
  static Result<SqliteDb> Open(const std::string& path, const std::string& what);
  SqliteDb(SqliteDb&& o) noexcept : db_(o.db_), path_(std::move(o.path_)), what_(std::move(o.what_)) { o.db_ = nullptr; }
  SqliteDb& operator=(SqliteDb&&) = delete;
  ~SqliteDb();

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }
  Status Exec(const std::string& sql);
  // BEGIN IMMEDIATE, `fn` (returns Status or Result<T>), COMMIT; ROLLBACK
  // when `fn` or the COMMIT fails, returning that failure. IMMEDIATE takes
  // the write lock first, so the busy timeout applies (see the top).
  template <typename Fn>
  auto WriteTransaction(Fn&& fn) -> decltype(fn()) {
    TENAX_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    auto result = fn();
    if (!result.ok()) {
      (void)Exec("ROLLBACK");
      return result;
    }
    if (Status st = Exec("COMMIT"); !st.ok()) {
      (void)Exec("ROLLBACK");
      return st;
    }
    return result;
  }
  // IoError "WHAT PATH: what: <SQLite's message>".
  Status Error(const std::string& what) const;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t Changes() const;
  Result<int64_t> ApplicationId();
  Result<std::set<std::string>> Tables();
  // DataLoss naming the file, the table, the first row whose values do not
  // match its checksum and how many do not; OK when all match, and for a
  // table written by a tenax without row checksums (no such column).
  Status VerifyRowChecksums(const ChecksummedTable& table);

 private:
  SqliteDb(sqlite3* db, std::string path, std::string what) : db_(db), path_(std::move(path)), what_(std::move(what)) {}
  sqlite3* db_ = nullptr;
  std::string path_, what_;
};

}  // namespace tenax

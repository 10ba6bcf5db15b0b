// The coordinator's durable state: one job per state file, in SQLite, so a
// coordinator killed and restarted with the same file resumes the same job
// (its id, configuration, members and their ranks, every membership
// generation, and how it ended).
//
// Every mutation is its own transaction (WAL journal), so a SIGKILL loses at
// most the mutation in flight, never a committed one. The file is stamped
// with tenax's SQLite application id, so a file of another program is
// refused rather than written into.
// Threading: one JobStore per thread. Failures, each naming the file:
// IoError for anything SQLite reports (including "file is not a database");
// FailedPrecondition for another program's database or another job's file;
// DataLoss for a stored value tenax never writes (a damaged file).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "job_state.h"
#include "tenax/core/sqlite_db.h"
#include "tenax/core/status.h"

struct sqlite3;

namespace tenax::coord {

class JobStore {
 public:
  static Result<std::unique_ptr<JobStore>> Open(const std::string& path);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Creates the job, or returns the stored one (resumed = true) when the
  // file already holds `job_id`. FailedPrecondition for another job id or a
  // different worker count.
  Result<JobRecord> OpenJob(const std::string& job_id, const std::string& config_toml, int world);
  Status SetJobState(JobPhase phase, const std::string& failure, uint64_t generation);

  Result<std::vector<MemberRecord>> Members();
  Status PutMember(const MemberRecord& m);  // insert or replace by rank
  Status RemoveMember(int rank);
  Status RenewLeases(const std::vector<int>& ranks, int64_t lease_until_ms);

  // Membership generations, one row each (plus its members), written in one
  // transaction. Writing a number again replaces it (a coordinator that
  // restarts mid-change writes the same generation again).
  Status PutGeneration(const GenerationRecord& g);
  // Every generation, oldest first.
  Result<std::vector<GenerationRecord>> Generations();
  // The stable generation (every member of it formed it; docs/elastic.md),
  // kept so that a restarted coordinator marks joiners as before its crash.
  // OpenJob reads it back into JobRecord::stable_generation/stable_members.
  Status SetStableGeneration(uint64_t generation);

  const std::string& path() const { return path_; }

 private:
  JobStore() = default;
  Status Exec(const std::string& sql);
  Status CheckOwnership();
  Status ReadStable(JobRecord& r);
  Status Error(const std::string& what) const;
  std::unique_ptr<SqliteDb> sql_;
  sqlite3* db_ = nullptr;  // sql_'s connection
  std::string path_;
};

}  // namespace tenax::coord

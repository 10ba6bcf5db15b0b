// The coordinator's durable state: one job per state file, in SQLite, so a
// coordinator killed and restarted with the same file resumes the same job
// (its id, configuration, members and their ranks, and how it ended).
//
// Every mutation is its own transaction (WAL journal), so a SIGKILL loses at
// most the mutation in flight, never a committed one.
// Threading: one JobStore per thread. Failures: IoError naming the file for
// anything SQLite reports; FailedPrecondition when the file holds another job.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"

struct sqlite3;

namespace tenax::coord {

struct JobRecord {
  std::string job_id;
  std::string config_toml;
  int world = 0;
  std::string state;  // "joining", "running", "finished", "failed"
  uint64_t generation = 0;
  std::string failure;   // why it failed (state "failed")
  bool resumed = false;  // the row existed before this Open
};

struct MemberRecord {
  int rank = 0;
  std::string name;
  std::string host;
  uint16_t port = 0;
  std::string state;      // "joined", "done", "failed"
  int64_t lease_until_ms = 0;  // wall-clock ms; renewed while the member is connected
};

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
  Status SetJobState(const std::string& state, const std::string& failure, uint64_t generation);

  Result<std::vector<MemberRecord>> Members();
  Status PutMember(const MemberRecord& m);  // insert or replace by rank
  Status RemoveMember(int rank);
  Status RenewLeases(const std::vector<int>& ranks, int64_t lease_until_ms);

  const std::string& path() const { return path_; }

 private:
  JobStore() = default;
  Status Exec(const std::string& sql);
  Status Error(const std::string& what) const;
  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace tenax::coord

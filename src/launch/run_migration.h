// Live migration for `tenax run` (placement.migrate; docs/placement.md,
// "Moving a live worker off a bad link"). Once a second it reads the
// coordinator's link matrix again; a member whose links to the others break
// the thresholds in 3 checks in a row gets a migrant, a spare started on the
// host sched::PlanMigration picks. Once the migrant is warm (its
// "spare_waiting" record), the member is sent SIGTERM and leaves at its next
// step boundary, and the coordinator admits the migrant in the generation
// that drops it, with the live state copied as for any joiner. One move at a
// time; a member no host can take is said once and left where it is.
//
// Every move is a notice line and an entry of Records() (summary.json's
// "migrations").
//
// Ownership: borrows the launcher's supervisor, topology, monitor and the map
// of members' hosts (all must outlive it). Threading: the launcher's thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "job_topology.h"
#include "run_monitor.h"
#include "tenax/core/deadline.h"
#include "tenax/core/process_supervisor.h"

namespace tenax {

struct RunMigrationOptions {
  ProcessSupervisor* children = nullptr;
  JobTopology* topology = nullptr;
  RunMonitor* monitor = nullptr;
  // Child index -> host index of every worker process on a host (the
  // launcher's; a migrant is added when it starts, and the launcher drops
  // entries as processes exit).
  std::map<size_t, size_t>* host_of_member = nullptr;
  std::string coordinator_host;
  uint16_t coordinator_port = 0;
  std::string secret;
  // The migrant's command line (a `tenax worker --spare` of the job), and
  // where its log goes (logs/migrant-N.log).
  std::function<std::vector<std::string>()> migrant_argv;
  std::function<std::string(const std::string& name)> log_path;
  // A migrant started (the launcher prices it as a worker), and one that
  // was left waiting as a spare (an older spare took the place).
  std::function<void(size_t child)> on_started;
  std::function<void(size_t child)> on_left_as_spare;
  std::chrono::milliseconds warm_timeout{60000};  // cluster.join_timeout_seconds
  SteadyClock::time_point run_start = SteadyClock::now();  // a record's "at_seconds" counts from here
};

class RunMigration {
 public:
  explicit RunMigration(RunMigrationOptions options) : o_(std::move(options)) {}

  // Called from the watch loop once the job has started; `max_step` is the
  // highest step any rank reported (recorded with each move).
  void Poll(int64_t max_step);
  // A new generation was announced.
  void OnGeneration();
  // summary.json's "migrations": every move (moved, moved_to_spare, failed)
  // and every skipped one.
  const std::vector<nlohmann::json>& Records() const { return records_; }

 private:
  // The move under way.
  struct Move {
    size_t member = 0;   // child index of the member moving
    size_t migrant = 0;  // child index of the spare started on the good host
    bool left_sent = false;
    bool generation_after_leave = false;
    SteadyClock::time_point started;
    std::string log;
    std::string who, name, from, to;  // member, migrant, and their hosts' labels, for the lines said
    nlohmann::json record;            // summary.json's entry, completed by End
  };
  void Plan(int64_t max_step);
  void Follow();
  void End(const std::string& outcome, const std::string& line);
  double RunSeconds() const;

  RunMigrationOptions o_;
  std::optional<Move> move_;
  std::vector<nlohmann::json> records_;
  std::set<std::pair<size_t, int>> skipped_;  // (member, host) said once
  int migrants_ = 0;
  std::pair<size_t, int> suspect_{0, -1};  // (member, host) the last checks named
  int checks_ = 0;                         // how many in a row
  SteadyClock::time_point next_check_{};
};

}  // namespace tenax

// Executes a launcher's fault plan (tenax/job/fault_plan.h) on the
// children of `tenax run`: real signals on real processes, and new workers
// (joiners) started through a callback. It owns the schedule; the launcher
// polls it from its watch loop with the highest step any rank reported.
//
// What it does, per fault: kill = SIGKILL; preempt = SIGTERM, then SIGKILL
// if the child still runs after the grace period; stop = SIGSTOP; cont =
// SIGCONT; restart = start a joiner (after delay_seconds), or, for an
// entry naming a server, start that parameter-server shard again on its
// checkpoint directory (it replaces the shard's old process). Each one is a
// notice line ("fault: SIGKILL worker 1 (pid 1234) at 12.3 s (step 340)")
// and a record ({"event":"fault",...}); a fault aimed at a child that had
// already exited, or still pending when the job ends, is a
// {"event":"fault_not_fired",...} record and a notice.
//
// Ownership: borrows the supervisor, which must outlive it. With
// `expect_exits` (elastic jobs), a child it signalled is marked with
// ProcessSupervisor::ExpectExit, so its death is no failure; children it did
// not touch fail as before. Finish() SIGKILLs the children it left stopped
// (or preempted and still running): the caller's WaitAll need not wait for
// them.
// Threading: the supervisor's owner thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tenax/core/deadline.h"
#include "tenax/core/process_supervisor.h"
#include "tenax/core/run_records.h"
#include "tenax/core/status.h"
#include "tenax/job/fault_plan.h"
#include "tenax/net/link_faults.h"

namespace tenax {

struct FaultInjectorOptions {
  FaultPlan plan;
  // workers[w]: the supervisor index of the launcher's worker w.
  std::vector<size_t> workers;
  // Starts joiner n (1, 2, ...) and returns its supervisor index. May be
  // empty when the plan starts none.
  std::function<Result<size_t>(int64_t n)> start_joiner;
  // servers[s]: the supervisor index of parameter-server shard s (async).
  std::vector<size_t> servers;
  // Starts shard s again (on its directory) and returns its new supervisor
  // index. May be empty when the plan restarts no server.
  std::function<Result<size_t>(int64_t shard)> restart_server;
  // storage[n]: the supervisor index of data node n of the run's store;
  // wipe_storage(n) deletes its directory (a fault with wipe = true).
  std::vector<size_t> storage;
  std::function<Status(int64_t node)> wipe_storage;
  // The supervisor index of the job's coordinator, and how to start it again
  // on its state file and port (returns the new process's index). A plan
  // that names the coordinator needs both.
  std::optional<size_t> coordinator;
  std::function<Result<size_t>()> restart_coordinator;
  // Link faults (drop_link, slow_link, partition, slow_host; net/link_faults.h): the
  // file every child follows, each emulated host's zone, and the host a
  // worker was placed on ("" if none). A plan's link faults fire only with
  // the file; each firing rewrites it (atomically) with the faults in force.
  std::string link_faults_file;
  std::map<std::string, std::string> zone_of_host;
  std::function<std::string(int64_t worker)> host_of_worker;
  // Called with every record as it is made (the launcher writes them to
  // metrics.jsonl at once); may be empty.
  std::function<void(const nlohmann::json&)> on_record;
  // Signalled children are expected to die (elastic jobs).
  bool expect_exits = false;
  std::function<void(const std::string&)> on_notice;  // may be empty
};

class FaultInjector {
 public:
  FaultInjector(ProcessSupervisor& children, FaultInjectorOptions options);

  // Starts the clock of at_seconds (the launcher calls it once its workers
  // are started).
  void Start(SteadyClock::time_point start = SteadyClock::now());
  // Fires every fault due at `now` or at `max_step` (the highest step any
  // rank reported), and SIGKILLs preempted children past their grace.
  void Poll(int64_t max_step, SteadyClock::time_point now = SteadyClock::now());
  // When the next timed fault or grace period is due (the caller should
  // poll by then); nullopt when only step triggers (or nothing) remain.
  std::optional<SteadyClock::time_point> NextDue() const;
  // The job ended: records the faults that never fired and SIGKILLs the
  // children the plan left stopped or preempted and still running (their
  // exits are expected). Idempotent.
  void Finish(int64_t max_step, SteadyClock::time_point now = SteadyClock::now());

  // The plan SIGKILLed the coordinator and has not started it again yet:
  // losing it is no failure while a restart of it is still to come
  // (CoordinatorRestartPending).
  bool CoordinatorDown() const { return coordinator_down_; }
  bool CoordinatorRestartPending() const;
  // Coordinator starts by the plan so far (its log is coordinator-K.log).
  int64_t coordinator_restarts() const { return coordinator_restarts_; }

  // Every record so far, in order: fault, then fault_not_fired after Finish.
  const std::vector<nlohmann::json>& records() const { return records_; }
  // The faults executed (the "fault" records), for summary.json.
  nlohmann::json Executed() const;

 private:
  // A fault of the plan: an entry or an event of the random schedule.
  struct Pending {
    std::string source;  // "faults[2]" or "faults.random"
    FaultAction action = FaultAction::kKill;
    int64_t slot = -1;      // the target: a worker or a random plan's joiner
    int64_t new_slot = -1;  // restart of the random plan: the slot it creates
    int64_t server = -1;    // the target is this parameter-server shard instead
    int64_t storage = -1;   // the target is this data node of the run's store instead
    bool wipe = false;      // storage: delete its directory after the SIGKILL
    bool coordinator = false;  // the target is the job's coordinator instead
    std::optional<double> at_seconds;
    std::optional<int64_t> at_step;
    double grace_seconds = 0;
    double delay_seconds = 0;
    std::vector<std::string> hosts;     // a link fault's hosts, as the plan names them
    std::vector<int64_t> link_workers;  // ... or the workers whose hosts it names
    double seconds = 0;                 // a link fault's length
    double factor = 10;                 // slow_link, slow_host
    double delay_ms = 0;                // slow_link, slow_host: added each way
    std::optional<double> triggered_at;  // when its trigger came (it fires delay_seconds later)
    bool done = false;
  };
  struct Grace {
    size_t child;
    Pending fault;   // the preemption
    double kill_at;  // elapsed seconds
  };

  double Elapsed(SteadyClock::time_point now) const;
  std::string Who(int64_t slot) const;  // "worker 1", "joiner 2"
  std::string WhoOf(const Pending& p) const;  // Who, or "server 1"
  void Fire(Pending& p, double elapsed, int64_t max_step);
  void Signal(const Pending& p, size_t child, int signal, double elapsed, int64_t max_step);
  void StartJoiner(Pending& p, double elapsed, int64_t max_step);
  void RestartServer(Pending& p, double elapsed, int64_t max_step);
  void RestartCoordinator(Pending& p, double elapsed, int64_t max_step);
  // Writes a link fault into the children's file (its links resolved now).
  void FireLinkFault(Pending& p, double elapsed, int64_t max_step);
  records::Fault Record(bool fired, const Pending& p, double elapsed, int64_t max_step) const;
  void Notice(const std::string& text) const;
  void Push(const records::Fault& record);  // records_ and on_record

  ProcessSupervisor& children_;
  FaultInjectorOptions options_;
  SteadyClock::time_point start_{};
  std::vector<Pending> pending_;
  std::map<int64_t, size_t> slots_;            // slot -> supervisor index
  std::map<int64_t, int64_t> joiner_of_slot_;  // random joiners' slot -> joiner number
  std::map<int64_t, size_t> server_slots_;     // shard -> supervisor index of its current process
  std::map<int64_t, size_t> storage_slots_;    // data node -> supervisor index
  std::optional<size_t> coordinator_slot_;     // supervisor index of the coordinator's current process
  bool coordinator_down_ = false;
  int64_t coordinator_restarts_ = 0;
  std::set<size_t> stopped_;                   // SIGSTOPped by the plan and not continued
  std::vector<Grace> graces_;                  // preempted, SIGKILL due
  int64_t joiners_ = 0;
  bool finished_ = false;
  std::vector<nlohmann::json> records_;
  net::LinkFaultBook link_faults_;  // what the file holds
};

}  // namespace tenax

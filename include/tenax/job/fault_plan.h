// Launcher fault plans: the [[faults]] entries and the [faults.random] table
// of a sync job file, which `tenax run` executes with real signals on its
// own children (launch/fault_injector.h). docs/config.md describes the keys.
//
//   [[faults]]
//   action = "kill"      # kill | preempt | stop | cont | restart
//   worker = 1           # 0..cluster.workers-1; not for restart
//   storage = 2          # a data node of the job's [storage] (kill only);
//   wipe = true          #   with its directory deleted (a dead disk)
//   server = 0           # async jobs: a parameter-server shard (0..async.servers-1)
//                        # instead of a worker; restart + server = start that
//                        # shard again on its checkpoint directory
//   coordinator = true   # the job's coordinator instead (kill, or restart it on
//                        # its state file and port: it resumes the job)
//   action = "drop_link" # link faults (need [topology]; at the transport seam,
//   workers = [0, 2]     #   net/link_faults.h): the link between the hosts of
//   hosts = ["a1", "b1"] #   two workers, or two hosts, drops every message
//   seconds = 2.0        #   for `seconds`; "slow_link" makes it `factor`
//   factor = 10          #   (default 10) times slower; "partition" cuts one
//                        #   host (host = "a1", or worker = 1's) off from
//                        #   the other hosts of its zone; "slow_host" slows
//                        #   every link of one host (host or worker: a bad
//                        #   NIC) `factor` times
//   delay_ms = 20        # slow_link, slow_host: one-way delay added on top
//   at_seconds = 10.0    # exactly one of at_seconds and at_step
//   grace_seconds = 5    # preempt: SIGKILL if it still runs after this
//   delay_seconds = 0    # fire this long after the trigger (restart: start the
//                        # new worker then)
//   [faults.random]
//   mean_lifetime_seconds = 60, seed = 1, action = "kill",
//   restart_delay_seconds = 5, max_faults = 1, grace_seconds = 5
//
// TOML attaches a [faults.random] written after a [[faults]] entry to that
// entry; the parser lifts it out, so the table may stand anywhere (once).
//
// Parsing is part of ParseTrainConfig and free of libtorch (it is fuzzed
// with the config decoder). Every refusal is one line naming the entry and
// the key: "job.toml:14: faults[2].worker: 7 is not a worker
// (cluster.workers = 4)".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tenax/core/config.h"
#include "tenax/core/status.h"

namespace tenax {

enum class FaultAction {
  kKill,     // SIGKILL
  kPreempt,  // SIGTERM, then SIGKILL after grace_seconds if it still runs
  kStop,     // SIGSTOP
  kCont,     // SIGCONT
  kRestart,  // start a new worker process (a joiner of the elastic job)
  // Link faults at the transport seam (net/link_faults.h), for `seconds`:
  kDropLink,   // a link drops every message
  kSlowLink,   // a link runs `factor` times slower
  kPartition,  // every link from a host to the others of its zone drops everything
  kSlowHost,   // every link from a host to every other host runs `factor` times slower (+ delay_ms)
};
// A link fault, not a signal or a start.
bool IsLinkFault(FaultAction action);

// "kill", "preempt", "stop", "cont", "restart", "drop_link", "slow_link",
// "partition", "slow_host".
const char* FaultActionName(FaultAction action);

// The longest time a plan may name (at_seconds, delays, grace periods).
inline constexpr double kMaxFaultSeconds = 7 * 24 * 3600.0;
inline constexpr double kDefaultGraceSeconds = 5;

// One [[faults]] entry.
struct FaultSpec {
  int64_t index = 0;  // its position in the [[faults]] array: "faults[index]"
  FaultAction action = FaultAction::kKill;
  int64_t worker = -1;                          // the launcher's worker index; -1 for restart or a server
  int64_t server = -1;                          // async: the target shard (signals, or its restart); -1 for none
  int64_t storage = -1;                         // a data node of [storage] (kill only); -1 for none
  bool wipe = false;                            // storage: also delete the node's directory (a dead disk)
  bool coordinator = false;                     // the target is the job's coordinator (kill or restart)
  std::optional<double> at_seconds;             // since the launcher started the workers
  std::optional<int64_t> at_step;               // when any rank reported this global step (or a later one)
  double grace_seconds = kDefaultGraceSeconds;  // preempt only
  double delay_seconds = 0;                     // fired this long after its trigger
  // Link faults: drop_link / slow_link name two hosts, or two workers
  // (whose hosts placement decides); partition and slow_host name one host, or a worker
  // (`worker`) whose host it cuts off.
  std::vector<std::string> hosts;
  std::vector<int64_t> link_workers;
  double seconds = 0;  // how long a link fault lasts
  double factor = 10;  // slow_link, slow_host: how many times slower (2..1000)
  double delay_ms = 0;  // slow_link, slow_host: one-way delay added on top (0..10000)
  // "kill worker 1 at 10 s", "restart at step 300 (+2 s)",
  // "drop_link workers 0-2 for 2 s at step 40".
  std::string Describe() const;
};

// The [faults.random] table: every worker's lifetime is drawn from an
// exponential distribution; each death is a fault, and optionally a new
// worker starts restart_delay_seconds later (with its own lifetime).
struct RandomFaults {
  double mean_lifetime_seconds = 60;
  int64_t seed = 1;
  FaultAction action = FaultAction::kKill;      // kill, preempt or stop
  std::optional<double> restart_delay_seconds;  // nullopt = no new workers
  int64_t max_faults = 1;                       // faults (not restarts) in the whole run
  double grace_seconds = kDefaultGraceSeconds;  // preempt only
};

struct FaultPlan {
  std::vector<FaultSpec> faults;  // in file order
  std::optional<RandomFaults> random;
  bool empty() const { return faults.empty() && !random; }
};

// One event of a random plan's schedule. Workers and joiners are "slots":
// slots 0..workers-1 are the launcher's workers; a restart event creates
// the slot it names (workers, workers+1, ... in order), which later fault
// events may target.
struct RandomFaultEvent {
  double at_seconds = 0;                    // since the launcher started the workers
  FaultAction action = FaultAction::kKill;  // random.action, or kRestart
  int64_t slot = 0;                         // the target, or the new slot of a restart
  bool operator==(const RandomFaultEvent&) const = default;
};

// The random plan's schedule for `workers` initial workers, sorted by time:
// max_faults faults, each followed by a restart when restart_delay_seconds
// is set. Lifetimes are -mean * ln(1 - u) with u from a mt19937_64 seeded
// with `seed` (fully specified by the standard, so the same seed gives the
// same schedule on every platform), drawn for slots in creation order.
std::vector<RandomFaultEvent> ScheduleRandomFaults(const RandomFaults& random, int64_t workers);

// What the plan is checked against.
struct FaultPlanContext {
  bool sync = true;  // mode = "sync": faults are refused otherwise
  int64_t workers = 2;
  bool elastic = false;
  // A stopped worker is part of the job's design (mode "coded": the code
  // does without it), so "cont" applies without elasticity.
  bool stops_tolerated = false;
  int64_t servers = 0;  // async.servers (0 outside async jobs): faults may name them
  int64_t storage_nodes = 0;  // storage.nodes: kill (and wipe) may name them
  // The emulated hosts of [topology] (empty without one): link faults need
  // them, and may name them.
  std::vector<std::string> hosts;
  // The job's total steps, or nullopt when unknown (its data cannot be read
  // now: the at_step bound is then not checked). Called only if an entry
  // has at_step.
  std::function<std::optional<int64_t>()> total_steps;
};

// Reads the `faults` key of `doc` (absent = an empty plan), marking every key
// under it as read in `reader` so that its Finish() does not call them
// unknown. InvalidArgument with one line naming the entry and the key.
Result<FaultPlan> ParseFaultPlan(const ConfigDoc& doc, ConfigReader& reader, const FaultPlanContext& context);

}  // namespace tenax

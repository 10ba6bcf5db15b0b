// The records of a run's metrics.jsonl that the report draws: the learning
// curves ("train", "epoch", "final") and the workers' timeline and event
// list ("worker_state", "notice"). Writers (train/training_loop.cc,
// launch/run_monitor.cc) build them with these types and ToJson; the
// report (report/run_record.h) reads them back with the From functions,
// so each field is spelled once. JsonLinesWriter (core/metrics.h) adds
// "time", unix seconds, to every record: the report's one clock.
//
// And the records of what happened to the job: "fault" and
// "fault_not_fired" (launch/fault_injector.cc), "straggler" (the elastic
// exchange's rank 0, and the coded decoder's decoder.jsonl), "generation"
// (the elastic exchange), "recovery" (train/input/store_source.cc) and
// "shuffle" (the coded decoder). The launcher's run monitor and the report
// read them back with the same types.
//
// From*: nullopt unless `j` is an object whose "event" names the kind and
// whose defining value is present with its type (train: loss; epoch and
// final: test_accuracy; notice: a non-empty text; worker_state: a
// non-empty worker, or its number N, read as "worker N"; fault: an action
// (a number is read as its text);
// straggler: a state, "slow" or "recovered"; generation: its number;
// recovery: a phase; shuffle: a step). Every other field that is missing or of another type
// reads as its default: records come from other processes, perhaps other
// versions of tenax, and the report of a broken run must still load.
// Pure functions; nothing throws.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tenax::records {

// "train": the mean loss over the steps since the previous one (every
// log.every_steps), over every replica's samples.
struct Train {
  int64_t epoch = 0;  // 1-based
  int64_t step = 0;   // global steps applied
  double loss = 0;
  double samples_per_second = 0;
  double elapsed_seconds = 0;  // since the trainer started
  bool operator==(const Train&) const = default;
};

// "epoch": an epoch's end, the model evaluated on the test set.
struct Epoch {
  int64_t epoch = 0;
  int64_t step = 0;
  double train_loss = 0;
  double test_accuracy = 0;  // 0..1
  double elapsed_seconds = 0;
  bool operator==(const Epoch&) const = default;
};

// "final": the job's final model on the whole test set, where it lives
// elsewhere (async shards, the coded decoder).
struct Final {
  int64_t step = 0;
  double test_accuracy = 0;
  double elapsed_seconds = 0;
  bool operator==(const Final&) const = default;
};

// "notice": one line the launcher showed the user.
struct Notice {
  std::string text;
  bool operator==(const Notice&) const = default;
};

// "worker_state": a worker entered a state (launch/local_launcher.h
// WorkerStatus names them).
struct WorkerState {
  std::string worker;  // "worker 2", "joiner 1"
  std::string state;   // "starting", "active", "slow", "killed", ...
  std::string host;    // "" without a topology
  std::string detail;  // "pid 4242", "share 41 of 256"
  bool operator==(const WorkerState&) const = default;
};

// "fault" (fired) or "fault_not_fired": one fault of the job's plan, by
// the launcher's fault injector. Exactly one of worker, joiner, server,
// storage and coordinator names the target (none: a restart that starts a
// new joiner names it in joiner).
struct Fault {
  bool fired = true;   // false: "fault_not_fired", `reason` says why
  std::string action;  // "kill", "preempt", "stop", "cont", "restart"
  std::optional<int64_t> worker;  // the worker's index
  std::optional<int64_t> joiner;  // the joiner's number (1-based)
  std::optional<int64_t> server;  // the parameter server's index
  std::string storage;            // "node-2"; "" when not a storage node
  bool coordinator = false;       // the job's coordinator ("coordinator": true)
  double elapsed_seconds = 0;     // since the launcher started the workers
  int64_t step = 0;               // the job's highest step then
  std::string source;             // the plan entry, "faults[1]" / "stragglers"
  std::optional<double> at_seconds;  // the plan's trigger, when by time
  std::optional<int64_t> at_step;    // ... when by step
  std::string signal;                // "SIGKILL", "SIGTERM", ...; "" for a restart
  std::optional<int64_t> pid;        // the target's (or the new process's) pid
  std::optional<double> grace_seconds;  // a preemption's grace period
  std::optional<double> delay_seconds;  // a restart's delay
  std::string reason;                   // why it did not fire, or why SIGKILL
  std::optional<bool> wiped;            // a storage node's disk wiped
  std::string wipe_error;
  // A link fault (drop_link, slow_link, partition, slow_host): the link's
  // two hosts, or the host cut off from its zone or slowed; how long; how
  // much slower, and the delay added each way.
  std::vector<std::string> hosts;
  std::optional<double> seconds;
  std::optional<double> factor;
  std::optional<double> delay_ms;
  bool operator==(const Fault&) const = default;
};

// "worker 1", "joiner 2", "server 0", "storage node-2", "the coordinator",
// "the link a1-b1", "host a1 (from its zone)", "host a1 (every link)": whom
// the fault was aimed at;
// "" when the record names nobody.
std::string TargetName(const Fault& f);

// "straggler": a member became slow or recovered. The elastic exchange
// names it by member (its "host/pid" name), member_id, rank and pid and
// gives its new share; the coded decoder names it by worker index. Older
// decoders wrote "straggler_detected" / "straggler_recovered"; StragglerFrom
// reads those too.
struct Straggler {
  bool slow = true;  // false: it recovered ("state": "recovered")
  std::string member;
  std::optional<int64_t> member_id, rank, worker, pid;
  int64_t step = 0;
  double ratio = 0;  // its time per sample (or arrival) over the median
  std::optional<int64_t> share, global_batch;  // its samples of each global batch
  bool operator==(const Straggler&) const = default;
};

// "generation": the elastic group re-formed.
struct Generation {
  int64_t number = 0;
  int64_t first_step = 0;          // the first step it trains
  std::vector<int64_t> members;    // member ids
  std::string why;                 // "a member left", "joiner ...", ...
  std::optional<double> detect_ms;  // from the last good step to the loss noticed
  std::optional<double> reform_ms;  // from noticing (or the boundary) to formed
  std::optional<double> join_transfer_ms;  // a joiner's model copy
  bool operator==(const Generation&) const = default;
};

// "recovery": a store dataset's recovery after a lost chunk ("started",
// then "done" or "failed"); the counts come with "done".
struct Recovery {
  std::string phase;  // "started", "done", "failed"
  std::string dataset;
  std::string policy;  // "smart", "full", ...
  int64_t lost_chunks = 0, first_chunks = 0, later_chunks = 0, chunks_rebuilt = 0;
  std::vector<std::string> unrecoverable;  // stripes it could not rebuild, in words
  int64_t bytes_read = 0, bytes_written = 0;
  int64_t bytes = 0;  // read + written
  double first_pass_seconds = 0, background_seconds = 0;
  double seconds = 0;  // from the lost chunk noticed to done
  std::string error;   // why it failed
  bool operator==(const Recovery&) const = default;
};

// "shuffle": the coded decoder re-mapped partitions away from slow workers.
struct Shuffle {
  int64_t step = 0;
  nlohmann::json rows;  // the new assignment, as the decoder wrote it
  int64_t partitions_moved = 0;
  int64_t bytes_moved = 0;
  bool operator==(const Shuffle&) const = default;
};

nlohmann::json ToJson(const Train& r);
nlohmann::json ToJson(const Epoch& r);
nlohmann::json ToJson(const Final& r);
nlohmann::json ToJson(const Notice& r);
nlohmann::json ToJson(const WorkerState& r);
nlohmann::json ToJson(const Fault& r);
nlohmann::json ToJson(const Straggler& r);
nlohmann::json ToJson(const Generation& r);
nlohmann::json ToJson(const Recovery& r);
nlohmann::json ToJson(const Shuffle& r);

std::optional<Train> TrainFrom(const nlohmann::json& j);
std::optional<Epoch> EpochFrom(const nlohmann::json& j);
std::optional<Final> FinalFrom(const nlohmann::json& j);
std::optional<Notice> NoticeFrom(const nlohmann::json& j);
std::optional<WorkerState> WorkerStateFrom(const nlohmann::json& j);
std::optional<Fault> FaultFrom(const nlohmann::json& j);  // either kind
std::optional<Straggler> StragglerFrom(const nlohmann::json& j);
std::optional<Generation> GenerationFrom(const nlohmann::json& j);
std::optional<Recovery> RecoveryFrom(const nlohmann::json& j);
std::optional<Shuffle> ShuffleFrom(const nlohmann::json& j);

}  // namespace tenax::records

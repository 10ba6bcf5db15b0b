// The records of a run's metrics.jsonl that the report draws: the learning
// curves ("train", "epoch", "final") and the workers' timeline and event
// list ("worker_state", "notice"). Writers (train/training_loop.cc,
// launch/run_monitor.cc) build them with these types and ToJson; the
// report (report/run_record.h) reads them back with the From functions,
// so each field is spelled once. JsonLinesWriter (core/metrics.h) adds
// "time", unix seconds, to every record: the report's one clock.
//
// Not typed yet (written and read as JSON with the same field names in
// both places): fault, fault_not_fired, straggler, generation, recovery.
//
// From*: nullopt unless `j` is an object whose "event" names the kind and
// whose defining value is present with its type (train: loss; epoch and
// final: test_accuracy; notice: a non-empty text; worker_state: a
// non-empty worker, or its number N, read as "worker N"). Every other field that is missing or of another type
// reads as its default: records come from other processes, perhaps other
// versions of tenax, and the report of a broken run must still load.
// Pure functions; nothing throws.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

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

nlohmann::json ToJson(const Train& r);
nlohmann::json ToJson(const Epoch& r);
nlohmann::json ToJson(const Final& r);
nlohmann::json ToJson(const Notice& r);
nlohmann::json ToJson(const WorkerState& r);

std::optional<Train> TrainFrom(const nlohmann::json& j);
std::optional<Epoch> EpochFrom(const nlohmann::json& j);
std::optional<Final> FinalFrom(const nlohmann::json& j);
std::optional<Notice> NoticeFrom(const nlohmann::json& j);
std::optional<WorkerState> WorkerStateFrom(const nlohmann::json& j);

}  // namespace tenax::records

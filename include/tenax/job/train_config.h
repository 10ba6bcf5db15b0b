// The configuration of a training run, read and validated from TOML.
//
//   mode = "single" | "sync" | "async" | "coded"
//   [cluster] (sync, async, coded) workers, job_id, coordinator, host, secret,
//            transports, join_timeout_seconds, step_timeout_seconds,
//            peer_timeout_seconds, elastic, min_workers, max_workers,
//            shares = "measured" | "even" (elastic)
//   [[faults]], [faults.random] (sync) the launcher's fault plan
//            (job/fault_plan.h)
//   [data]   format = "fashion-mnist" | "npy", dir, train_images,
//            train_labels, test_images, test_labels, train_limit, test_limit
//   [model]  name = "mlp" | "cnn", or path = a TorchScript file
//   [train]  epochs, max_steps, batch_size, optimizer = "sgd" | "adam", lr,
//            momentum, weight_decay, seed, threads
//   [log]    every_steps, level
//   [async]  (async) servers, unit_steps, lease_seconds, max_attempts, rule,
//            alpha, staleness_power, server_lr, checkpoint_every,
//            norm_factor
//   [coded]  (coded) scheme, stragglers, decoding, deadline, shuffle_every,
//            partitioning, slow_factor
//   [stragglers] (coded) model, seed, probability, slowdown, slowdown_max,
//            active_slowdown, active_slowdown_max, p_slow, p_recover,
//            slow_workers, trace
//   [cost]   prices = a price table file (job/price_table.h)
//
// docs/config.md describes every key; ParseTrainConfig is the authority.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/coding/coded_config.h"
#include "tenax/coord/cluster_config.h"
#include "tenax/core/config.h"
#include "tenax/core/status.h"
#include "tenax/sched/emulate/topology.h"
#include "tenax/job/fault_plan.h"

namespace tenax {

// Where samples come from (see train/input/data_source.h).
inline constexpr const char* kFashionMnistFormat = "fashion-mnist";
inline constexpr const char* kNpyFormat = "npy";
inline constexpr const char* kStoreFormat = "store";  // the erasure-coded store (docs/store.md)

// Mode "async" (docs/async.md): leased work units, parameter-server shards,
// a merge rule. Parsed from [async]; the merge and validator keys map onto
// ps::MergeParams and ps::ValidatorOptions.
struct AsyncConfig {
  int64_t servers = 1;            // parameter-server shards (tenax server processes), 1..64
  int64_t unit_steps = 20;        // local steps per work unit, >= 1
  double lease_seconds = 30;      // a lease expires this long after it was granted, > 0
  int64_t max_attempts = 5;       // failed copies before a unit errors out (and the job fails)
  std::string rule = "vc_asgd";   // "vc_asgd" | "delta" | "asgd"
  double alpha = 0.0;             // vc_asgd: the server's weight at staleness 0, [0, 1)
  double staleness_power = 0.5;   // [0, 4]; default DefaultStalenessPower(rule)
  double server_lr = 0;           // asgd: the server's step size; 0 = train.lr
  int64_t checkpoint_every = 10;  // merges between a shard's checkpoints, >= 1
  double norm_factor = 10;        // validator: reject update norms beyond this x the running median, > 1
  // The final model: the mean of the models the finisher pulled for its
  // units in this last fraction of the job's steps, and the final one, in
  // [0, 1); 0: the final model alone. 0.1 measured better on every job
  // tried (docs/async.md, "Tail averaging").
  double average_tail = 0.1;
};

// The staleness exponent a rule gets when the job file sets none: 0.5 for
// vc_asgd (measured best in tenax bench preemption, docs/async.md), 1 for
// delta and asgd.
inline double DefaultStalenessPower(const std::string& rule) { return rule == "vc_asgd" ? 0.5 : 1.0; }

// What the job's processes cost ([cost]; job/price_table.h).
struct CostConfig {
  std::string prices;  // a price table file; "" = no cost in summary.json
};

// A store that `tenax run` builds for the job ([storage]; docs/store.md):
// `nodes` `tenax storage` processes in out_dir/store, the job's data put
// into them (RS data_chunks + parity_chunks), and data.catalog pointed at
// it. The fault plan may kill (and wipe) its nodes.
struct StorageConfig {
  int64_t nodes = 0;            // 0 = no store of the launcher's own
  int64_t zones = 0;            // failure domains the chunks are spread over; 0 = nodes (one per node)
  int64_t data_chunks = 4;      // k
  int64_t parity_chunks = 2;    // m
  int64_t chunk_kib = 256;
  double link_gbps = 0;         // each node's emulated link (0 = unshaped)
  std::string source_dir;       // the Fashion-MNIST idx files the store is filled from
};

// What `tenax run` adds around the job ([report]; docs/report.md).
struct ReportConfig {
  bool html = true;        // write out_dir/report.html at the end
  bool reference = false;  // also run the job without faults and stragglers (out_dir/reference, reused
                           // while the job is unchanged): summary.json's reference_test_accuracy
};

// [worker]: what `tenax run` starts as each worker (docs/python.md, "Python
// workers under tenax run"). Empty: `tenax worker` (the built-in trainer).
struct WorkerConfig {
  // The user's program and its arguments, e.g. {"/usr/bin/python3",
  // "train.py"}; command[0] was found executable when the job was parsed
  // (on PATH, or a path from the working directory or the job file's).
  std::vector<std::string> command;
};

struct TrainConfig {
  std::string mode = "single";
  std::string data_format = kFashionMnistFormat;
  std::string data_dir;      // fashion-mnist: the directory of the four idx files
  std::string train_images;  // npy: N x C x H x W (or N x H x W) images
  std::string train_labels;  // npy: N integer labels
  std::string test_images;
  std::string test_labels;
  std::string store_catalog;                              // store: the store's SQLite catalog
  std::string store_train_dataset = "fashion-mnist-train";  // store: dataset names in it
  std::string store_test_dataset = "fashion-mnist-test";
  int64_t store_cache_chunks = 16;                        // store: decoded chunks a loader keeps
  int64_t store_shuffle_window = 0;  // store: shuffle within windows of this many chunks (0 = the whole split)
  // store: the recovery a loader starts when it reads around a lost chunk
  // ("none" = leave it to `tenax store recover`); the test split always
  // recovers with "full" (it is never evaluated on stand-ins).
  std::string store_recovery_policy = "none";
  double store_recovery_min_available = 0.9;    // prm
  double store_recovery_class_tolerance = 0.01;  // prm
  double store_recovery_background_gbps = 0;    // > 0: rebuild the rest at this rate afterwards
  // store: HOST:PORT of a resident recovery service (`tenax store serve`)
  // the loader asks instead of recovering in-process ("" = in-process).
  std::string store_recovery_service;
  // store: how a sample of a chunk PRM left for later is stood in for:
  // "neighbour" = the sample at the same position of the next live chunk;
  // "batch" = another sample of the same batch (each step learns from
  // available samples only, as if the missing ones were skipped).
  std::string store_stand_in = "neighbour";
  int64_t train_limit = 0;  // 0 = the whole split
  int64_t test_limit = 0;
  std::string model = "cnn";  // a built-in model; ignored when model_path is set
  std::string model_path;     // a TorchScript module saved by PyTorch ("" = use `model`)
  int64_t epochs = 2;
  int64_t max_steps = 0;  // 0 = run all epochs
  int64_t batch_size = 64;
  std::string optimizer = "sgd";
  double lr = 0.02;  // sgd; adam defaults to 0.001
  double momentum = 0.9;
  double weight_decay = 0.0;
  int64_t seed = 1;
  int64_t threads = 0;  // 0 = one per core
  // Where the model, optimizer state and batches live: "cpu", "cuda",
  // "cuda:N" or "auto" (CUDA when this libtorch has it and a GPU is
  // visible, else CPU). Resolved when training starts (train/device.h).
  std::string device = "auto";
  // Mode "sync": gradients go through pinned host buffers per bucket
  // ("auto": when the model is on a GPU; "always": on the CPU too, the
  // path the CPU tests and bench run).
  std::string staging = "auto";
  // Mode "sync": the gradient bucket size in KiB (0: 256 KiB when the
  // gradients are reduced where they are, 4096 when a GPU's are staged).
  int64_t bucket_kib = 0;
  // A model on a GPU: "auto" holds a training set that is decoded in
  // memory (idx, npy) and at most 2 GiB on the GPU, batches gathered
  // there; "off" gathers them on the host (pinned, copied ahead).
  std::string resident_data = "auto";
  // mode "sync": "auto" (the launcher picks the zone-hierarchical allreduce
  // when the workers span zones and the cost model says it is cheaper),
  // "ring" (always the flat ring) or "hierarchical" (whenever the workers
  // span zones of equal size).
  std::string allreduce = "auto";
  int64_t log_every_steps = 100;
  std::string log_level = "info";
  coord::ClusterConfig cluster;  // modes "sync", "async", "coded"
  FaultPlan faults;              // modes "sync" and "async"; executed by `tenax run`
  AsyncConfig async;             // mode "async" only
  coding::CodedConfig coded;     // mode "coded" only
  coding::StragglerConfig stragglers;  // modes "coded" and "sync" (emulated stragglers)
  StorageConfig storage;         // modes "sync", "coded", "async" under `tenax run`
  ReportConfig report;
  WorkerConfig worker;           // mode "sync" with cluster.elastic, under `tenax run`
  CostConfig cost;               // any mode run by `tenax run`
  // An emulated multi-host, multi-zone topology for `tenax run` and how the
  // job is placed on it (docs/placement.md); modes "sync", "async", "coded".
  sched::TopologySpec topology;
  sched::PlacementConfig placement;
};

// The ranks that join a multi-process job's coordinator: cluster.workers,
// plus the decoder (the last rank) in mode "coded".
inline int64_t RankCount(const TrainConfig& c) { return c.cluster.workers + (c.mode == "coded" ? 1 : 0); }

// InvalidArgument naming file:line (or the --set) of the first bad or
// unknown key.
Result<TrainConfig> ParseTrainConfig(const ConfigDoc& doc);

}  // namespace tenax

// The parameter-server role (`tenax server`): one shard of an asynchronous
// job's model (docs/async.md).
//
// Shard s of S holds the floats [s*P/S, (s+1)*P/S) of the flat model (P
// floats: the model's parameters in registration order). It registers that
// part, behind a ModelRegionHeader (ps_codec.h, a seqlock), as a memory
// region every worker reads one-sided, and gives every worker that says
// PsHello its own staging region to put results into. For each result
// (ResultReady naming unit and attempt) it copies the staged values out
// (the worker's memory is untrusted after that), validates them
// (result_validator.h), reports its check to the coordinator and waits for
// the coordinator's verdict, which decides in one transaction whether the
// unit is merged (coord/work_queue.h); then it merges with its rule
// (merge_rule.h), reports the merge, and tells the worker. Every
// `checkpoint_every` merges, at the job's end and on a stop signal it
// writes a checkpoint (shard_checkpoint.h, with the tail average's sums);
// started again on the same directory it continues from the newest intact
// one, and tells the coordinator how many merges that holds so the units
// merged after it are re-issued.
//
// Threading: RunServer runs on the calling thread, which owns the Node.
// Failures: bad input from a peer is refused with a line naming it and
// changes nothing; the coordinator being away is retried (once a second)
// while workers are served; a checkpoint that cannot be written ends the
// server (IoError naming the file: merging on without durable state would
// lose work silently).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/ps/merge_rule.h"
#include "tenax/ps/result_validator.h"

namespace tenax::ps {

struct InitialModel {
  std::string plan_fingerprint;
  std::vector<float> params;  // the whole flat model (every shard's part)
};

struct ServerOptions {
  std::string job_id;
  uint32_t shard = 0;
  uint32_t shards = 1;
  std::string coordinator_host;
  uint16_t coordinator_port = 0;
  std::string listen_host = "127.0.0.1";
  std::string secret;
  std::string transports;  // UCX_TLS; "" = UCX's choice
  int tcp_streams = 1;     // net::NodeOptions::tcp_streams
  std::string checkpoint_dir;
  MergeParams merge;
  ValidatorOptions validator;
  int64_t checkpoint_every = 10;
  // Tail averaging (async.average_tail; 0 = off): the shard keeps the mean
  // of its model after each merge of a unit that starts in the job's last
  // `average_tail` of its steps (the job's steps come in the coordinator's
  // welcome), in a region of its own that the worker finishing the job
  // reads, and in its checkpoints. Held by the shard rather than by a
  // worker so that it covers every merge of the tail, whichever worker
  // finishes (one that joined at the very end pulled none of them).
  double average_tail = 0;
  // Test seam (TENAX_TEST_SIGKILL_AFTER_CHECKPOINT=N, `tenax server`): the
  // shard SIGKILLs itself right after writing a checkpoint that holds N
  // merges or more (0: never), the moment a checkpoint holds merges whose
  // fate the coordinator must already know.
  uint64_t sigkill_after_checkpoint_of = 0;
  std::chrono::milliseconds join_timeout{60000};
  std::chrono::milliseconds peer_timeout{10000};
  // The model's plan fingerprint and initial parameters; called once at
  // start (also when a checkpoint exists: its plan and size must match).
  std::function<Result<InitialModel>()> initial_model;
};

// What the shard did, for logs and tests.
struct ServerOutcome {
  uint64_t version = 0;
  uint64_t merges = 0;
  uint64_t rejected = 0;       // results this shard found invalid
  uint64_t restored_merges = 0;  // merges its starting checkpoint held (0: fresh)
};

// Serves until the coordinator says the job is done (OK), a stop signal
// (Cancelled, after a checkpoint), or a failure: InvalidArgument for bad
// options (S above P, a bad merge rule), Refused when the coordinator turns
// the shard away, DeadlineExceeded when no coordinator answered within
// join_timeout, FailedPrecondition/DataLoss for a checkpoint directory of
// another job or with only damaged checkpoints.
Result<ServerOutcome> RunServer(const ServerOptions& options);

}  // namespace tenax::ps

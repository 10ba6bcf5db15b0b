// The exchange of asynchronous training (mode "async", docs/async.md): a
// worker trains leased work units against parameter-server shards.
//
// At each step boundary the worker either goes on with its unit or, at the
// unit's end, delivers the result: it puts each shard's part one-sided
// into that shard's staging region, tells the shard (ResultReady naming
// unit and attempt) and waits for the outcome (merged, rejected,
// duplicate, stale). Then it asks the coordinator for the next unit, reads
// the current model one-sided from every shard (a seqlock read of the
// shard's model region, ps_codec.h), and returns the unit's first step:
// the loop trains the unit's steps of the job's sampling schedule as local
// steps (SGD on the worker; for rule asgd the gradients are summed instead
// and the local model does not move).
//
// A stop signal is a preemption notice: the worker delivers the steps it
// did of its unit as a partial result (or gives the lease back when it did
// none), leaves the job and AtStepBoundary returns Cancelled. Without a
// notice (SIGKILL) the lease expires at the coordinator and the unit is
// issued again.
//
// rank() is 0 only for the one worker the coordinator names to finish the
// job (it pulls the final model, evaluates and writes the outputs); world()
// is 1: every worker reads whole batches of its unit's steps.
//
// Threading: the training thread, which also drives `node`. Failures:
// PeerLost/DeadlineExceeded when the coordinator stays away past its
// timeouts, FailedPrecondition when the job failed, Refused when a shard
// turns the worker away (another model or job).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tenax/coord/coordinator_client.h"
#include "tenax/net/node.h"
#include "tenax/ps/merge_rule.h"
#include "tenax/ps/result_validator.h"
#include "tenax/train/exchange/gradient_exchange.h"
#include "tenax/job/train_config.h"

namespace tenax {

struct AsyncExchangeOptions {
  std::string job_id;
  std::string worker;            // this worker's name, for logs
  std::string plan_fingerprint;  // the model's, checked by every shard
  ps::ResultKind kind = ps::ResultKind::kModel;
  int64_t total_steps = 0;       // the job's steps (AsyncTotalSteps); the coordinator's queue must agree
  double average_tail = 0;       // AsyncConfig::average_tail
  std::chrono::milliseconds grant_timeout{60000};   // no answer from the coordinator for this long fails
  std::chrono::milliseconds result_timeout{30000};  // a shard's outcome of a delivered result
  std::chrono::milliseconds connect_timeout{10000};
  // Fault injection (WorkerOptions::injected): the first attempt of this
  // unit delivers a NaN, a poisoned result the shards must reject. -1: none.
  int64_t poison_unit = -1;
};

// The job's [async] keys as the ps layer takes them.
inline ps::MergeParams MergeParamsOf(const TrainConfig& c) {
  ps::MergeParams m;
  m.rule = c.async.rule;
  m.alpha = c.async.alpha;
  m.staleness_power = c.async.staleness_power;
  m.lr = c.async.server_lr > 0 ? c.async.server_lr : c.lr;
  return m;
}
inline ps::ValidatorOptions ValidatorOptionsOf(const TrainConfig& c) {
  ps::ValidatorOptions v;
  v.norm_factor = c.async.norm_factor;
  return v;
}

std::unique_ptr<GradientExchange> MakeAsyncExchange(net::Node& node, coord::CoordinatorClient& client,
                                                    AsyncExchangeOptions options);

}  // namespace tenax

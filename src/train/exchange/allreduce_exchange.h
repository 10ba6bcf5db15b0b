// The exchange of synchronous data-parallel training (mode "sync"): every
// replica's gradients are averaged by allreduce over a comm::Group, so every
// replica applies the same update and the replicas stay bitwise identical.
//
// Attach: rank 0's initial parameters are broadcast (a sum where the others
// contribute zeros, exact). The parameters' .grad become views into the
// allreduce buffer (registered memory), laid out in reverse registration
// order (roughly the order backward produces them) and cut into buckets of
// `bucket_bytes`. A post-hook on each parameter's gradient accumulator
// counts ready parameters; a complete bucket starts its allreduce at once,
// while backward still runs (as PyTorch DDP's reducer). FinishStep waits for
// the last bucket. Zeroing the gradients is a memset of the buffer.
//
// A model on a GPU (or stage_gradients): the gradients stay on the device;
// a complete bucket is copied into page-locked host memory on a copy stream
// (the copy of bucket k starts when backward has produced it, marked by a
// device event, not a device-wide wait) and its allreduce starts as soon as
// the copy has landed, overlapping the transfer of bucket k-1; each sum is
// copied back to the device as it completes. docs/gpu.md.
//
// Failure: a collective with no progress for `step_timeout` fails naming the
// rank it waited for; `interrupt` is consulted while waiting (a coordinator's
// failure verdict, a stop signal) and its error is returned as is.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tenax/coding/straggler_model.h"

#include "tenax/comm/group.h"
#include "tenax/train/exchange/elastic_membership.h"
#include "tenax/train/exchange/gradient_exchange.h"

namespace tenax {

inline constexpr size_t kCpuBucketBytes = 256 << 10;
inline constexpr size_t kGpuBucketBytes = 4 << 20;

struct AllreduceExchangeOptions {
  std::chrono::nanoseconds step_timeout = std::chrono::seconds(60);
  // Gradient bucket size; 0: kCpuBucketBytes when the gradients are
  // reduced where they are, kGpuBucketBytes when a GPU's are staged
  // (fewer, larger copies between the device and the host).
  size_t bucket_bytes = 0;
  std::function<Status()> interrupt;  // may be empty
  // Gradients go through host staging buffers even on the CPU (always on
  // for a model on a GPU): train.staging = "always". The results are
  // bitwise those of the unstaged path.
  bool stage_gradients = false;
  // Zone of each rank (index = rank; empty: unknown): the summary counts
  // the bytes sent inside and across zones. With `hierarchical`, the
  // gradients are summed by the zone-hierarchical allreduce
  // (comm/hierarchical_allreduce.h), which the launcher picks with
  // sched::ChooseAllreduce. The elastic exchange ignores `zones` (its ranks,
  // and so their zones, change): with `hierarchical` it works the zones out
  // for every generation from the emulated topology (comm/group_zones.h)
  // and sums zone by zone whenever they have equal sizes, else the flat ring.
  std::vector<std::string> zones;
  bool hierarchical = false;
};

// `group` must outlive the exchange; every rank of it creates one.
std::unique_ptr<GradientExchange> MakeAllreduceExchange(comm::Group& group, const AllreduceExchangeOptions& options);

// Elastic synchronous training (cluster.elastic; docs/elastic.md): the
// same bucketed allreduce over a group the exchange re-forms whenever the
// membership changes, without restarting anyone.
// - The global batch stays configured_workers x batch; with W members,
//   rank r reads its share n_r of it and scales its gradient by n_r/G
//   before the sum, so the sum is the mean over G. Shares are even (G/W,
//   the first G mod W one more) in a generation's first steps; with
//   measured_shares they then follow each member's measured seconds per
//   sample (batch_shares.h), published in the step's allreduce, so that 3
//   members on 2 cores, or a member on a slower host, finish together.
// - A failed collective (a lost or stuck member) reports the member, waits
//   for the coordinator's next generation, re-forms and returns Aborted:
//   the loop goes back to the step boundary, where the members agree on
//   the steps applied (an allreduce of every member's count) and those
//   behind (a joiner, or a member whose interrupted step did not finish)
//   read the model and momentum one-sided from a member that has them.
// - Joins and leaves switch at an agreed boundary: each step's allreduce
//   carries one more float, 1 on a member that has seen a newer
//   generation; a sum above 0 makes everyone re-form before the next step.
// - A stop signal is a leave: Leave to the coordinator, then Cancelled
//   from AtStepBoundary once the generation without this member is agreed.
struct ElasticExchangeOptions {
  AllreduceExchangeOptions base;  // base.interrupt: stop signals are handled here, leave it empty
  ElasticMembership* membership = nullptr;  // outlives the exchange
  // Admitted to a running job: it holds no model and gets the state from
  // the members at its first step boundary (otherwise rank 0 broadcasts
  // the initial model to the first generation).
  bool joined_late = false;
  // Not OK: connecting the first generation failed with this status (a
  // member lost while every pair connected; comm::Group::Connect). `group`
  // then holds no connections (FromPeers with 0s), and this member joins
  // the next generation at its first step boundary, as after a failed
  // first allreduce set-up; it reports no suspect (the coordinator finds a
  // lost member by its own connection).
  Status first_generation_unformed;
  int64_t configured_workers = 1;           // global batch = configured_workers x batch
  int64_t max_workers = 1;                  // the largest generation (speed slots)
  bool measured_shares = true;              // shares follow measured speed; false: always even
  std::chrono::nanoseconds reform_timeout = std::chrono::seconds(60);  // for a new generation (join timeout)
  // Called with every membership event ({"event": "generation", ...}), for
  // metrics.jsonl and the log; may be empty.
  std::function<void(const nlohmann::json&)> on_event;
  // Test seam: called on a donor once the members agreed that it sends its
  // state and before it offers it, so that a test can kill the donor in the
  // middle of a join (WorkerOptions::injected.sigstop_as_donor: the worker
  // then SIGSTOPs itself here).
  std::function<void()> before_state_offer;
  // Test seam: called on a member before it offers its part of a
  // generation's allreduce: the first generation's (argument true, in
  // Attach) or a re-formed one's (false), so that a test can lose a member
  // while the others set up an allreduce
  // (WorkerOptions::injected.sigstop_before_allreduce).
  std::function<void(bool first_generation)> before_allreduce_offer;
  // Emulated stragglers ([stragglers] in a sync job): this process sleeps
  // (slowdown - 1) x its own compute time of each step, inside the measured
  // compute time, so measured shares move work away from it as they would
  // from a slow machine. `straggler_id` is the launcher's worker index (the
  // model's worker); -1 (joiners) is never slowed.
  std::shared_ptr<coding::StragglerModel> stragglers;
  int straggler_id = -1;
  // A member whose seconds per sample exceed slow_factor x the median of
  // the members for 10 measured steps in a row is reported as a straggler
  // ({"event": "straggler"} through on_event, by rank 0); it recovers after
  // 10 steps below (1 + slow_factor) / 2.
  double slow_factor = 2.0;
};

// `group` is the first generation this worker is in: the initial one
// (every member joining: rank 0's weights are broadcast) or, for a worker
// joining a running job, one where it joins (its state comes from a donor
// at the first step boundary).
std::unique_ptr<GradientExchange> MakeElasticExchange(std::unique_ptr<comm::Group> group,
                                                      const ElasticExchangeOptions& options);

}  // namespace tenax

// The decoder of coded synchronous training (mode "coded", docs/coded.md):
// one process (the job's last rank, cluster.workers) that holds the model
// and the optimizer, collects the workers' combined vectors, decodes the
// full gradient from the fastest workers, applies the update and publishes
// the next model.
//
// Protocol (messages in coded_codec.h, over the job's comm::Group):
//  - Welcome: the decoder registers the model region (a seqlock header, the
//    row of every worker, the parameters) and one result slot per worker,
//    and sends each worker where they are.
//  - Each step: the decoder publishes the model of step t (seqlock write)
//    and sends CodedStep(t) to every worker. A worker reads the model
//    one-sided, computes its row's combined vector, puts it into its slot
//    and sends CodedReady(t). The decoder decodes as soon as the scheme's
//    rule holds (all n for wait_all, n-s for ignore_stragglers, any set
//    that decodes exactly for the codes, or the deadline for approximate
//    decoding); results of earlier steps arriving later are not used (their
//    arrival time still feeds straggler detection), and nobody waits for
//    them: the late worker reads the newest model at its next step.
//  - The decoder never writes into a worker's memory, so a stopped worker
//    cannot block it; a worker writes only its own slot, and only between
//    reading a model and announcing its result, so a slot is never read
//    while its owner writes it.
//
// Threading: the calling thread owns the Node and runs everything.
// Failure: DeadlineExceeded (naming the workers that did not report) when a
// step cannot be decided within step_timeout; a worker's malformed message
// is refused with a log line and ignored; a lost worker is done without
// for as long as the scheme allows.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenax/coding/coded_config.h"
#include "tenax/comm/group.h"
#include "tenax/core/status.h"

namespace tenax::coding {

struct DecoderOptions {
  CodedConfig coded;
  uint64_t code_seed = 1;   // cyclic codes: the same on every process
  int64_t total_steps = 0;  // steps to decode (the job's)
  // SGD as torch::optim::SGD does it (dampening 0, no Nesterov).
  double lr = 0.01, momentum = 0, weight_decay = 0;
  int64_t partition_bytes = 0;  // one data partition's size, for the shuffle's bytes moved
  std::chrono::nanoseconds step_timeout = std::chrono::seconds(60);
  // Straggler changes, shuffles and the decoder's per-step line for
  // metrics (may be empty).
  std::function<void(const nlohmann::json&)> on_event;
  std::function<void(int64_t step)> on_step;  // after every decoded step (may be empty)
};

struct DecoderOutcome {
  nlohmann::json summary;      // the statistics also sent to the workers with the last step
  std::vector<float> params;   // the final model
};

// The next control message of `kind` (from `from`, when given), waiting as
// the allreduce does when processes outnumber cores: spin, then yield,
// then sleep 50 us between polls, so an idle waiter leaves the core to the
// workers that compute. DeadlineExceeded at `deadline`; a lost `from` as
// the Node reports it.
Result<net::ControlMessage> ReceivePatiently(net::Node& node, uint32_t kind, Deadline deadline,
                                             std::optional<net::PeerId> from = std::nullopt);

// `group`: ranks 0..n-1 are the workers, rank n (the caller) the decoder.
// `initial_params`: the flat model every rank built from the job's seed.
Result<DecoderOutcome> RunDecoder(comm::Group& group, std::vector<float> initial_params, const DecoderOptions& options);

}  // namespace tenax::coding

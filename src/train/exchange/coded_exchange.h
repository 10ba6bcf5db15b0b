// The exchange of coded synchronous training (mode "coded", docs/coded.md):
// a worker's side of gradient coding. The decoder (coding/coded_decoder.h)
// is the group's last rank; workers are ranks 0..n-1.
//
// - Data: the training set is cut once into n partitions (coded.partitioning).
//   At step t every partition contributes its next batch_size samples (its
//   own permutation per epoch). A worker reads the partitions of the code
//   row the decoder assigned to it and weights partition j's losses by
//   B[row, j] / (n x batch_size), so its gradient is its row's combined
//   vector f = sum_j B[row, j] g_j of the partitions' mean-loss gradients
//   (one backward pass: the gradient is linear in the loss).
// - AtStepBoundary waits for the decoder's next step and reads its model
//   one-sided (a seqlock read): a worker that fell behind jumps to the
//   newest step; the results it computed meanwhile were not waited for.
// - FinishStep applies the emulated slowdown (a real sleep of (slowdown-1)
//   x this step's own compute time, coding/straggler_model.h), puts the
//   combined vector into its slot at the decoder and announces it. The
//   loop's optimizer does not step: the decoder applies the update.
// - Reductions are local (no step waits for a straggler to report a loss);
//   the loop evaluates only the final model, on rank 0.
//
// Threading: the training thread, which drives the group's Node.
// Failure: PeerLost when the decoder is lost, DeadlineExceeded when no
// step is published within step_timeout, ProtocolError for a decoder that
// breaks the protocol; a stop signal is consulted by the loop.
#pragma once

#include <chrono>
#include <memory>

#include <torch/torch.h>

#include "tenax/coding/coded_config.h"
#include "tenax/coding/straggler_model.h"
#include "tenax/comm/group.h"
#include "tenax/train/exchange/gradient_exchange.h"

namespace tenax {

struct CodedExchangeOptions {
  coding::CodedConfig coded;
  uint64_t code_seed = 1;  // the decoder's (cyclic codes)
  int64_t seed = 1;        // train.seed: partitions and their per-epoch orders
  torch::Tensor train_labels;  // int64 [N]: the training split's labels (partitioning)
  std::unique_ptr<coding::StragglerModel> stragglers;  // may be null (none)
  std::chrono::nanoseconds step_timeout = std::chrono::seconds(60);
};

// `group` must outlive the exchange; this process is a worker (rank < world - 1).
std::unique_ptr<GradientExchange> MakeCodedExchange(comm::Group& group, CodedExchangeOptions options);

}  // namespace tenax

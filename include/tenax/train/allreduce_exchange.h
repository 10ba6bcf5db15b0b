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
// Failure: a collective with no progress for `step_timeout` fails naming the
// rank it waited for; `interrupt` is consulted while waiting (a coordinator's
// failure verdict, a stop signal) and its error is returned as is.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "tenax/comm/group.h"
#include "tenax/train/gradient_exchange.h"

namespace tenax {

struct AllreduceExchangeOptions {
  std::chrono::nanoseconds step_timeout = std::chrono::seconds(60);
  size_t bucket_bytes = 256 << 10;
  std::function<Status()> interrupt;  // may be empty
};

// `group` must outlive the exchange; every rank of it creates one.
std::unique_ptr<GradientExchange> MakeAllreduceExchange(comm::Group& group, const AllreduceExchangeOptions& options);

}  // namespace tenax

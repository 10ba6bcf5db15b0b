// The exchange of single-process training: the local gradients are the
// update (one replica, rank 0 of 1). Reductions over replicas are identities.
#pragma once

#include <memory>

#include "tenax/train/exchange/gradient_exchange.h"

namespace tenax {

std::unique_ptr<GradientExchange> MakeLocalExchange();

}  // namespace tenax

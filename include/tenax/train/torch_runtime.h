// libtorch's process-global state, set in this one place.
//
// libtorch keeps two things per process, not per trainer: the intra-op
// thread count and the default random generator (which draws initial
// weights). Every trainer sets them through these functions only, so tests
// that run several ranks as threads of one process draw exactly the weights
// that separate processes would.
#pragma once

#include <cstdint>
#include <functional>

namespace tenax {

// `train.threads` as used: the configured count, or one per core for 0.
int64_t ResolveThreads(int64_t configured);

// Sets libtorch's intra-op thread count for this process; returns it.
int64_t ConfigureTorchThreads(int64_t configured);

// Seeds torch's process-wide generator with `seed` and runs `init` (which
// builds a model) under one process-wide lock, so concurrent callers cannot
// interleave their draws.
void SeededModelInit(int64_t seed, const std::function<void()>& init);

}  // namespace tenax

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

// `train.threads` as used: the configured count; for 0, $OMP_NUM_THREADS
// when it holds a positive count (as PyTorch itself does), else one per
// core. `omp_num_threads` is that variable's value (nullptr: unset).
int64_t ResolveThreads(int64_t configured);
int64_t ResolveThreads(int64_t configured, const char* omp_num_threads);

// Sets libtorch's intra-op thread count for this process; returns it.
int64_t ConfigureTorchThreads(int64_t configured);

// Seeds torch's process-wide generator with `seed` and runs `init` (which
// builds a model) under one process-wide lock, so concurrent callers cannot
// interleave their draws.
void SeededModelInit(int64_t seed, const std::function<void()>& init);

}  // namespace tenax

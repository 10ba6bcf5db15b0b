// How a global batch is split between the members of a synchronous step
// when the members are not equally fast (elastic jobs: 3 processes on 2
// cores, a replacement on a slower host). Pure arithmetic, free of libtorch.
//
// Each member measures the seconds it spends per sample of its share and
// publishes the value in its slot of the step's allreduce; every member then
// computes the next step's shares from the same summed vector with
// BalancedShares, so all members agree without another message. Shares are
// proportional to each member's speed (1 / seconds per sample): a member
// twice as fast gets twice the samples, so that every member's part of the
// step ends at about the same time.
//
// The vector arrives from the network, so any float is possible: one that is
// not finite or not above zero (a member without a measurement yet, a
// corrupt value) makes the split even, never an error.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tenax {

// The even split of `global_batch` over `members`: the first
// global_batch % members members one sample more.
std::vector<int64_t> EvenShares(int64_t global_batch, int members);

// Shares proportional to 1 / seconds_per_sample[i], each at least
// max(1, global_batch / (kMinShareDivisor x members)) and summing to
// global_batch exactly; remainders go to the largest fractional parts (the
// lower rank on a tie). Deterministic: the same input gives the same
// output on every member. Needs global_batch >= members >= 1 (else the
// even split, which may contain zeros).
inline constexpr int64_t kMinShareDivisor = 8;
std::vector<int64_t> BalancedShares(std::span<const float> seconds_per_sample, int64_t global_batch);

}  // namespace tenax

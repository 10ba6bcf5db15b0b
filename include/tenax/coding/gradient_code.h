// Gradient codes (layer `coding`; issue "Straggler-tolerant synchronous
// training"): n workers, n data
// partitions, tolerate s stragglers. Worker i holds the partitions in the
// support of row i of the n x n encoding matrix B and sends one combined
// vector f_i = sum_j B[i,j] g_j of its partition gradients. A decoder that
// has the vectors of a set F of workers finds a with sum_{i in F} a_i B[i,:]
// = 1^T, so sum_{i in F} a_i f_i = sum_j g_j, the full gradient (Tandon,
// Lei, Dimakis, Karampatziakis, "Gradient Coding", ICML 2017).
//
//  - Fractional repetition ((s+1) divides n): n/(s+1) groups of s+1
//    workers; everyone in group g holds the group's s+1 partitions and
//    sends their sum. Any n-s arrivals include one worker of every group.
//  - Cyclic repetition (any s < n): row i is supported on partitions
//    i, i+1, ..., i+s (mod n) and lies in the null space of a random s x n
//    matrix H whose rows sum to zero, so 1 is in the span of any n-s rows
//    (with probability 1 over H; the seed makes it reproducible). Some
//    draws are badly conditioned (decoding vectors up to 1e5 at n = 12),
//    so of 32 valid draws the one whose worst arrival set of n-s (all of
//    them up to 1024, else up to 1024 seeded random ones, fewer for large
//    n) amplifies float rounding least (sum |a_i| ||B_i||_1 / n, 1 for
//    fractional repetition) is kept: same seed, same code, on every
//    process. Measured for n <= 12: every |a_i| below 1000 (n = 4, s = 1, seed 1:
//    below 2). Larger n and s stay worse conditioned than fractional
//    repetition, which should be preferred where (s+1) divides n.
//
// Pure values, no I/O; threading: a GradientCode is immutable after
// construction and may be shared; a Decoder caches and is single-threaded.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::coding {

enum class Scheme { kFractionalRepetition, kCyclicRepetition, kUncoded };

// "frc", "cyclic", "uncoded".
const char* SchemeName(Scheme scheme);

class GradientCode {
 public:
  int n() const { return n_; }
  int s() const { return s_; }
  Scheme scheme() const { return scheme_; }
  double At(int worker, int partition) const { return b_[static_cast<size_t>(worker * n_ + partition)]; }
  // The partitions worker `worker` holds (the support of its row), ascending.
  std::vector<int> Partitions(int worker) const;

  // InvalidArgument, in one line that says what would work, for n < 1,
  // s < 0, s >= n, or (fractional repetition) (s+1) not dividing n.
  static Result<GradientCode> FractionalRepetition(int n, int s);
  static Result<GradientCode> CyclicRepetition(int n, int s, uint64_t seed);
  // B = I (s = 0): worker i holds partition i only. The baselines wait_all
  // and ignore_stragglers use it for assignments and coverage.
  static Result<GradientCode> Uncoded(int n);

 private:
  GradientCode(int n, int s, Scheme scheme) : n_(n), s_(s), scheme_(scheme), b_(static_cast<size_t>(n * n), 0.0) {}
  double& Entry(int worker, int partition) { return b_[static_cast<size_t>(worker * n_ + partition)]; }

  int n_, s_;
  Scheme scheme_;
  std::vector<double> b_;  // row-major n x n
};

// Every k-subset of {0..n-1}, each ascending, in lexicographic order; nullopt
// when there are more than `limit` of them (the count is checked before
// anything is built).
std::optional<std::vector<std::vector<int>>> SubsetsUpTo(int n, int k, size_t limit);

// The coefficients for the workers whose vectors arrived.
struct Decoding {
  std::vector<int> workers;    // ascending, as given to the decoder
  std::vector<double> coeffs;  // a_i, one per entry of `workers`
  // ||sum_i a_i B[i,:] - 1|| / sqrt(n): 0 for an exact decoding. With
  // partition gradients of equal norm G and independent directions, the
  // decoded sum misses the full gradient by about error * sqrt(n) * G.
  double error = 0;
  bool exact = false;  // error below the decoder's tolerance
};

// Decodes arrival sets of one code. Every decoding is the least-squares
// best a (minimum ||B_F^T a - 1||), found by Gram-Schmidt with
// re-orthogonalisation on the arrived rows (dependent rows, as in
// fractional repetition, get coefficient 0); results are cached per
// arrival set.
class Decoder {
 public:
  // `code` must outlive the decoder.
  explicit Decoder(const GradientCode& code, double tolerance = 1e-9);

  // InvalidArgument for a worker outside 0..n-1 or named twice. Any set
  // size: fewer than n-s arrivals usually decodes approximately.
  Result<Decoding> Decode(std::vector<int> arrived);
  // As Decode, but FailedPrecondition when the set does not decode exactly
  // (fewer than n-s arrivals, or a degenerate cyclic draw).
  Result<Decoding> DecodeExact(std::vector<int> arrived);

  size_t cached() const { return cache_.size(); }

 private:
  Decoding Solve(const std::vector<int>& workers) const;

  const GradientCode& code_;
  double tolerance_;
  std::map<std::vector<int>, Decoding> cache_;
};

}  // namespace tenax::coding

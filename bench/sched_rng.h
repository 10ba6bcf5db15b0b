// The random numbers of `tenax bench sched`'s simulation (sched_sim.h):
// one seeded stream per purpose (jobs, links, degradation, probes, each
// policy's ties), so that a run is the same for a given --seed and a policy's
// own draws never shift another's. Distributions are computed here from the
// generator's raw 64-bit output rather than with <random>'s distributions,
// whose algorithms the standard leaves to the library.
//
// Header-only; one Rng per thread (not thread-safe).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>

namespace tenax::bench::schedsim {

// SplitMix64: mixes a seed and a purpose into an independent stream's seed.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline uint64_t StreamSeed(uint64_t seed, std::string_view purpose) {
  uint64_t h = Mix(seed);
  for (char c : purpose) h = Mix(h ^ static_cast<uint8_t>(c));
  return h;
}

class Rng {
 public:
  Rng(uint64_t seed, std::string_view purpose) : gen_(StreamSeed(seed, purpose)) {}

  // [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // 0 .. n-1 (n > 0); the modulo bias of a 64-bit draw is negligible here.
  int Index(int n) { return static_cast<int>(gen_() % static_cast<uint64_t>(n)); }
  int64_t Between(int64_t lo, int64_t hi) {  // lo .. hi inclusive
    return lo + static_cast<int64_t>(gen_() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Bernoulli(double p) { return Uniform() < p; }
  double Exponential(double mean) { return -mean * std::log1p(-Uniform()); }
  // Standard normal (Box-Muller; one of the pair is dropped for simplicity).
  double Normal() {
    const double u1 = 1.0 - Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::mt19937_64 gen_;
};

}  // namespace tenax::bench::schedsim

// Property tests of the gradient codes and their decoder (coding/gradient_code.h).
#include "tenax/coding/gradient_code.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

namespace tenax::coding {
namespace {

using Vec = std::vector<double>;


// The workers of a bit mask, ascending.
std::vector<int> Members(int n, unsigned mask) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    if ((mask >> i) & 1u) out.push_back(i);
  }
  return out;
}

// Every subset of {0..n-1} of size k, in lexicographic order, from bit
// masks (independent of SubsetsUpTo, which it checks).
std::vector<std::vector<int>> Subsets(int n, int k) {
  std::vector<std::vector<int>> out;
  for (unsigned mask = 0; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) == k) out.push_back(Members(n, mask));
  }
  std::sort(out.begin(), out.end());
  return out;
}

long Binomial(int n, int k) {
  long c = 1;
  for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return c;
}

std::string Name(const GradientCode& code) {
  return std::string(SchemeName(code.scheme())) + " n=" + std::to_string(code.n()) + " s=" + std::to_string(code.s());
}

std::string SetName(const std::vector<int>& set) {
  std::string out = "{";
  for (size_t k = 0; k < set.size(); ++k) out += (k ? "," : "") + std::to_string(set[k]);
  return out + "}";
}

// B_F^T a: the combination of the arrived rows, one entry per partition.
Vec Combination(const GradientCode& code, const std::vector<int>& workers, const Vec& a) {
  Vec c(static_cast<size_t>(code.n()), 0.0);
  for (size_t k = 0; k < workers.size(); ++k) {
    for (int j = 0; j < code.n(); ++j) c[static_cast<size_t>(j)] += a[k] * code.At(workers[k], j);
  }
  return c;
}

// ||B_F^T a - 1|| / sqrt(n), recomputed from At().
double Residual(const GradientCode& code, const std::vector<int>& workers, const Vec& a) {
  double r = 0;
  for (double c : Combination(code, workers, a)) r += (c - 1) * (c - 1);
  return std::sqrt(r / code.n());
}

// Partition gradients g_j (dim each) and the coded vectors f_i = sum_j B[i,j] g_j.
struct Gradients {
  std::vector<Vec> g, f;
  Vec total;  // sum_j g_j
};

Gradients Encode(const GradientCode& code, std::vector<Vec> g) {
  const int n = code.n();
  const size_t dim = g.empty() ? 0 : g[0].size();
  Gradients out;
  out.total.assign(dim, 0.0);
  for (const Vec& v : g) {
    for (size_t d = 0; d < dim; ++d) out.total[d] += v[d];
  }
  out.f.assign(static_cast<size_t>(n), Vec(dim, 0.0));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      for (size_t d = 0; d < dim; ++d) out.f[static_cast<size_t>(i)][d] += code.At(i, j) * g[static_cast<size_t>(j)][d];
    }
  }
  out.g = std::move(g);
  return out;
}

// sum_i a_i f_i over the arrived workers.
Vec Decoded(const Gradients& grads, const Decoding& d) {
  Vec sum(grads.total.size(), 0.0);
  for (size_t k = 0; k < d.workers.size(); ++k) {
    for (size_t x = 0; x < sum.size(); ++x) sum[x] += d.coeffs[k] * grads.f[static_cast<size_t>(d.workers[k])][x];
  }
  return sum;
}

double Norm(const Vec& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

double MaxAbs(const Vec& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// Decodes every arrival set of n-s or more workers (sizes n-s exactly, and
// every superset, as the decoder role asks whenever >= n-s rows are in) on
// real vectors: sum_i a_i f_i must be sum_j g_j.
void ExpectEverySetDecodesExactly(const GradientCode& code, std::mt19937_64& rng, double* max_coeff, long* sets) {
  const int n = code.n(), s = code.s();
  const size_t dim = 7;
  std::normal_distribution<double> normal;
  std::vector<Vec> g(static_cast<size_t>(n), Vec(dim));
  for (Vec& v : g) {
    for (double& x : v) x = normal(rng);
  }
  const Gradients grads = Encode(code, std::move(g));
  const double norm = Norm(grads.total);
  ASSERT_GT(norm, 0.0);
  Decoder decoder(code);
  long of_size_n_minus_s = 0;
  for (unsigned mask = 0; mask < (1u << n); ++mask) {
    const std::vector<int> set = Members(n, mask);
    if (static_cast<int>(set.size()) < n - s) continue;
    of_size_n_minus_s += static_cast<int>(set.size()) == n - s;
    ++*sets;
    auto d = decoder.DecodeExact(set);
    ASSERT_TRUE(d.ok()) << Name(code) << " set " << SetName(set) << ": " << d.status().message();
    ASSERT_EQ(d->workers, set);
    ASSERT_EQ(d->coeffs.size(), set.size());
    EXPECT_TRUE(d->exact) << Name(code) << " set " << SetName(set);
    EXPECT_LT(d->error, 1e-9) << Name(code) << " set " << SetName(set);
    EXPECT_LT(Residual(code, set, d->coeffs), 1e-9) << Name(code) << " set " << SetName(set);
    *max_coeff = std::max(*max_coeff, MaxAbs(d->coeffs));
    const Vec sum = Decoded(grads, *d);
    double diff = 0;
    for (size_t x = 0; x < dim; ++x) diff = std::max(diff, std::abs(sum[x] - grads.total[x]));
    ASSERT_LT(diff / norm, 1e-8) << Name(code) << " set " << SetName(set);
  }
  EXPECT_EQ(of_size_n_minus_s, Binomial(n, n - s)) << Name(code);
}

TEST(GradientCodeSubsets, AreEveryKSubsetInOrderOrNothingAboveTheLimit) {
  auto s = SubsetsUpTo(5, 2, 10);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(*s, Subsets(5, 2));  // the test's own enumeration
  EXPECT_EQ(s->size(), 10u);
  EXPECT_EQ(s->front(), (std::vector<int>{0, 1}));
  EXPECT_EQ(s->back(), (std::vector<int>{3, 4}));
  EXPECT_FALSE(SubsetsUpTo(5, 2, 9).has_value());
  for (int n = 0; n <= 12; ++n) {
    for (int k = 0; k <= n; ++k) {
      auto all = SubsetsUpTo(n, k, 1u << 20);
      ASSERT_TRUE(all.has_value());
      EXPECT_EQ(static_cast<long>(all->size()), Binomial(n, k)) << n << " choose " << k;
    }
  }
}

TEST(GradientCodeProperty, EveryArrivalSetOfNMinusSOrMoreDecodesTheFullGradient) {
  std::mt19937_64 rng(42);
  double max_coeff_cyclic = 0, max_coeff_frc = 0;
  int cyclic_codes = 0, frc_codes = 0;
  long sets = 0;
  for (int n = 1; n <= 12; ++n) {
    for (int s = 0; s < n; ++s) {
      for (uint64_t seed : {1u, 2u, 3u}) {
        auto cyclic = GradientCode::CyclicRepetition(n, s, seed);
        ASSERT_TRUE(cyclic.ok()) << cyclic.status().message();
        ExpectEverySetDecodesExactly(*cyclic, rng, &max_coeff_cyclic, &sets);
        ++cyclic_codes;
      }
      if (n % (s + 1) == 0) {
        auto frc = GradientCode::FractionalRepetition(n, s);
        ASSERT_TRUE(frc.ok()) << frc.status().message();
        ExpectEverySetDecodesExactly(*frc, rng, &max_coeff_frc, &sets);
        ++frc_codes;
      }
    }
  }
  EXPECT_EQ(cyclic_codes, 3 * 78);  // 78 pairs (n, s) with 0 <= s < n <= 12
  EXPECT_EQ(frc_codes, 35);         // sum over n <= 12 of the number of divisors of n
  // Numerical stability: the decoding vectors must not blow up.
  // (A single Gaussian draw per code reached 2.6e5 here; the best of 32
  // draws stays below 1e3.)
  EXPECT_LT(max_coeff_cyclic, 1e4) << "cyclic decoding vectors blew up";
  EXPECT_NEAR(max_coeff_frc, 1.0, 1e-12) << "fractional repetition decodes with 0/1 coefficients";
  std::cout << "[ stats    ] " << sets << " arrival sets decoded; largest |a_i|: cyclic " << max_coeff_cyclic
            << ", frc " << max_coeff_frc << "\n";
  ::testing::Test::RecordProperty("max_abs_coeff_cyclic", std::to_string(max_coeff_cyclic));
}

TEST(GradientCodeProperty, SupportsAreTheConstructionsOnes) {
  for (int n = 1; n <= 12; ++n) {
    for (int s = 0; s < n; ++s) {
      auto c = GradientCode::CyclicRepetition(n, s, 9);
      ASSERT_TRUE(c.ok());
      EXPECT_EQ(c->n(), n);
      EXPECT_EQ(c->s(), s);
      EXPECT_EQ(c->scheme(), Scheme::kCyclicRepetition);
      std::vector<int> holders(static_cast<size_t>(n), 0);
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(c->At(i, i), 1.0) << Name(*c) << " row " << i;
        std::vector<int> expected;
        for (int k = 0; k <= s; ++k) expected.push_back((i + k) % n);
        std::sort(expected.begin(), expected.end());
        EXPECT_EQ(c->Partitions(i), expected) << Name(*c) << " row " << i;
        int nonzeros = 0;
        for (int j = 0; j < n; ++j) {
          nonzeros += c->At(i, j) != 0.0;
          EXPECT_TRUE(std::isfinite(c->At(i, j)));
        }
        EXPECT_EQ(nonzeros, s + 1) << Name(*c) << " row " << i;
        for (int j : c->Partitions(i)) ++holders[static_cast<size_t>(j)];
      }
      for (int j = 0; j < n; ++j) EXPECT_EQ(holders[static_cast<size_t>(j)], s + 1) << Name(*c) << " partition " << j;

      if (n % (s + 1) != 0) continue;
      auto f = GradientCode::FractionalRepetition(n, s);
      ASSERT_TRUE(f.ok());
      EXPECT_EQ(f->scheme(), Scheme::kFractionalRepetition);
      std::fill(holders.begin(), holders.end(), 0);
      for (int i = 0; i < n; ++i) {
        const int first = i / (s + 1) * (s + 1);
        std::vector<int> group;
        for (int j = first; j <= first + s; ++j) group.push_back(j);
        EXPECT_EQ(f->Partitions(i), group) << Name(*f) << " row " << i;
        for (int j = 0; j < n; ++j) {
          EXPECT_EQ(f->At(i, j), j >= first && j <= first + s ? 1.0 : 0.0);
          EXPECT_EQ(f->At(i, j), f->At(first, j)) << Name(*f) << ": rows of a group differ";
        }
        for (int j : f->Partitions(i)) ++holders[static_cast<size_t>(j)];
      }
      for (int h : holders) EXPECT_EQ(h, s + 1);
    }
  }
}

// The cyclic rows lie in an (n-s)-dimensional space (the null space of H):
// decoding from all n workers keeps the first n-s rows and gives the s rows
// after them, which depend on those, coefficient 0.
TEST(GradientCodeProperty, CyclicRowsSpanAnNMinusSDimensionalSpace) {
  for (int n = 2; n <= 12; ++n) {
    for (int s = 1; s < n; ++s) {
      for (uint64_t seed : {1u, 2u, 3u}) {
        auto code = GradientCode::CyclicRepetition(n, s, seed);
        ASSERT_TRUE(code.ok());
        Decoder decoder(*code);
        std::vector<int> all(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
        auto d = decoder.DecodeExact(all);
        ASSERT_TRUE(d.ok()) << Name(*code) << ": " << d.status().message();
        for (int i = 0; i < n; ++i) {
          if (i < n - s) {
            EXPECT_NE(d->coeffs[static_cast<size_t>(i)], 0.0) << Name(*code) << " seed " << seed << " row " << i;
          } else {
            EXPECT_EQ(d->coeffs[static_cast<size_t>(i)], 0.0) << Name(*code) << " seed " << seed << " row " << i;
          }
        }
      }
    }
  }
}

// Fewer than n-s arrivals of a cyclic code: the decoder reports its error
// honestly, the error is what the decoded vector misses by, and the
// coefficients are the least-squares optimum.
TEST(GradientCodeProperty, ApproximateDecodingReportsItsErrorAndIsTheLeastSquaresOptimum) {
  int checked = 0;
  for (int n : {2, 3, 4, 5, 6, 7, 9}) {
    for (int s = 1; s < n; ++s) {
      auto code = GradientCode::CyclicRepetition(n, s, 5);
      ASSERT_TRUE(code.ok());
      // g_j = e_j in R^n, so f_i is row i of B and sum_i a_i f_i is B_F^T a.
      std::vector<Vec> unit(static_cast<size_t>(n), Vec(static_cast<size_t>(n), 0.0));
      for (int j = 0; j < n; ++j) unit[static_cast<size_t>(j)][static_cast<size_t>(j)] = 1.0;
      const Gradients grads = Encode(*code, unit);
      Decoder decoder(*code);
      for (int k = 1; k < n - s; ++k) {
        for (const auto& set : Subsets(n, k)) {
          auto d = decoder.Decode(set);
          ASSERT_TRUE(d.ok());
          ++checked;
          ASSERT_EQ(d->workers, set);
          ASSERT_EQ(d->coeffs.size(), set.size());
          const std::string what = Name(*code) + " set " + SetName(set);
          const double err = Residual(*code, set, d->coeffs);
          EXPECT_NEAR(d->error, err, 1e-12) << what;
          // Fewer than n-s rows of a generic cyclic code never reach 1.
          EXPECT_FALSE(d->exact) << what;
          EXPECT_GT(d->error, 1e-6) << what;
          EXPECT_LE(d->error, 1.0 + 1e-12) << what << ": worse than a = 0";

          const Vec decoded = Decoded(grads, *d);
          const Vec combo = Combination(*code, set, d->coeffs);
          double dist = 0;
          for (int j = 0; j < n; ++j) {
            EXPECT_NEAR(decoded[static_cast<size_t>(j)], combo[static_cast<size_t>(j)], 1e-12) << what;
            dist += (decoded[static_cast<size_t>(j)] - 1) * (decoded[static_cast<size_t>(j)] - 1);
          }
          EXPECT_NEAR(std::sqrt(dist / n), d->error, 1e-12) << what;

          // Optimality: the residual is orthogonal to every arrived row
          // (normal equations B_F (B_F^T a - 1) = 0) ...
          for (int w : set) {
            double dot = 0, row = 0;
            for (int j = 0; j < n; ++j) {
              dot += code->At(w, j) * (combo[static_cast<size_t>(j)] - 1);
              row += code->At(w, j) * code->At(w, j);
            }
            EXPECT_NEAR(dot / std::sqrt(row), 0.0, 1e-9) << what << " row " << w;
          }
          // ... so no move of any coefficient lowers it.
          for (size_t i = 0; i < set.size(); ++i) {
            for (double delta : {1e-3, -1e-3}) {
              Vec moved = d->coeffs;
              moved[i] += delta;
              EXPECT_GE(Residual(*code, set, moved), err - 1e-12) << what;
            }
          }
          // One more worker never makes the best decoding worse.
          for (int extra = 0; extra < n; ++extra) {
            if (std::find(set.begin(), set.end(), extra) != set.end()) continue;
            std::vector<int> more = set;
            more.push_back(extra);
            auto m = decoder.Decode(more);
            ASSERT_TRUE(m.ok());
            EXPECT_LE(m->error, d->error + 1e-12) << what << " + " << extra;
          }

          auto exact = decoder.DecodeExact(set);
          ASSERT_FALSE(exact.ok()) << what;
          EXPECT_EQ(exact.status().code(), StatusCode::kFailedPrecondition) << what;
        }
      }
    }
  }
  EXPECT_GT(checked, 500);
}

// Fractional repetition in closed form, for every arrival set (any size):
// the first arrived worker of each group gets 1, the others 0 (their rows
// are copies), and each group nobody arrived from loses its s+1 partitions.
TEST(GradientCodeProperty, FractionalRepetitionDecodesEverySetInClosedForm) {
  for (int n = 1; n <= 12; ++n) {
    for (int s = 0; s < n; ++s) {
      if (n % (s + 1) != 0) continue;
      auto code = GradientCode::FractionalRepetition(n, s);
      ASSERT_TRUE(code.ok());
      Decoder decoder(*code);
      const int groups = n / (s + 1);
      for (unsigned mask = 0; mask < (1u << n); ++mask) {
        const std::vector<int> set = Members(n, mask);
        auto d = decoder.Decode(set);
        ASSERT_TRUE(d.ok());
        std::vector<bool> seen(static_cast<size_t>(groups), false);
        Vec expected;
        for (int w : set) {
          const size_t g = static_cast<size_t>(w / (s + 1));
          expected.push_back(seen[g] ? 0.0 : 1.0);
          seen[g] = true;
        }
        const int missing = static_cast<int>(std::count(seen.begin(), seen.end(), false));
        const std::string what = Name(*code) + " set " + SetName(set);
        ASSERT_EQ(d->coeffs.size(), expected.size()) << what;
        for (size_t k = 0; k < expected.size(); ++k) EXPECT_NEAR(d->coeffs[k], expected[k], 1e-12) << what;
        EXPECT_NEAR(d->error, std::sqrt(static_cast<double>(missing * (s + 1)) / n), 1e-12) << what;
        EXPECT_EQ(d->exact, missing == 0) << what;
        EXPECT_EQ(decoder.DecodeExact(set).ok(), missing == 0) << what;
      }
      EXPECT_EQ(decoder.cached(), size_t{1} << n);
    }
  }
}

TEST(GradientCodeProperty, TheEmptySetDecodesToNothing) {
  for (int n : {1, 4, 7}) {
    auto code = GradientCode::CyclicRepetition(n, n / 2, 1);
    ASSERT_TRUE(code.ok());
    Decoder decoder(*code);
    auto d = decoder.Decode({});
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->workers.empty());
    EXPECT_TRUE(d->coeffs.empty());
    EXPECT_DOUBLE_EQ(d->error, 1.0);  // ||0 - 1|| / sqrt(n)
    EXPECT_FALSE(d->exact);
    auto exact = decoder.DecodeExact({});
    ASSERT_FALSE(exact.ok());
    EXPECT_EQ(exact.status().code(), StatusCode::kFailedPrecondition);
  }
}

TEST(GradientCodeDecoder, CachesPerArrivalSetWhateverTheOrder) {
  auto code = GradientCode::CyclicRepetition(6, 2, 3);
  ASSERT_TRUE(code.ok());
  Decoder decoder(*code);
  EXPECT_EQ(decoder.cached(), 0u);
  auto a = decoder.Decode({4, 0, 2, 5});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->workers, (std::vector<int>{0, 2, 4, 5}));
  EXPECT_EQ(decoder.cached(), 1u);
  auto again = decoder.Decode({4, 0, 2, 5});
  auto sorted = decoder.Decode({0, 2, 4, 5});
  auto reversed = decoder.DecodeExact({5, 4, 2, 0});
  ASSERT_TRUE(again.ok() && sorted.ok() && reversed.ok());
  EXPECT_EQ(a->coeffs, again->coeffs);
  EXPECT_EQ(a->coeffs, sorted->coeffs);
  EXPECT_EQ(a->coeffs, reversed->coeffs);
  EXPECT_EQ(a->error, sorted->error);
  EXPECT_EQ(decoder.cached(), 1u);
  // The coefficients follow their workers, not the order given: a fresh
  // decoder that sees the sorted set first agrees entry by entry.
  Decoder fresh(*code);
  auto f = fresh.Decode({0, 2, 4, 5});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->coeffs, a->coeffs);

  ASSERT_TRUE(decoder.Decode({1, 2, 3, 4}).ok());
  EXPECT_EQ(decoder.cached(), 2u);
  ASSERT_TRUE(decoder.Decode({3}).ok());  // approximate sets are cached too
  EXPECT_EQ(decoder.cached(), 3u);
  // Refused sets are not.
  EXPECT_FALSE(decoder.Decode({0, 6}).ok());
  EXPECT_FALSE(decoder.Decode({1, 1}).ok());
  EXPECT_EQ(decoder.cached(), 3u);
}

void ExpectInvalid(const Result<GradientCode>& r, const std::string& must_mention) {
  ASSERT_FALSE(r.ok()) << "expected InvalidArgument mentioning '" << must_mention << "'";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  EXPECT_NE(r.status().message().find(must_mention), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << "one line: " << r.status().message();
}

TEST(GradientCodeDecoder, BadParametersAreRefusedWithWhatWouldWork) {
  ExpectInvalid(GradientCode::CyclicRepetition(0, 0, 1), "at least 1 worker");
  ExpectInvalid(GradientCode::FractionalRepetition(-3, 0), "at least 1 worker");
  ExpectInvalid(GradientCode::Uncoded(0), "at least 1 worker");
  ExpectInvalid(GradientCode::CyclicRepetition(4, -1, 1), ">= 0");
  ExpectInvalid(GradientCode::FractionalRepetition(4, -2), ">= 0");
  ExpectInvalid(GradientCode::CyclicRepetition(4, 4, 1), "s <= 3");
  ExpectInvalid(GradientCode::CyclicRepetition(4, 9, 1), "s <= 3");
  ExpectInvalid(GradientCode::FractionalRepetition(4, 4), "s <= 3");
  // (s+1) not dividing n: the valid s for that n, and the cyclic way out.
  ExpectInvalid(GradientCode::FractionalRepetition(6, 3), "s in {0, 1, 2, 5}");
  ExpectInvalid(GradientCode::FractionalRepetition(7, 1), "s in {0, 6}");
  ExpectInvalid(GradientCode::FractionalRepetition(12, 4), "s in {0, 1, 2, 3, 5, 11}");
  ExpectInvalid(GradientCode::FractionalRepetition(5, 2), "cyclic");
  // ... and every s it names does build.
  for (int s : {0, 1, 2, 3, 5, 11}) EXPECT_TRUE(GradientCode::FractionalRepetition(12, s).ok()) << s;
}

TEST(GradientCodeDecoder, BadArrivalsAreRefused) {
  auto code = GradientCode::CyclicRepetition(4, 1, 1);
  ASSERT_TRUE(code.ok());
  Decoder decoder(*code);
  for (const std::vector<int>& bad : std::vector<std::vector<int>>{{0, 4}, {-1}, {0, 1, 2, 100}, {1, 1, 2}, {3, 0, 3}}) {
    auto d = decoder.Decode(bad);
    ASSERT_FALSE(d.ok()) << SetName(bad);
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << SetName(bad);
    auto e = decoder.DecodeExact(bad);
    ASSERT_FALSE(e.ok()) << SetName(bad);
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument) << SetName(bad);
  }
  EXPECT_NE(decoder.Decode({0, 4}).status().message().find("4"), std::string::npos);
  EXPECT_NE(decoder.Decode({2, 2}).status().message().find("twice"), std::string::npos);
}

TEST(GradientCodeDecoder, SeedsMakeCyclicCodesReproducible) {
  for (auto [n, s] : std::vector<std::pair<int, int>>{{3, 1}, {7, 3}, {12, 5}, {12, 10}}) {
    auto a = GradientCode::CyclicRepetition(n, s, 11), b = GradientCode::CyclicRepetition(n, s, 11),
         c = GradientCode::CyclicRepetition(n, s, 12);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    bool differs = false;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        EXPECT_EQ(a->At(i, j), b->At(i, j)) << n << " " << s;
        differs |= a->At(i, j) != c->At(i, j);
      }
    }
    EXPECT_TRUE(differs) << "n=" << n << " s=" << s << ": seeds 11 and 12 gave the same code";
  }
}

// n = 3, s = 1: row i holds partitions i and i+1. From workers i and i+1,
// partition i is only in row i and partition i+2 only in row i+1, so
// a_i = 1 and a_{i+1} = 1 / B[i+1, i+2]; partition i+1 then needs
// B[i, i+1] + B[i+1, i+1] / B[i+1, i+2] = 1, which the null space of H
// guarantees.
TEST(GradientCodeDecoder, TheSmallestCyclicCodeDecodesFromEveryPair) {
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    auto code = GradientCode::CyclicRepetition(3, 1, seed);
    ASSERT_TRUE(code.ok());
    Decoder decoder(*code);
    for (int i = 0; i < 3; ++i) {
      const int next = (i + 1) % 3, after = (i + 2) % 3;
      EXPECT_NEAR(code->At(i, next) + code->At(next, next) / code->At(next, after), 1.0, 1e-12);
      auto d = decoder.DecodeExact({i, next});
      ASSERT_TRUE(d.ok()) << d.status().message();
      EXPECT_TRUE(d->exact);
      EXPECT_LT(d->error, 1e-12);
      const size_t pi = i < next ? 0 : 1, pn = 1 - pi;  // positions in the sorted set
      EXPECT_NEAR(d->coeffs[pi], 1.0, 1e-12);
      EXPECT_NEAR(d->coeffs[pn], 1.0 / code->At(next, after), 1e-12);
      EXPECT_NEAR(Residual(*code, d->workers, d->coeffs), 0.0, 1e-12);
      // A single worker is not enough.
      EXPECT_FALSE(decoder.DecodeExact({i}).ok());
    }
  }
}

TEST(GradientCodeDecoder, UncodedIsTheIdentity) {
  auto code = GradientCode::Uncoded(5);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(code->scheme(), Scheme::kUncoded);
  EXPECT_EQ(code->s(), 0);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(code->Partitions(i), std::vector<int>{i});
    for (int j = 0; j < 5; ++j) EXPECT_EQ(code->At(i, j), i == j ? 1.0 : 0.0);
  }
  Decoder decoder(*code);
  auto all = decoder.DecodeExact({0, 1, 2, 3, 4});
  ASSERT_TRUE(all.ok());
  for (double a : all->coeffs) EXPECT_NEAR(a, 1.0, 1e-12);
  auto four = decoder.Decode({0, 1, 2, 3});
  ASSERT_TRUE(four.ok());
  EXPECT_NEAR(four->error, std::sqrt(1.0 / 5), 1e-12);
  EXPECT_FALSE(decoder.DecodeExact({0, 1, 2, 3}).ok());
  EXPECT_STREQ(SchemeName(Scheme::kUncoded), "uncoded");
  EXPECT_STREQ(SchemeName(Scheme::kCyclicRepetition), "cyclic");
  EXPECT_STREQ(SchemeName(Scheme::kFractionalRepetition), "frc");
}

}  // namespace
}  // namespace tenax::coding

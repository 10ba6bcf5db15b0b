// Property tests of the gradient codes and their decoder (coding/gradient_code.h).
#include "tenax/coding/gradient_code.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tenax::coding {
namespace {

// Every subset of {0..n-1} of size k, in lexicographic order.
std::vector<std::vector<int>> Subsets(int n, int k) {
  std::vector<std::vector<int>> out;
  std::vector<int> s(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) s[static_cast<size_t>(i)] = i;
  while (true) {
    out.push_back(s);
    int i = k - 1;
    while (i >= 0 && s[static_cast<size_t>(i)] == n - k + i) --i;
    if (i < 0) break;
    ++s[static_cast<size_t>(i)];
    for (int j = i + 1; j < k; ++j) s[static_cast<size_t>(j)] = s[static_cast<size_t>(j - 1)] + 1;
  }
  return out;
}

// Decodes every arrival set of size n-s on real vectors: sum_i a_i f_i must
// be sum_j g_j.
void ExpectEverySetDecodesExactly(const GradientCode& code, std::mt19937_64& rng, double* max_coeff) {
  const int n = code.n(), s = code.s(), dim = 7;
  std::normal_distribution<double> normal;
  std::vector<std::vector<double>> g(static_cast<size_t>(n), std::vector<double>(dim));
  std::vector<double> total(dim, 0.0);
  for (auto& v : g) {
    for (int d = 0; d < dim; ++d) {
      v[static_cast<size_t>(d)] = normal(rng);
      total[static_cast<size_t>(d)] += v[static_cast<size_t>(d)];
    }
  }
  std::vector<std::vector<double>> f(static_cast<size_t>(n), std::vector<double>(dim, 0.0));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      for (int d = 0; d < dim; ++d) f[i][static_cast<size_t>(d)] += code.At(i, j) * g[j][static_cast<size_t>(d)];
    }
  }
  double norm = 0;
  for (double x : total) norm += x * x;
  norm = std::sqrt(norm);
  Decoder decoder(code);
  for (const auto& set : Subsets(n, n - s)) {
    auto d = decoder.DecodeExact(set);
    ASSERT_TRUE(d.ok()) << SchemeName(code.scheme()) << " n=" << n << " s=" << s << ": " << d.status().message();
    EXPECT_TRUE(d->exact);
    EXPECT_LT(d->error, 1e-9);
    ASSERT_EQ(d->workers, set);
    std::vector<double> sum(dim, 0.0);
    for (size_t k = 0; k < set.size(); ++k) {
      *max_coeff = std::max(*max_coeff, std::abs(d->coeffs[k]));
      for (int dd = 0; dd < dim; ++dd) sum[static_cast<size_t>(dd)] += d->coeffs[k] * f[set[k]][static_cast<size_t>(dd)];
    }
    double diff = 0;
    for (int dd = 0; dd < dim; ++dd) diff = std::max(diff, std::abs(sum[static_cast<size_t>(dd)] - total[static_cast<size_t>(dd)]));
    ASSERT_LT(diff / norm, 1e-8) << SchemeName(code.scheme()) << " n=" << n << " s=" << s;
  }
}

TEST(GradientCodeProperty, EveryArrivalSetOfSizeNMinusSDecodesTheFullGradient) {
  std::mt19937_64 rng(42);
  double max_coeff = 0;
  int codes = 0;
  for (int n = 1; n <= 12; ++n) {
    for (int s = 0; s < n; ++s) {
      for (uint64_t seed : {1u, 2u, 3u}) {
        auto cyclic = GradientCode::CyclicRepetition(n, s, seed);
        ASSERT_TRUE(cyclic.ok()) << cyclic.status().message();
        ExpectEverySetDecodesExactly(*cyclic, rng, &max_coeff);
        ++codes;
      }
      if (n % (s + 1) == 0) {
        auto frc = GradientCode::FractionalRepetition(n, s);
        ASSERT_TRUE(frc.ok()) << frc.status().message();
        ExpectEverySetDecodesExactly(*frc, rng, &max_coeff);
        ++codes;
      }
    }
  }
  EXPECT_GT(codes, 3 * 78);
  EXPECT_LT(max_coeff, 1e6) << "decoding vectors blew up";
}

TEST(GradientCodeProperty, SupportsAreTheConstructionsOnes) {
  for (int n = 1; n <= 12; ++n) {
    for (int s = 0; s < n; ++s) {
      auto c = GradientCode::CyclicRepetition(n, s, 9);
      ASSERT_TRUE(c.ok());
      std::vector<int> holders(static_cast<size_t>(n), 0);
      for (int i = 0; i < n; ++i) {
        EXPECT_DOUBLE_EQ(c->At(i, i), 1.0);
        std::vector<int> expected;
        for (int k = 0; k <= s; ++k) expected.push_back((i + k) % n);
        std::sort(expected.begin(), expected.end());
        EXPECT_EQ(c->Partitions(i), expected) << "n=" << n << " s=" << s << " row " << i;
        for (int j : c->Partitions(i)) ++holders[static_cast<size_t>(j)];
      }
      for (int h : holders) EXPECT_EQ(h, s + 1);
      if (n % (s + 1) == 0) {
        auto f = GradientCode::FractionalRepetition(n, s);
        ASSERT_TRUE(f.ok());
        for (int i = 0; i < n; ++i) {
          const int first = i / (s + 1) * (s + 1);
          for (int j = 0; j < n; ++j) EXPECT_DOUBLE_EQ(f->At(i, j), j >= first && j <= first + s ? 1.0 : 0.0);
        }
      }
    }
  }
}

// Residual ||B_F^T a - 1|| / sqrt(n), recomputed from At().
double Residual(const GradientCode& code, const std::vector<int>& workers, const std::vector<double>& a) {
  double r = 0;
  for (int j = 0; j < code.n(); ++j) {
    double c = 0;
    for (size_t k = 0; k < workers.size(); ++k) c += a[k] * code.At(workers[k], j);
    r += (c - 1) * (c - 1);
  }
  return std::sqrt(r / code.n());
}

TEST(GradientCodeProperty, ApproximateDecodingReportsItsErrorAndIsTheLeastSquaresOptimum) {
  for (int n : {4, 5, 7, 9}) {
    for (int s = 1; s < n; ++s) {
      auto code = GradientCode::CyclicRepetition(n, s, 5);
      ASSERT_TRUE(code.ok());
      Decoder decoder(*code);
      for (int k = 1; k < n - s; ++k) {
        for (const auto& set : Subsets(n, k)) {
          auto d = decoder.Decode(set);
          ASSERT_TRUE(d.ok());
          const double err = Residual(*code, set, d->coeffs);
          EXPECT_NEAR(d->error, err, 1e-9);
          // With unit partition gradients g_j = e_j the decoded vector is
          // B_F^T a: its distance to 1, over sqrt(n), is the error.
          std::vector<double> decoded(static_cast<size_t>(n), 0.0);
          for (size_t i = 0; i < set.size(); ++i) {
            for (int j = 0; j < n; ++j) decoded[static_cast<size_t>(j)] += d->coeffs[i] * code->At(set[i], j);
          }
          double dist = 0;
          for (double x : decoded) dist += (x - 1) * (x - 1);
          EXPECT_NEAR(std::sqrt(dist / n), d->error, 1e-9);
          // No small move of any coefficient lowers the residual.
          for (size_t i = 0; i < set.size(); ++i) {
            for (double delta : {1e-3, -1e-3}) {
              std::vector<double> moved = d->coeffs;
              moved[i] += delta;
              EXPECT_GE(Residual(*code, set, moved), err - 1e-12);
            }
          }
          if (!d->exact) {
            auto exact = decoder.DecodeExact(set);
            ASSERT_FALSE(exact.ok());
            EXPECT_EQ(exact.status().code(), StatusCode::kFailedPrecondition);
          }
        }
      }
    }
  }
}

TEST(GradientCodeProperty, TheEmptySetDecodesToNothing) {
  auto code = GradientCode::CyclicRepetition(4, 1, 1);
  ASSERT_TRUE(code.ok());
  Decoder decoder(*code);
  auto d = decoder.Decode({});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->coeffs.empty());
  EXPECT_NEAR(d->error, 1.0, 1e-12);
  EXPECT_FALSE(d->exact);
}

TEST(GradientCodeDecoder, CachesPerArrivalSetWhateverTheOrder) {
  auto code = GradientCode::CyclicRepetition(6, 2, 3);
  ASSERT_TRUE(code.ok());
  Decoder decoder(*code);
  auto a = decoder.Decode({4, 0, 2, 5});
  auto b = decoder.Decode({0, 2, 4, 5});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->workers, (std::vector<int>{0, 2, 4, 5}));
  EXPECT_EQ(a->coeffs, b->coeffs);
  EXPECT_EQ(decoder.cached(), 1u);
  ASSERT_TRUE(decoder.Decode({1, 2, 3, 4}).ok());
  EXPECT_EQ(decoder.cached(), 2u);
}

TEST(GradientCodeDecoder, BadParametersAndArrivalsAreRefused) {
  for (auto r : {GradientCode::CyclicRepetition(0, 0, 1), GradientCode::CyclicRepetition(4, -1, 1),
                 GradientCode::CyclicRepetition(4, 4, 1), GradientCode::FractionalRepetition(4, 4)}) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  auto frc = GradientCode::FractionalRepetition(6, 3);
  ASSERT_FALSE(frc.ok());
  EXPECT_NE(frc.status().message().find("s in {0, 1, 2, 5}"), std::string::npos) << frc.status().message();
  auto code = GradientCode::CyclicRepetition(4, 1, 1);
  ASSERT_TRUE(code.ok());
  Decoder decoder(*code);
  EXPECT_EQ(decoder.Decode({0, 4}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decoder.Decode({1, 1, 2}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decoder.Decode({-1}).status().code(), StatusCode::kInvalidArgument);
}

TEST(GradientCodeDecoder, SeedsMakeCyclicCodesReproducible) {
  auto a = GradientCode::CyclicRepetition(7, 3, 11), b = GradientCode::CyclicRepetition(7, 3, 11),
       c = GradientCode::CyclicRepetition(7, 3, 12);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  bool differs = false;
  for (int i = 0; i < 7; ++i) {
    for (int j = 0; j < 7; ++j) {
      EXPECT_EQ(a->At(i, j), b->At(i, j));
      differs |= a->At(i, j) != c->At(i, j);
    }
  }
  EXPECT_TRUE(differs);
}

TEST(GradientCodeDecoder, TheSmallestCyclicCodeDecodesFromEveryPair) {
  auto code = GradientCode::CyclicRepetition(3, 1, 1);
  ASSERT_TRUE(code.ok());
  Decoder decoder(*code);
  for (const auto& pair : std::vector<std::vector<int>>{{0, 1}, {0, 2}, {1, 2}}) {
    auto d = decoder.DecodeExact(pair);
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_NEAR(Residual(*code, pair, d->coeffs), 0.0, 1e-12);
  }
}

TEST(GradientCodeDecoder, UncodedIsTheIdentity) {
  auto code = GradientCode::Uncoded(5);
  ASSERT_TRUE(code.ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(code->Partitions(i), std::vector<int>{i});
  Decoder decoder(*code);
  auto all = decoder.DecodeExact({0, 1, 2, 3, 4});
  ASSERT_TRUE(all.ok());
  for (double a : all->coeffs) EXPECT_NEAR(a, 1.0, 1e-12);
  EXPECT_FALSE(decoder.DecodeExact({0, 1, 2, 3}).ok());
}

}  // namespace
}  // namespace tenax::coding

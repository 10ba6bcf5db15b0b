#include "tenax/coding/gradient_code.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

namespace tenax::coding {
namespace {

Status CheckNs(int n, int s) {
  if (n < 1) return InvalidArgument("a gradient code needs at least 1 worker (n = " + std::to_string(n) + ")");
  if (s < 0) return InvalidArgument("stragglers s must be >= 0 (got " + std::to_string(s) + ")");
  if (s >= n) {
    return InvalidArgument("stragglers s = " + std::to_string(s) + " must be below the worker count n = " +
                           std::to_string(n) + " (at least one worker must arrive): use s <= " +
                           std::to_string(n - 1));
  }
  return Status::Ok();
}

// Solves the k x k system m x = rhs (row-major) by Gaussian elimination with
// partial pivoting; false when it is (numerically) singular.
bool SolveSquare(std::vector<double> m, std::vector<double> rhs, int k, std::vector<double>& x) {
  for (int col = 0; col < k; ++col) {
    int pivot = col;
    for (int r = col + 1; r < k; ++r) {
      if (std::abs(m[r * k + col]) > std::abs(m[pivot * k + col])) pivot = r;
    }
    if (std::abs(m[pivot * k + col]) < 1e-12) return false;
    if (pivot != col) {
      for (int c = 0; c < k; ++c) std::swap(m[col * k + c], m[pivot * k + c]);
      std::swap(rhs[col], rhs[pivot]);
    }
    for (int r = col + 1; r < k; ++r) {
      const double f = m[r * k + col] / m[col * k + col];
      for (int c = col; c < k; ++c) m[r * k + c] -= f * m[col * k + c];
      rhs[r] -= f * rhs[col];
    }
  }
  x.assign(static_cast<size_t>(k), 0.0);
  for (int r = k - 1; r >= 0; --r) {
    double v = rhs[r];
    for (int c = r + 1; c < k; ++c) v -= m[r * k + c] * x[c];
    x[r] = v / m[r * k + r];
  }
  return true;
}

}  // namespace

const char* SchemeName(Scheme scheme) {
  switch (scheme) {
    case Scheme::kFractionalRepetition:
      return "frc";
    case Scheme::kCyclicRepetition:
      return "cyclic";
    case Scheme::kUncoded:
      return "uncoded";
  }
  return "unknown";
}

std::vector<int> GradientCode::Partitions(int worker) const {
  std::vector<int> out;
  for (int j = 0; j < n_; ++j) {
    if (At(worker, j) != 0.0) out.push_back(j);
  }
  return out;
}

std::optional<std::vector<std::vector<int>>> SubsetsUpTo(int n, int k, size_t limit) {
  if (n < 0 || k < 0 || k > n) return std::vector<std::vector<int>>{};
  double count = 1;
  for (int i = 1; i <= k; ++i) count = count * (n - k + i) / i;
  if (count > static_cast<double>(limit)) return std::nullopt;
  std::vector<std::vector<int>> out;
  std::vector<int> pick(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) pick[static_cast<size_t>(i)] = i;
  while (true) {
    out.push_back(pick);
    int i = k - 1;
    while (i >= 0 && pick[static_cast<size_t>(i)] == n - k + i) --i;
    if (i < 0) return out;
    ++pick[static_cast<size_t>(i)];
    for (int t = i + 1; t < k; ++t) pick[static_cast<size_t>(t)] = pick[static_cast<size_t>(t - 1)] + 1;
  }
}

Result<GradientCode> GradientCode::Uncoded(int n) {
  if (n < 1) return InvalidArgument("a code needs at least 1 worker, not " + std::to_string(n));
  GradientCode code(n, 0, Scheme::kUncoded);
  for (int i = 0; i < n; ++i) code.Entry(i, i) = 1.0;
  return code;
}

Result<GradientCode> GradientCode::FractionalRepetition(int n, int s) {
  TENAX_RETURN_IF_ERROR(CheckNs(n, s));
  if (n % (s + 1) != 0) {
    std::string ok;
    for (int d = 1; d <= n; ++d) {
      if (n % d == 0 && d - 1 < n) ok += (ok.empty() ? "" : ", ") + std::to_string(d - 1);
    }
    return InvalidArgument("fractional repetition needs s+1 to divide n (n = " + std::to_string(n) +
                           ", s = " + std::to_string(s) + "): use s in {" + ok + "}, or the cyclic scheme");
  }
  GradientCode code(n, s, Scheme::kFractionalRepetition);
  const int group = s + 1;
  for (int i = 0; i < n; ++i) {
    const int first = (i / group) * group;
    for (int j = first; j < first + group; ++j) code.Entry(i, j) = 1.0;
  }
  return code;
}

namespace {

// How much a code amplifies rounding when a set F decodes: sum over F of
// |a_i| ||B_i||_1, over n. At least 1 (every column of a's combination sums
// to 1); 1 for fractional repetition. A decoded float32 sum of f_i carries
// about this many times the rounding of summing the g_j directly.
double Amplification(const GradientCode& code, const Decoding& d) {
  double total = 0;
  for (size_t k = 0; k < d.workers.size(); ++k) {
    double row = 0;
    for (int j = 0; j < code.n(); ++j) row += std::abs(code.At(d.workers[k], j));
    total += std::abs(d.coeffs[k]) * row;
  }
  return total / code.n();
}

// The arrival sets of n-s workers a cyclic draw is judged on: all of them
// when there are at most `limit`, otherwise `limit` random ones (seeded).
std::vector<std::vector<int>> JudgedSets(int n, int s, uint64_t seed, size_t limit) {
  const int k = n - s;
  if (auto all = SubsetsUpTo(n, k, limit)) return std::move(*all);
  std::vector<std::vector<int>> out;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::vector<int> workers(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) workers[static_cast<size_t>(i)] = i;
  for (size_t t = 0; t < limit; ++t) {
    std::shuffle(workers.begin(), workers.end(), rng);
    std::vector<int> set(workers.begin(), workers.begin() + k);
    std::sort(set.begin(), set.end());
    out.push_back(std::move(set));
  }
  return out;
}

}  // namespace

Result<GradientCode> GradientCode::CyclicRepetition(int n, int s, uint64_t seed) {
  TENAX_RETURN_IF_ERROR(CheckNs(n, s));
  GradientCode code(n, s, Scheme::kCyclicRepetition);
  if (s == 0) {
    for (int i = 0; i < n; ++i) code.Entry(i, i) = 1.0;
    return code;
  }
  // Draw H (s x n) with rows summing to zero; every draw whose rows' s x s
  // systems solve is a valid code with probability 1, but some are badly
  // conditioned (a decoding vector of 1e5 for n = 10, s = 4 at one seed), so
  // of kDraws valid draws keep the one whose worst judged arrival set of
  // n-s amplifies rounding least.
  // A decoding costs about 2 (n-s)^2 n flops: judge up to 1024 sets, fewer
  // for large n so that drawing a code stays within ~2e8 flops.
  constexpr int kDraws = 32;
  const double per_decoding = 2.0 * (n - s) * (n - s) * n;
  const auto judged_sets = static_cast<size_t>(std::clamp(2e8 / (kDraws * per_decoding), 16.0, 1024.0));
  const std::vector<std::vector<int>> judged = JudgedSets(n, s, seed, judged_sets);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::optional<GradientCode> best;
  double best_score = std::numeric_limits<double>::infinity();
  int valid = 0;
  for (int attempt = 0; attempt < 64 * kDraws && valid < kDraws; ++attempt) {
    GradientCode candidate(n, s, Scheme::kCyclicRepetition);
    std::vector<double> h(static_cast<size_t>(s * n));
    for (int r = 0; r < s; ++r) {
      double sum = 0;
      for (int c = 0; c + 1 < n; ++c) sum += (h[r * n + c] = normal(rng));
      h[r * n + n - 1] = -sum;
    }
    bool ok = true;
    for (int i = 0; i < n && ok; ++i) {
      // Row i: B[i,i] = 1, and x on partitions i+1..i+s with H[:,those] x = -H[:,i].
      std::vector<double> m(static_cast<size_t>(s * s)), rhs(static_cast<size_t>(s)), x;
      for (int r = 0; r < s; ++r) {
        for (int k = 0; k < s; ++k) m[r * s + k] = h[r * n + (i + 1 + k) % n];
        rhs[r] = -h[r * n + i];
      }
      ok = SolveSquare(m, rhs, s, x);
      if (!ok) break;
      candidate.Entry(i, i) = 1.0;
      for (int k = 0; k < s; ++k) candidate.Entry(i, (i + 1 + k) % n) = x[k];
    }
    if (!ok) continue;
    // Judge it (stopping as soon as it is worse than the best so far).
    Decoder decoder(candidate);
    double score = 0;
    for (const std::vector<int>& set : judged) {
      auto d = decoder.DecodeExact(set);
      score = d.ok() ? std::max(score, Amplification(candidate, *d)) : std::numeric_limits<double>::infinity();
      if (score >= best_score) break;
    }
    if (score == std::numeric_limits<double>::infinity()) continue;  // a degenerate draw
    ++valid;
    if (score < best_score) best_score = score, best = std::move(candidate);
  }
  if (best) return std::move(*best);
  return Internal("could not draw a cyclic gradient code for n = " + std::to_string(n) + ", s = " +
                  std::to_string(s) + " (seed " + std::to_string(seed) + ")");
}

Decoder::Decoder(const GradientCode& code, double tolerance) : code_(code), tolerance_(tolerance) {}

Result<Decoding> Decoder::Decode(std::vector<int> arrived) {
  std::sort(arrived.begin(), arrived.end());
  for (size_t k = 0; k < arrived.size(); ++k) {
    if (arrived[k] < 0 || arrived[k] >= code_.n()) {
      return InvalidArgument("worker " + std::to_string(arrived[k]) + " is not in the code (n = " +
                             std::to_string(code_.n()) + ")");
    }
    if (k > 0 && arrived[k] == arrived[k - 1]) {
      return InvalidArgument("worker " + std::to_string(arrived[k]) + " arrived twice");
    }
  }
  auto it = cache_.find(arrived);
  if (it == cache_.end()) it = cache_.emplace(arrived, Solve(arrived)).first;
  return it->second;
}

Result<Decoding> Decoder::DecodeExact(std::vector<int> arrived) {
  TENAX_ASSIGN_OR_RETURN(Decoding d, Decode(std::move(arrived)));
  if (!d.exact) {
    return FailedPrecondition(std::to_string(d.workers.size()) + " of " + std::to_string(code_.n()) +
                              " workers do not decode exactly (" + SchemeName(code_.scheme()) + ", s = " +
                              std::to_string(code_.s()) + ", error " + std::to_string(d.error) + ")");
  }
  return d;
}

// Least squares min ||A a - 1|| with A's columns the arrived rows of B:
// modified Gram-Schmidt, twice per column (re-orthogonalisation keeps Q
// orthogonal to rounding level), skipping columns already in the span.
Decoding Decoder::Solve(const std::vector<int>& workers) const {
  const int n = code_.n();
  const size_t m = workers.size();
  std::vector<std::vector<double>> q;              // orthonormal basis
  std::vector<size_t> kept;                        // column index of each basis vector
  std::vector<std::vector<double>> r;              // r[k][j]: coefficient of q_j in kept column k
  for (size_t c = 0; c < m; ++c) {
    std::vector<double> v(static_cast<size_t>(n));
    double norm0 = 0;
    for (int j = 0; j < n; ++j) {
      v[j] = code_.At(workers[c], j);
      norm0 += v[j] * v[j];
    }
    norm0 = std::sqrt(norm0);
    std::vector<double> coeff(q.size(), 0.0);
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t b = 0; b < q.size(); ++b) {
        double dot = 0;
        for (int j = 0; j < n; ++j) dot += q[b][j] * v[j];
        for (int j = 0; j < n; ++j) v[j] -= dot * q[b][j];
        coeff[b] += dot;
      }
    }
    double norm = 0;
    for (double x : v) norm += x * x;
    norm = std::sqrt(norm);
    if (norm0 == 0 || norm <= 1e-10 * norm0) continue;  // in the span of the rows before it
    for (double& x : v) x /= norm;
    coeff.push_back(norm);
    q.push_back(std::move(v));
    kept.push_back(c);
    r.push_back(std::move(coeff));
  }
  // y = Q^T 1, then R a = y (R upper triangular: r[k][j], j <= k).
  const size_t k = q.size();
  std::vector<double> y(k, 0.0), a_kept(k, 0.0);
  for (size_t b = 0; b < k; ++b) {
    for (int j = 0; j < n; ++j) y[b] += q[b][j];
  }
  for (size_t row = k; row-- > 0;) {
    double v = y[row];
    for (size_t col = row + 1; col < k; ++col) v -= r[col][row] * a_kept[col];
    a_kept[row] = v / r[row][row];
  }
  Decoding d;
  d.workers = workers;
  d.coeffs.assign(m, 0.0);
  for (size_t b = 0; b < k; ++b) d.coeffs[kept[b]] = a_kept[b];
  double err = 0;
  for (int j = 0; j < n; ++j) {
    double v = -1.0;
    for (size_t c = 0; c < m; ++c) v += d.coeffs[c] * code_.At(workers[c], j);
    err += v * v;
  }
  d.error = n > 0 ? std::sqrt(err / n) : 0;
  d.exact = d.error <= tolerance_;
  return d;
}

}  // namespace tenax::coding

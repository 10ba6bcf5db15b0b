#include "tenax/coding/coded_plan.h"

#include <algorithm>
#include <limits>
#include <set>

namespace tenax::coding {

Result<GradientCode> CodeOfScheme(const CodedConfig& c, int n, uint64_t seed) {
  const int s = static_cast<int>(c.stragglers);
  if (c.scheme == "cyclic") return GradientCode::CyclicRepetition(n, s, seed);
  if (c.scheme == "frc") return GradientCode::FractionalRepetition(n, s);
  if (c.scheme == "wait_all" || c.scheme == "ignore_stragglers") return GradientCode::Uncoded(n);
  return InvalidArgument("unknown coded.scheme \"" + c.scheme + "\" (cyclic, frc, wait_all or ignore_stragglers)");
}

CodeAssignment::CodeAssignment(int n) : row_of_(static_cast<size_t>(std::max(n, 0))) {
  for (int w = 0; w < n; ++w) row_of_[static_cast<size_t>(w)] = w;
}

int CodeAssignment::worker_of(int row) const {
  for (size_t w = 0; w < row_of_.size(); ++w) {
    if (row_of_[w] == row) return static_cast<int>(w);
  }
  return -1;
}

Status CodeAssignment::Set(std::vector<int> rows) {
  if (rows.size() != row_of_.size()) {
    return InvalidArgument("an assignment of " + std::to_string(rows.size()) + " rows for " +
                           std::to_string(row_of_.size()) + " workers");
  }
  std::vector<bool> seen(rows.size(), false);
  for (int r : rows) {
    if (r < 0 || r >= n() || seen[static_cast<size_t>(r)]) {
      return InvalidArgument("an assignment that is not a permutation of rows 0.." + std::to_string(n() - 1));
    }
    seen[static_cast<size_t>(r)] = true;
  }
  row_of_ = std::move(rows);
  return Status::Ok();
}

std::vector<double> PartitionWeights(const GradientCode& code, const CodeAssignment& assignment,
                                     const std::vector<int>& workers, const std::vector<double>& coeffs) {
  std::vector<double> c(static_cast<size_t>(code.n()), 0.0);
  for (size_t k = 0; k < workers.size() && k < coeffs.size(); ++k) {
    const int row = assignment.row_of(workers[k]);
    for (int j = 0; j < code.n(); ++j) c[static_cast<size_t>(j)] += coeffs[k] * code.At(row, j);
  }
  return c;
}

double Coverage(const std::vector<double>& partition_weights) {
  if (partition_weights.empty()) return 0;
  size_t covered = 0;
  for (double c : partition_weights) covered += c >= 0.5 ? 1 : 0;
  return static_cast<double>(covered) / static_cast<double>(partition_weights.size());
}

StragglerDetector::StragglerDetector(int workers, double slow_factor, double smoothing)
    : slow_factor_(slow_factor),
      smoothing_(smoothing),
      mean_(static_cast<size_t>(workers), 0.0),
      seen_(static_cast<size_t>(workers), false),
      slow_(static_cast<size_t>(workers), false) {}

void StragglerDetector::Observe(int worker, double seconds) {
  if (worker < 0 || static_cast<size_t>(worker) >= mean_.size() || !(seconds >= 0)) return;
  auto w = static_cast<size_t>(worker);
  mean_[w] = seen_[w] ? (1 - smoothing_) * mean_[w] + smoothing_ * seconds : seconds;
  seen_[w] = true;
}

namespace {
double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}
}  // namespace

double StragglerDetector::Ratio(int worker) const {
  std::vector<double> seen;
  for (size_t w = 0; w < mean_.size(); ++w) {
    if (seen_[w]) seen.push_back(mean_[w]);
  }
  const double median = Median(seen);
  const auto w = static_cast<size_t>(worker);
  if (worker < 0 || w >= mean_.size() || !seen_[w] || median <= 0) return 1;
  return mean_[w] / median;
}

std::vector<int> StragglerDetector::Update() {
  std::vector<int> changed;
  for (size_t w = 0; w < mean_.size(); ++w) {
    const bool now = Ratio(static_cast<int>(w)) > slow_factor_;
    if (now != slow_[w]) {
      slow_[w] = now;
      changed.push_back(static_cast<int>(w));
    }
  }
  return changed;
}

ShufflePolicy::ShufflePolicy(const GradientCode& code) : code_(code), exposure_(static_cast<size_t>(code.n()), 0) {}

void ShufflePolicy::ObserveStep(const CodeAssignment& assignment, const std::vector<bool>& slow) {
  for (int w = 0; w < assignment.n() && static_cast<size_t>(w) < slow.size(); ++w) {
    if (!slow[static_cast<size_t>(w)]) continue;
    for (int j : code_.Partitions(assignment.row_of(w))) ++exposure_[static_cast<size_t>(j)];
  }
}

ShuffleResult ShufflePolicy::Next(const CodeAssignment& assignment, const std::vector<bool>& slow) const {
  const int n = assignment.n();
  std::vector<int> rows(static_cast<size_t>(n), -1);
  std::vector<bool> taken(static_cast<size_t>(n), false);
  auto row_exposure = [&](int row) {
    int64_t e = 0;
    for (int j : code_.Partitions(row)) e += exposure_[static_cast<size_t>(j)];
    return e;
  };
  // Slow workers first: to the least exposed free row, another than their
  // own when one is as good (so what they held moves to faster workers).
  for (int w = 0; w < n; ++w) {
    if (static_cast<size_t>(w) >= slow.size() || !slow[static_cast<size_t>(w)]) continue;
    int best = -1;
    std::pair<int64_t, int> best_key{std::numeric_limits<int64_t>::max(), 2};
    for (int r = 0; r < n; ++r) {
      if (taken[static_cast<size_t>(r)]) continue;
      const std::pair<int64_t, int> key{row_exposure(r), r == assignment.row_of(w) ? 1 : 0};
      if (key < best_key) best_key = key, best = r;
    }
    rows[static_cast<size_t>(w)] = best;
    taken[static_cast<size_t>(best)] = true;
  }
  // Everyone else keeps their row when it is free...
  for (int w = 0; w < n; ++w) {
    if (rows[static_cast<size_t>(w)] >= 0) continue;
    const int own = assignment.row_of(w);
    if (!taken[static_cast<size_t>(own)]) rows[static_cast<size_t>(w)] = own, taken[static_cast<size_t>(own)] = true;
  }
  // ...or takes the free row that shares the most partitions with it.
  auto moved = [&](int from, int to) {
    const std::vector<int> a = code_.Partitions(from), b = code_.Partitions(to);
    int64_t m = 0;
    for (int j : b) m += std::find(a.begin(), a.end(), j) == a.end() ? 1 : 0;
    return m;
  };
  for (int w = 0; w < n; ++w) {
    if (rows[static_cast<size_t>(w)] >= 0) continue;
    int best = -1;
    int64_t best_moved = std::numeric_limits<int64_t>::max();
    for (int r = 0; r < n; ++r) {
      if (taken[static_cast<size_t>(r)]) continue;
      const int64_t m = moved(assignment.row_of(w), r);
      if (m < best_moved) best_moved = m, best = r;
    }
    rows[static_cast<size_t>(w)] = best;
    taken[static_cast<size_t>(best)] = true;
  }
  ShuffleResult result;
  for (int w = 0; w < n; ++w) result.partitions_moved += moved(assignment.row_of(w), rows[static_cast<size_t>(w)]);
  result.rows = std::move(rows);
  return result;
}

}  // namespace tenax::coding

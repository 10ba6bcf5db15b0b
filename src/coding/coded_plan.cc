#include "tenax/coding/coded_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
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
// The lower median: with half the workers slow it is still a fast one's.
double LowerMedian(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}
}  // namespace

double StragglerDetector::ReferenceSeconds() const {
  std::vector<double> seen;
  for (size_t w = 0; w < mean_.size(); ++w) {
    if (seen_[w]) seen.push_back(mean_[w]);
  }
  return LowerMedian(std::move(seen));
}

double StragglerDetector::Ratio(int worker) const {
  const double reference = ReferenceSeconds();
  const auto w = static_cast<size_t>(worker);
  if (worker < 0 || w >= mean_.size() || !seen_[w] || reference <= 0) return 1;
  return mean_[w] / reference;
}

void StragglerDetector::ObserveSilence(int worker, double seconds) {
  if (worker < 0 || static_cast<size_t>(worker) >= mean_.size() || !(seconds >= 0)) return;
  const auto w = static_cast<size_t>(worker);
  // A lower bound on the arrival time it will have: only ever raises.
  if (!seen_[w] || seconds > mean_[w]) Observe(worker, seconds);
}

std::vector<int> StragglerDetector::Update() {
  std::vector<int> changed;
  for (size_t w = 0; w < mean_.size(); ++w) {
    // Hysteresis: slow above slow_factor, fast again only below 3/4 of it,
    // so a worker near the threshold does not flap (and move data) at every
    // step.
    const double ratio = Ratio(static_cast<int>(w));
    const bool now = slow_[w] ? ratio > 0.75 * slow_factor_ : ratio > slow_factor_;
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
  std::vector<int> slow_workers;
  for (int w = 0; w < n; ++w) {
    if (static_cast<size_t>(w) < slow.size() && slow[static_cast<size_t>(w)]) slow_workers.push_back(w);
  }
  const int k = static_cast<int>(slow_workers.size());
  // The cost of giving the slow workers `slow_rows`: the error of the best
  // decoding from the other rows, then the partitions' slow exposure so far,
  // then how many of those rows slow workers hold already (move them away).
  Decoder decoder(code_);
  using Cost = std::tuple<double, int64_t, int>;
  auto cost = [&](const std::vector<int>& slow_rows) {
    std::vector<int> fast;
    for (int r = 0; r < n; ++r) {
      if (std::find(slow_rows.begin(), slow_rows.end(), r) == slow_rows.end()) fast.push_back(r);
    }
    double error = 1;
    if (!fast.empty()) {
      if (auto d = decoder.Decode(fast); d.ok()) error = d->error;
    }
    int64_t exposure = 0;
    int kept = 0;
    for (int r : slow_rows) {
      for (int j : code_.Partitions(r)) exposure += exposure_[static_cast<size_t>(j)];
      for (int w : slow_workers) kept += assignment.row_of(w) == r ? 1 : 0;
    }
    // Errors closer than 1e-9 are the same (exact decodings differ by rounding).
    return Cost{std::round(error * 1e9), exposure, kept};
  };
  std::vector<int> slow_rows;
  if (k > 0 && k < n) {
    if (auto all = SubsetsUpTo(n, k, 4096)) {
      Cost best{std::numeric_limits<double>::infinity(), 0, 0};
      for (const std::vector<int>& candidate : *all) {
        const auto c = cost(candidate);
        if (c < best) best = c, slow_rows = candidate;
      }
    } else {
      // Too many sets to try: add the cheapest row one at a time.
      for (int i = 0; i < k; ++i) {
        Cost best{std::numeric_limits<double>::infinity(), 0, 0};
        int best_row = -1;
        for (int r = 0; r < n; ++r) {
          if (std::find(slow_rows.begin(), slow_rows.end(), r) != slow_rows.end()) continue;
          std::vector<int> candidate = slow_rows;
          candidate.push_back(r);
          const auto c = cost(candidate);
          if (c < best) best = c, best_row = r;
        }
        slow_rows.push_back(best_row);
      }
    }
  } else if (k == n) {
    for (int r = 0; r < n; ++r) slow_rows.push_back(r);
  }
  // The slow workers take those rows: one whose own row is among them keeps
  // it (swapping rows between slow workers moves data and gains nothing),
  // the others take the rest.
  std::vector<bool> slow_row_free(static_cast<size_t>(n), false);
  for (int r : slow_rows) slow_row_free[static_cast<size_t>(r)] = true;
  for (int w : slow_workers) {
    const int own = assignment.row_of(w);
    if (!slow_row_free[static_cast<size_t>(own)]) continue;
    rows[static_cast<size_t>(w)] = own;
    slow_row_free[static_cast<size_t>(own)] = false;
    taken[static_cast<size_t>(own)] = true;
  }
  for (int w : slow_workers) {
    if (rows[static_cast<size_t>(w)] >= 0) continue;
    int best = -1;
    for (int r : slow_rows) {
      if (slow_row_free[static_cast<size_t>(r)]) {
        best = r;
        break;
      }
    }
    rows[static_cast<size_t>(w)] = best;
    slow_row_free[static_cast<size_t>(best)] = false;
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

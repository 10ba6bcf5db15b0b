#include "tenax/store/recovery_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tenax::store {
namespace {

struct Shares {
  double available_share = 0;
  double max_deviation = 0;
};

// With `missing` samples per class gone: the available share of the whole
// dataset and the largest class-share deviation from the original.
Shares Evaluate(const std::vector<uint64_t>& totals, const std::vector<uint64_t>& missing) {
  const double all = static_cast<double>(std::accumulate(totals.begin(), totals.end(), uint64_t{0}));
  double available = 0;
  for (size_t c = 0; c < totals.size(); ++c) available += static_cast<double>(totals[c] - missing[c]);
  Shares s;
  s.available_share = all > 0 ? available / all : 0;
  if (available <= 0) {
    s.max_deviation = 1;
    return s;
  }
  for (size_t c = 0; c < totals.size(); ++c) {
    const double now = static_cast<double>(totals[c] - missing[c]) / available;
    const double before = static_cast<double>(totals[c]) / all;
    s.max_deviation = std::max(s.max_deviation, std::abs(now - before));
  }
  return s;
}

}  // namespace

Result<RecoveryPlan> PlanRecovery(const std::string& policy, const std::vector<uint64_t>& class_totals,
                                  const std::vector<LostChunk>& lost, const PrmParams& prm) {
  if (policy != "full" && policy != "prm" && policy != "approx") {
    return InvalidArgument("unknown recovery policy \"" + policy + "\": use full, approx or prm");
  }
  if (!(prm.class_tolerance >= 0 && prm.class_tolerance <= 1) || !(prm.min_available >= 0 && prm.min_available <= 1)) {
    return InvalidArgument("prm: class_tolerance and min_available are shares between 0 and 1");
  }
  std::vector<uint64_t> missing(class_totals.size(), 0);
  for (const LostChunk& c : lost) {
    if (c.parity) continue;
    if (c.class_counts.size() != class_totals.size()) {
      return InvalidArgument("stripe " + std::to_string(c.stripe) + " chunk " + std::to_string(c.index) + ": " +
                             std::to_string(c.class_counts.size()) + " classes, the dataset has " +
                             std::to_string(class_totals.size()));
    }
    for (size_t k = 0; k < class_totals.size(); ++k) missing[k] += c.class_counts[k];
  }
  for (size_t k = 0; k < class_totals.size(); ++k) {
    if (missing[k] > class_totals[k]) {
      return InvalidArgument("the lost chunks hold more samples of class " + std::to_string(k) +
                             " than the dataset has");
    }
  }
  RecoveryPlan plan;
  plan.policy = policy;
  plan.max_class_deviation_before = Evaluate(class_totals, missing).max_deviation;
  std::vector<bool> first(lost.size(), false);
  auto rebuild = [&](size_t i) {
    first[i] = true;
    if (!lost[i].parity) {
      for (size_t k = 0; k < class_totals.size(); ++k) missing[k] -= lost[i].class_counts[k];
    }
  };

  if (policy == "full") {
    for (size_t i = 0; i < lost.size(); ++i) rebuild(i);
  } else if (policy == "approx") {
    int top = std::numeric_limits<int>::max();
    for (const LostChunk& c : lost) top = std::min(top, c.tier);
    for (size_t i = 0; i < lost.size(); ++i) {
      if (lost[i].tier == top) rebuild(i);
    }
  } else {
    auto satisfied = [&](const Shares& s) {
      return s.max_deviation <= prm.class_tolerance + 1e-12 && s.available_share + 1e-12 >= prm.min_available;
    };
    while (!satisfied(Evaluate(class_totals, missing))) {
      const Shares now = Evaluate(class_totals, missing);
      size_t best = lost.size();
      double best_gain = -1;
      for (size_t i = 0; i < lost.size(); ++i) {
        if (first[i] || lost[i].parity) continue;
        std::vector<uint64_t> after = missing;
        for (size_t k = 0; k < class_totals.size(); ++k) after[k] -= lost[i].class_counts[k];
        const Shares s = Evaluate(class_totals, after);
        // Progress on both conditions, per byte rebuilt.
        const double gain = std::max(0.0, now.max_deviation - s.max_deviation) +
                            std::max(0.0, std::min(prm.min_available, s.available_share) -
                                              std::min(prm.min_available, now.available_share));
        const double per_byte = gain / static_cast<double>(std::max<uint64_t>(lost[i].bytes, 1));
        if (per_byte > best_gain) best_gain = per_byte, best = i;
      }
      if (best == lost.size() || best_gain <= 0) break;  // nothing left helps: rebuild what is left first
      rebuild(best);
    }
    if (!satisfied(Evaluate(class_totals, missing))) {
      for (size_t i = 0; i < lost.size(); ++i) {
        if (!first[i] && !lost[i].parity) rebuild(i);
      }
    }
  }
  for (size_t i = 0; i < lost.size(); ++i) {
    (first[i] ? plan.first : plan.later).push_back(i);
    (first[i] ? plan.first_bytes : plan.later_bytes) += lost[i].bytes;
  }
  const Shares end = Evaluate(class_totals, missing);
  plan.available_share = end.available_share;
  plan.max_class_deviation = end.max_deviation;
  return plan;
}

}  // namespace tenax::store

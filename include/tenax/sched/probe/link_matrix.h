// The coordinator's picture of the network: a time-decayed matrix of the
// probes' measurements between nodes (layer `sched`, docs/placement.md).
//
// Each pair keeps an exponentially weighted mean whose older samples weigh
// 0.5^(age / half_life): a link that degrades shows within a few half-lives,
// a link that recovers likewise. A failed probe (no answer within its
// deadline) counts as a sample with loss 1 and makes the pair unreachable
// until a probe is answered again.
//
// Thread-safe: Observe and Link may be called from any thread.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/sched/probe/link_metrics.h"

namespace tenax::sched {

struct LinkSample {
  double rtt_ms = 0;
  double loss = 0;
  double throughput_gbps = 0;
};

class LinkMatrix final : public LinkView {
 public:
  // half_life_seconds > 0.
  explicit LinkMatrix(double half_life_seconds = 60.0);
  LinkMatrix(LinkMatrix&& other) noexcept;
  LinkMatrix& operator=(LinkMatrix&& other) noexcept;

  // A probe between a and b answered (a != b). `now_seconds` is any
  // monotonic clock, the same for every call.
  void Observe(const std::string& a, const std::string& b, const LinkSample& sample, double now_seconds);
  // A probe between a and b got no answer by its deadline.
  void ObserveUnreachable(const std::string& a, const std::string& b, double now_seconds);

  std::optional<LinkMetrics> Link(const NodeState& a, const NodeState& b) const override;
  std::optional<LinkMetrics> Link(const std::string& a, const std::string& b) const;

  struct Entry {
    std::string a, b;  // a < b
    LinkMetrics metrics;
    double last_seconds = 0;
    int samples = 0;
  };
  std::vector<Entry> Entries() const;  // sorted by (a, b)

  // JSON text {"half_life_seconds":..,"links":[{"a","b","rtt_ms","loss",
  // "throughput_gbps","reachable"}]} and its parser, for files handed to the
  // extender (`--links FILE`) and for the coordinator's answers.
  std::string ToJson() const;
  static Result<LinkMatrix> FromJson(const std::string& text);

 private:
  struct Pair {
    double weight = 0;  // decayed total weight of the samples
    double rtt_sum = 0, loss_sum = 0, tp_sum = 0;
    double last_seconds = 0;
    int samples = 0;
    bool reachable = true;
  };
  void Add(const std::string& a, const std::string& b, const LinkSample& s, bool reachable, double now);

  double half_life_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Pair> pairs_;
};

}  // namespace tenax::sched

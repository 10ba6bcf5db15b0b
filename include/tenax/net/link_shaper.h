// Emulated link conditions at the transport seam (tc netem does not exist on
// our machines): per-peer one-way delay, loss with retransmission, and a
// bandwidth limit. The shaper only computes *when* an operation may be
// reported complete and how many times its bytes must be sent; the Node
// really re-sends lost transfers and holds back completions until then.
// Pure logic, deterministic for a seed, not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

#include "tenax/core/deadline.h"

namespace tenax::net {

struct LinkShape {
  std::chrono::microseconds delay{0};                  // added one-way latency per operation
  double loss = 0.0;                                   // probability that one transmission is lost, 0..0.9
  double bandwidth_bytes_per_second = 0;               // 0 = unlimited
  std::chrono::microseconds retransmit_timeout{2000};  // wait before re-sending a lost transmission
  int max_transmissions = 16;                          // beyond this the operation fails (the link is considered down)

  bool is_ideal() const { return delay.count() == 0 && loss == 0 && bandwidth_bytes_per_second == 0; }
};

class LinkShaper {
 public:
  explicit LinkShaper(LinkShape shape = {}, uint64_t seed = 1) : shape_(shape), rng_(seed) {}

  struct Plan {
    SteadyClock::time_point complete_at;  // earliest time to report completion
    int transmissions = 1;                // 1 + number of losses
    bool failed = false;                  // more than max_transmissions needed
  };

  // Schedules an operation moving `bytes` issued at `now`. Operations share
  // the link's bandwidth in issue order.
  Plan Schedule(size_t bytes, SteadyClock::time_point now);

  const LinkShape& shape() const { return shape_; }

 private:
  std::chrono::nanoseconds SerializationTime(size_t bytes) const;

  LinkShape shape_;
  std::mt19937_64 rng_;
  SteadyClock::time_point link_free_at_{};
};

}  // namespace tenax::net

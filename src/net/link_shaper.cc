#include "tenax/net/link_shaper.h"

#include <algorithm>

namespace tenax::net {

std::chrono::nanoseconds LinkShaper::SerializationTime(size_t bytes) const {
  if (shape_.bandwidth_bytes_per_second <= 0) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(
      static_cast<int64_t>(1e9 * static_cast<double>(bytes) / shape_.bandwidth_bytes_per_second));
}

LinkShaper::Plan LinkShaper::Schedule(size_t bytes, SteadyClock::time_point now) {
  Plan plan;
  std::bernoulli_distribution lost(std::clamp(shape_.loss, 0.0, 0.9));
  // The link is busy only while it serialises bytes; waiting out a
  // retransmission timeout leaves it free for other operations.
  SteadyClock::time_point t = now;
  while (true) {
    if (shape_.bandwidth_bytes_per_second > 0) {  // FIFO link: wait for earlier bytes
      t = std::max(t, link_free_at_) + SerializationTime(bytes);
      link_free_at_ = t;
    }
    if (shape_.loss <= 0 || !lost(rng_)) break;
    if (plan.transmissions >= shape_.max_transmissions) {
      plan.failed = true;
      break;
    }
    ++plan.transmissions;
    t += shape_.retransmit_timeout;
  }
  plan.complete_at = t + shape_.delay;
  return plan;
}

}  // namespace tenax::net

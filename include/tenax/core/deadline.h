// Deadlines for every wait on a peer: a lost or silent peer must turn into a
// DeadlineExceeded or PeerLost status, never a hang.
#pragma once

#include <chrono>

namespace tenax {

using SteadyClock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline After(std::chrono::nanoseconds d) { return Deadline(SteadyClock::now() + d); }
  static Deadline At(SteadyClock::time_point t) { return Deadline(t); }
  static Deadline Never() { return Deadline(SteadyClock::time_point::max()); }

  bool Expired() const { return SteadyClock::now() >= at_; }
  SteadyClock::time_point at() const { return at_; }
  // Remaining time, zero when expired.
  std::chrono::nanoseconds Remaining() const {
    auto now = SteadyClock::now();
    return now >= at_ ? std::chrono::nanoseconds(0) : std::chrono::duration_cast<std::chrono::nanoseconds>(at_ - now);
  }
  Deadline Earlier(Deadline other) const { return other.at_ < at_ ? other : *this; }

 private:
  explicit Deadline(SteadyClock::time_point at) : at_(at) {}
  SteadyClock::time_point at_;
};

}  // namespace tenax

// Pieces private to src/train shared by the training loop and the trainers'
// entry points (includes libtorch).
#pragma once

#include <chrono>
#include <string>

#include "tenax/core/status.h"

namespace tenax::train_internal {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Catches libtorch exceptions (programmer errors or OOM) at the library
// boundary so callers only ever see a Status.
template <typename Fn>
auto GuardTorch(const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    return Internal(std::string(what) + ": " + msg.substr(0, msg.find('\n')));
  }
}

}  // namespace tenax::train_internal

// How a collective waits for its peers (internal to src/comm): spin first
// (a peer on its own core answers within microseconds), then yield the
// core on every round (when processes outnumber cores, the peer we wait
// for may need this very core), then sleep with the node progressing (an
// idle core lets the scheduler move a runnable peer onto it; a yielding
// waiter stays runnable and keeps the core). The flat and hierarchical
// allreduces share it so that both have the same patience. Measured with
// 3 and 4 workers on 2 cores (docs/elastic.md): sleeping after 4096 rounds
// made steps 10-20% faster than yielding only; after 512 rounds it was no
// better.
//
// Threading: one waiting thread, the node's.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include "tenax/net/node.h"

namespace tenax::comm {

class WaitBackoff {
 public:
  explicit WaitBackoff(net::Node& node) : node_(node) {}

  // One round of waiting. True every kCheckEvery rounds: the checks that
  // cost more than a load (peer health, interrupt, deadline) are due.
  bool Pause() {
    ++spins_;
    if (spins_ > kSpinsBeforeSleep) {
      node_.Progress();  // the transport keeps moving while we sleep
      std::this_thread::sleep_for(kSleep);
    } else if (spins_ > kSpinsBeforeYield) {
      std::this_thread::yield();
    }
    return spins_ % kCheckEvery == 0;
  }

 private:
  static constexpr uint32_t kSpinsBeforeYield = 2048;
  static constexpr uint32_t kSpinsBeforeSleep = 4096;
  static constexpr uint32_t kCheckEvery = 256;
  static constexpr auto kSleep = std::chrono::microseconds(50);

  net::Node& node_;
  uint32_t spins_ = 0;
};

}  // namespace tenax::comm

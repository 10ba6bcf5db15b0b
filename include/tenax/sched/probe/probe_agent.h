// `tenax probe`: one network probe agent per node (layer sched,
// docs/placement.md). It listens, reports to the coordinator, learns the
// other agents from its answer, and every interval measures each of them
// over the tenax transport:
//   - delay: `pings` one-sided 64-byte reads of the peer's probe region,
//     the median round trip;
//   - loss: the share of those reads that were not answered by their
//     deadline, or answered later than 2 x the median + 1 ms (a
//     retransmission, as ping with a deadline would count it);
//   - throughput: one-sided writes of `throughput_bytes`, timed to a flush.
// A peer that cannot be connected, or answers no read, is reported
// unreachable; that costs one probe_timeout per round and never blocks
// anyone else (placement reads the coordinator's matrix, not the agents).
// Data goes over TCP (transports "tcp" by default), not shared memory, so
// the measurement crosses the network the job would use.
//
// Threading: RunProbeAgent owns its Node on the calling thread.
// Failure: returns Cancelled on a stop signal, OK after `rounds` rounds;
// a lost coordinator is reconnected every round (logged), never fatal.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "tenax/core/status.h"

namespace tenax::sched {

struct ProbeOptions {
  std::string node;                 // this node's name (unique among agents)
  std::string zone;                 // "" = unknown
  std::string listen_host = "127.0.0.1";
  uint16_t port = 0;                // 0 = any free port
  std::string coordinator_host;
  uint16_t coordinator_port = 0;
  std::string secret;
  std::string transports = "tcp";
  std::chrono::milliseconds interval{2000};
  int pings = 10;
  size_t throughput_bytes = size_t{1} << 20;
  std::chrono::milliseconds probe_timeout{1000};
  int rounds = 0;  // 0 = until stopped
  // Called after every round with the number of peers measured (tests, logs).
  std::function<void(int round, int peers)> on_round;
};

Status ValidateProbeOptions(const ProbeOptions& o);

Status RunProbeAgent(const ProbeOptions& options);

}  // namespace tenax::sched

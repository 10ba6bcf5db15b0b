// The coordinator role of a multi-process job (`tenax coordinator` parses
// the flags and calls it): coord/coordinator.h configured from the job file
// (membership, elastic bounds, an async job's work queue) with the link
// book that network probes report to (sched/probe/link_book.h).
//
// Process-wide effects: sets up logging ("coordinator") and the stop
// handlers. Threading: serves on the calling thread until the job ends.
// Failure: InvalidArgument for a bad job or address; otherwise the
// coordinator's own errors (a failed job is PeerLost).
#pragma once

#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax {

struct CoordinatorRoleOptions {
  std::string job_path;
  std::vector<std::string> overrides;  // "key=value", applied in order
  std::string state_path;              // SQLite; "" = <job_id>.coordinator.db
  int port = -1;                       // -1 = cluster.coordinator's port; 0 = any
  std::string port_file;               // the bound port, once listening ("" = none)
  std::string metrics_listen;          // HOST:PORT of /metrics ("" = none)
  std::string metrics_port_file;
};

Status RunCoordinatorRole(const CoordinatorRoleOptions& options);

}  // namespace tenax

// The parameter-server role of an async job (`tenax server` parses the
// flags and calls it): one shard of the job's model, built from the job
// file. The shard itself is ps/parameter_server.h; this role reads the job,
// finds the coordinator, and hands the shard its initial parameters (built
// here with train's model, so the ps layer stays free of libtorch).
//
// Process-wide effects: sets up logging ("server-<shard>") and the stop
// handlers. Threading: runs on the calling thread until the job is done.
// Failure: InvalidArgument for a job that is not async, a shard outside
// async.servers or a bad address; otherwise the shard's own errors
// (ps::RunServer).
#pragma once

#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/ps/parameter_server.h"

namespace tenax {

struct ServerRoleOptions {
  std::string job_path;                // mode = "async"
  std::vector<std::string> overrides;  // "key=value", applied in order
  // host:port; "" = $TENAX_COORDINATOR, then cluster.coordinator.
  std::string coordinator;
  // A restart on it continues from its newest intact checkpoint;
  // "" = runs/<job_id>/server-<shard>.
  std::string checkpoint_dir;
  int shard = 0;  // which of async.servers
};

Result<ps::ServerOutcome> RunServerRole(const ServerRoleOptions& options);

}  // namespace tenax

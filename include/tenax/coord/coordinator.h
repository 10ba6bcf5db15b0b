// The coordinator role (`tenax coordinator`): admits workers into one job,
// assigns ranks, hands every joiner the job's configuration, publishes the
// roster once all have joined (rendezvous), relays progress to watchers
// (the launcher), and turns the loss of any member into one Failure
// message, naming the rank and host, to everyone still connected.
//
// State lives in a JobStore (SQLite): killed and restarted with the same
// state file, the coordinator resumes the same job; running workers
// reconnect and rejoin with their ranks (they keep training meanwhile).
//
// Membership has a generation number that bumps whenever the set of
// members changes; leases (renewed every second while a member's connection
// lives) record who was alive when. A lost member ends the job, unless the
// job is elastic: then the others form a new generation (a new roster), and
// joiners are admitted while it runs (docs/elastic.md).
//
// The decisions are coord::JobStateMachine's (job_state.h); this role is
// the I/O around it.
//
// Threading: Run() owns its Node on the calling thread; the metrics
// endpoint (metrics_endpoint.h) answers scrapes on its own threads from a
// snapshot the loop publishes every 200 ms, so a scrape never stalls it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/net/control_service.h"

namespace tenax::coord {

struct CoordinatorOptions {
  std::string job_id;
  std::string config_toml;  // handed to every joiner
  int world = 0;
  std::string state_path;   // SQLite file
  std::string listen_host = "127.0.0.1";
  uint16_t port = 0;        // 0 = any free port
  std::string port_file;    // if set, the bound port is written here (atomically) once listening
  std::string secret;
  // Prometheus metrics (GET /metrics, docs/metrics.md) on "host:port"
  // ("" = off; port 0 = any free port, written to metrics_port_file
  // atomically when set). A bad address: InvalidArgument before serving.
  std::string metrics_listen;
  std::string metrics_port_file;
  std::chrono::milliseconds join_timeout{60000};
  std::chrono::milliseconds peer_timeout{10000};
  // Elastic jobs (see JobStateOptions in job_state.h).
  bool elastic = false;
  int min_workers = 1;
  int max_workers = 0;  // 0 = world
  int spares = 0;       // cluster.spares (JobStateOptions::spares)
  // Test seam (TENAX_TEST_SIGKILL_ON_DONE=1, `tenax coordinator`): SIGKILL
  // this process when a member's first Done arrives, before it is stored or
  // acknowledged: a coordinator lost as the job ends.
  bool sigkill_on_first_done = false;
  // Asynchronous jobs (mode "async", docs/async.md): the work queue lives
  // in the same state file; membership is elastic (workers come and go).
  bool async = false;
  int64_t total_steps = 0;
  int64_t unit_steps = 20;
  int shards = 1;
  std::chrono::milliseconds lease{30000};
  int max_attempts = 5;
  // Other protocols served on the coordinator's node (e.g. sched's link
  // book for network probes); a message of a kind one of them Handles goes
  // to it, from members and strangers alike.
  std::vector<std::shared_ptr<net::ControlService>> services;
};

// Serves until the job finished (OK) or failed (the failure, as
// FailedPrecondition naming the rank), or a stop signal (Cancelled).
Status RunCoordinator(const CoordinatorOptions& options);

}  // namespace tenax::coord

// Where and how the processes of a multi-process job meet: the [cluster]
// table of a job file (mode "sync"). Parsed with the rest of the job by
// ParseTrainConfig (job/train_config.h); docs/config.md describes every
// key. Header-only so the config decoder's fuzz build needs no coord library.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tenax::coord {

struct ClusterConfig {
  int64_t workers = 2;
  std::string job_id = "tenax-job";
  std::string coordinator = "127.0.0.1:0";  // host:port; port 0 = any (the launcher tells the workers)
  std::string host = "127.0.0.1";           // the address this host's workers listen on
  std::string secret;                       // "" = $TENAX_SECRET (the launcher makes one up)
  std::string transports;                   // UCX_TLS for the data plane; "" = UCX's choice
  // net.tcp_streams: data connections per peer over TCP (net::NodeOptions::
  // tcp_streams); 0 = "auto": `tenax run` on a [topology] picks it from the
  // probes' worst worker link (TcpStreamsFor), 1 otherwise.
  int tcp_streams = 0;
  int resolved_tcp_streams() const { return tcp_streams > 0 ? tcp_streams : 1; }
  std::string metrics_listen;               // host:port of the coordinator's Prometheus /metrics; "" = off
  double join_timeout_seconds = 60;         // all workers must have joined by then
  double step_timeout_seconds = 60;         // a collective without progress for this long fails
  double peer_timeout_seconds = 10;         // silence after which a process counts as lost
  // Elastic jobs keep training when members are lost and admit joiners
  // (docs/elastic.md); min/max_workers bound the membership.
  bool elastic = false;
  int64_t min_workers = 1;  // below it the job pauses and waits for joiners
  int64_t max_workers = 0;  // extra joiners wait as spares; ParseTrainConfig sets 0 to `workers`
  // Warm spares `tenax run` keeps waiting beside an elastic job (needs
  // max_workers == workers): each has loaded its model and data and is
  // connected, and the coordinator admits one in the generation that
  // drops a member (docs/elastic.md, "Warm spares").
  int64_t spares = 0;
  // How a step's global batch is split (job/batch_shares.h): "measured"
  // (by each member's speed) or "even" (bit-reproducible runs).
  std::string shares = "measured";

  std::chrono::milliseconds join_timeout() const { return Millis(join_timeout_seconds); }
  std::chrono::milliseconds step_timeout() const { return Millis(step_timeout_seconds); }
  std::chrono::milliseconds peer_timeout() const { return Millis(peer_timeout_seconds); }

 private:
  static std::chrono::milliseconds Millis(double seconds) {
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
  }
};

}  // namespace tenax::coord

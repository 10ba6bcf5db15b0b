// The resident recovery service (layer `store`, docs/store.md; `tenax store
// serve`): a long-lived process next to the catalog that rebuilds lost
// chunks on request, with the catalog and its connections to every data
// node already open. A recovery asked of it costs the rebuild alone, not a
// process start (libtorch's static initialisation, the catalog, one
// connection per node: about 0.7 s here), which dominated a small or fast
// recovery.
//
// Requests (store_wire.proto RecoverRequest, decoded and bounded by
// storage_codec.h) come from `tenax store recover --service`, from a
// training job's loader (data.recovery_service) and from benchmarks:
// - a request for a dataset the catalog does not have is refused at once
//   (NotFound, naming the datasets it has);
// - a request equal to the one running, or to one waiting (same dataset,
//   policy and parameters), joins it: the recovery runs once and every
//   requester gets its report (`joined` says which did not start it);
// - another request waits behind the running one, up to `max_waiting`;
//   more are refused (ResourceExhausted, one line): recoveries run one at a
//   time, since they share the nodes' links.
// Each recovery first re-reads the catalog (nodes failed or added by
// others since) and takes the dataset's recovery claim in the catalog
// (catalog.h), so a `tenax store recover` process or a job's own loader
// never rebuilds the same dataset at the same time; a claim held by another
// live owner fails the request (Unavailable, naming the holder). A claim
// whose owner was a process on this machine that no longer runs (a
// SIGKILLed service or worker) is taken over at once instead of blocking
// the dataset until it goes stale (an hour).
//
// Threading: RunRecoveryService owns two threads: the caller's, which
// serves the transport (requests in, replies out), and one that owns the
// StoreClient and runs the recoveries, so a long rebuild never delays an
// answer to a new request. `stop` is polled between messages; a recovery
// under way is finished (its manifest stored) before the service returns.
//
// RecoveryServiceClient: one connection to a service; one request at a
// time; not thread-safe (a thread per client). A client may sit idle
// between requests: a connection the service dropped meanwhile is made
// again when the next request is asked.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenax/core/deadline.h"
#include "tenax/core/status.h"
#include "tenax/net/node.h"
#include "tenax/store/recovery.h"
#include "store_wire.pb.h"

namespace tenax::store {

struct RecoveryServiceOptions {
  std::string name = "recovery-service";
  std::string catalog;                  // the store catalog's SQLite file
  std::string listen_host = "127.0.0.1";
  uint16_t port = 0;                    // 0 = any free port
  std::string secret;                   // the cluster secret, for clients and data nodes
  double link_bytes_per_second = 0;     // emulated rate of the service's writes to each node (0 = unshaped)
  size_t max_waiting = 16;              // requests queued behind the running recovery; more are refused
  std::chrono::milliseconds peer_timeout{10000};
  // Called once the catalog is open, every live data node connected, and
  // the service listens (with the bound port and the nodes it reached).
  std::function<void(uint16_t port, size_t nodes_connected)> on_ready;
  std::function<bool()> stop;           // polled between messages
};

struct RecoveryServiceReport {
  uint64_t requests = 0;    // recover requests received (valid or not)
  uint64_t recoveries = 0;  // recoveries run
  uint64_t joined = 0;      // requests answered by a recovery another request started
  uint64_t refused = 0;     // bad, unknown-dataset or over-the-queue requests
};

// Serves until `stop` returns true. IoError / NotFound when the catalog
// cannot be opened; Unavailable when the transport cannot start.
Result<RecoveryServiceReport> RunRecoveryService(const RecoveryServiceOptions& options);

struct RecoveryRequest {
  std::string dataset;  // "" = every dataset of the catalog
  RecoveryOptions options;
  std::vector<int> important_classes;  // approx's first tier
};

struct RecoveryAnswer {
  nlohmann::json report;   // {"results": [...], "transport_bytes": {"read", "written"}}
  bool joined = false;     // another request started this recovery
  uint64_t recovery_id = 0;
  double waited_seconds = 0;  // queued behind other recoveries
  double seconds = 0;         // the recovery itself
};

class RecoveryServiceClient {
 public:
  // `address` is HOST:PORT; `secret` "" = $TENAX_SECRET. Unavailable (with
  // the address) when nothing answers within `timeout`.
  static Result<std::unique_ptr<RecoveryServiceClient>> Connect(const std::string& address, const std::string& secret,
                                                                std::chrono::milliseconds timeout);
  ~RecoveryServiceClient();

  // Asks for a recovery and waits for its report. The service's refusal or
  // the recovery's failure is returned as that error; DeadlineExceeded when
  // no answer came in time (the recovery may still finish: the catalog
  // will say).
  Result<RecoveryAnswer> Recover(const RecoveryRequest& request, Deadline deadline);

  const std::string& address() const { return address_; }

 private:
  RecoveryServiceClient(std::unique_ptr<net::Node> node, net::PeerId peer, std::string address)
      : node_(std::move(node)), peer_(peer), address_(std::move(address)) {}
  Status Reconnect();
  Result<RecoveryAnswer> Ask(wire::RecoverRequest& request, Deadline deadline);
  std::unique_ptr<net::Node> node_;
  net::PeerId peer_;
  std::string address_, host_;
  uint16_t port_ = 0;
  std::chrono::milliseconds timeout_{5000};
  bool connected_ = false;
  uint64_t next_request_ = 1;
};

}  // namespace tenax::store

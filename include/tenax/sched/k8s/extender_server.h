// The Kubernetes scheduler extender over HTTP (layer `sched`,
// docs/placement.md): cpp-httplib serving
//   POST <prefix>/filter       ExtenderArgs -> ExtenderFilterResult
//   POST <prefix>/prioritize   ExtenderArgs -> HostPriorityList
//   GET  /healthz              200 "ok"
// with the request handling of extender.h. Refused requests get 400 (or 413
// over the body limit, or 404 for another path) and {"Error": reason}; the
// reason is logged (spdlog) with the pod and job when known.
//
// Threading: httplib's worker pool runs the handlers concurrently; each
// takes one snapshot from the state source and uses only it. Start() returns
// once the socket is bound; Stop() (or the destructor) stops accepting,
// finishes the requests in flight and joins the serving thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tenax/core/status.h"
#include "tenax/sched/k8s/cluster_state.h"
#include "tenax/sched/k8s/extender.h"

namespace tenax::sched {

struct ExtenderServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8888;  // 0 = any free port (see ExtenderServer::port())
  // Where the verbs live: "/tenax" serves /tenax/filter and
  // /tenax/prioritize (kube-scheduler's urlPrefix ends with it). "" or "/"
  // serves /filter and /prioritize.
  std::string url_prefix = "/tenax";
  ExtenderOptions extender;
  // Not owned; must outlive the server.
  ClusterStateSource* state = nullptr;
};

struct ExtenderCounters {
  uint64_t filter = 0, prioritize = 0, refused = 0;
};

class ExtenderServer {
 public:
  // Binds host:port and starts serving. InvalidArgument for a bad prefix,
  // weights or a null state; Unavailable when the address cannot be bound
  // (in use, or not an address of this host).
  static Result<std::unique_ptr<ExtenderServer>> Start(const ExtenderServerOptions& options);
  ~ExtenderServer();
  ExtenderServer(const ExtenderServer&) = delete;
  ExtenderServer& operator=(const ExtenderServer&) = delete;

  uint16_t port() const;
  const std::string& url_prefix() const;  // normalised: "" or "/name"
  ExtenderCounters counters() const;
  // Idempotent; safe from any thread but a handler's.
  void Stop();

 private:
  struct Impl;
  explicit ExtenderServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "/tenax/" -> "/tenax", "tenax" -> "/tenax", "/" -> "". InvalidArgument
// for characters outside [A-Za-z0-9/._~-].
Result<std::string> NormaliseUrlPrefix(const std::string& prefix);

}  // namespace tenax::sched

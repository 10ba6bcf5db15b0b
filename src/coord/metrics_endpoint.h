// The coordinator's Prometheus endpoint: an HTTP server (cpp-httplib, on its
// own threads) answering GET /metrics with the latest published JobMetrics
// in the text format 0.0.4 (prometheus_text.h); every other path is 404.
//
// The coordinator's loop never waits for a scrape: Publish() only swaps
// the snapshot under a mutex, and a request copies it under the same mutex
// and renders outside it. A report's age is advanced by the time since the
// snapshot was published, so it stays true between publications.
//
// Ownership: the endpoint owns its server and threads; the destructor (or
// Stop) stops serving and joins them. Failures: Start returns
// InvalidArgument, naming the text, for an address that does not parse or
// cannot be bound (in use, or not an address of this host).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "prometheus_text.h"
#include "tenax/core/status.h"

namespace tenax::coord {

class MetricsEndpoint {
 public:
  // `listen` is "host:port"; port 0 picks a free port (see port()).
  static Result<std::unique_ptr<MetricsEndpoint>> Start(const std::string& listen);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  const std::string& host() const;
  uint16_t port() const;
  // "http://host:port/metrics" (IPv6 hosts in brackets).
  std::string Url() const;
  // What the next scrapes serve. Thread-safe.
  void Publish(JobMetrics snapshot);
  void Stop();

 private:
  struct Impl;
  explicit MetricsEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tenax::coord

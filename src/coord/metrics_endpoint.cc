#include "metrics_endpoint.h"

// Debian's cpp-httplib is a compiled library: its pkg-config file adds the
// CPPHTTPLIB_*_SUPPORT definitions it was built with, which this header
// must see identically (src/CMakeLists.txt links PkgConfig::HTTPLIB).
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "tenax/core/deadline.h"
#include "tenax/net/host_port.h"

namespace tenax::coord {

struct MetricsEndpoint::Impl {
  std::string host;
  uint16_t port = 0;
  httplib::Server http;
  std::thread thread;
  std::atomic<bool> stopped{false};
  std::mutex mu;  // guards snapshot and published_at
  JobMetrics snapshot;
  SteadyClock::time_point published_at = SteadyClock::now();

  std::string Render() {
    JobMetrics m;
    SteadyClock::time_point at;
    {
      std::lock_guard<std::mutex> lock(mu);
      m = snapshot;
      at = published_at;
    }
    const double since = std::chrono::duration<double>(SteadyClock::now() - at).count();
    for (WorkerMetrics& w : m.worker_reports) w.last_report_age_seconds += since;
    return RenderJobMetrics(m);
  }
};

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsEndpoint::~MetricsEndpoint() { Stop(); }

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& listen) {
  auto hp = net::ParseHostPort(listen);
  if (!hp.ok()) {
    return InvalidArgument("metrics address: " + hp.status().message() + " (e.g. 127.0.0.1:9400, or port 0 for any)");
  }
  auto impl = std::make_unique<Impl>();
  impl->host = hp->host;
  Impl* p = impl.get();
  httplib::Server& http = impl->http;
  // httplib's default sets SO_REUSEPORT, which lets a second process bind
  // the same port and share its scrapes; SO_REUSEADDR alone still lets a
  // restarted coordinator take its port back from TIME_WAIT.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // Scrapes are rare and small: a few threads, not one per core.
  http.new_task_queue = [] { return new httplib::ThreadPool(3); };
  http.Get("/metrics", [p](const httplib::Request&, httplib::Response& res) {
    res.set_content(p->Render(), kPrometheusContentType);
  });
  // Errors httplib produces itself (404 for any other path or method, 400
  // for a broken request) say what is served.
  http.set_error_handler(httplib::Server::Handler([](const httplib::Request& req, httplib::Response& res) {
    res.set_content("HTTP " + std::to_string(res.status) + " for " + req.method + " " + req.path +
                        ": the coordinator serves GET /metrics only\n",
                    "text/plain");
  }));
  if (hp->port == 0) {
    const int port = http.bind_to_any_port(hp->host);
    if (port <= 0) return InvalidArgument("metrics address " + listen + ": cannot listen on " + hp->host);
    impl->port = static_cast<uint16_t>(port);
  } else {
    if (!http.bind_to_port(hp->host, hp->port)) {
      return InvalidArgument("metrics address " + listen +
                             ": cannot listen there (port in use, or not an address of this host); "
                             "use another port, or port 0 for any free one");
    }
    impl->port = hp->port;
  }
  impl->thread = std::thread([p] { p->http.listen_after_bind(); });
  // httplib's stop() is a no-op until the accept loop runs: wait for it so
  // that a Stop() right after Start() cannot be lost.
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (!http.is_running()) {
    if (SteadyClock::now() > deadline) {
      http.stop();
      impl->thread.join();
      return Internal("metrics endpoint: the HTTP accept loop did not start within 10 s");
    }
    std::this_thread::yield();
  }
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(std::move(impl)));
}

const std::string& MetricsEndpoint::host() const { return impl_->host; }
uint16_t MetricsEndpoint::port() const { return impl_->port; }

std::string MetricsEndpoint::Url() const {
  const std::string& h = impl_->host;
  const std::string host = h.find(':') != std::string::npos ? "[" + h + "]" : h;
  return "http://" + host + ":" + std::to_string(impl_->port) + "/metrics";
}

void MetricsEndpoint::Publish(JobMetrics snapshot) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->snapshot = std::move(snapshot);
  impl_->published_at = SteadyClock::now();
}

void MetricsEndpoint::Stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  impl_->http.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace tenax::coord

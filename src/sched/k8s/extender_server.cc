#include "tenax/sched/k8s/extender_server.h"

// Debian's cpp-httplib is a compiled library: its pkg-config file adds the
// CPPHTTPLIB_*_SUPPORT definitions the library was built with, which this
// header must see identically (src/CMakeLists.txt links PkgConfig::HTTPLIB).
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace tenax::sched {

Result<std::string> NormaliseUrlPrefix(const std::string& prefix) {
  std::string p = prefix;
  for (char c : p) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' ||
                    c == '.' || c == '_' || c == '~' || c == '-';
    if (!ok) {
      return InvalidArgument("URL prefix '" + prefix + "' may hold only letters, digits and / . _ ~ - (e.g. /tenax)");
    }
  }
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (!p.empty() && p.front() != '/') p.insert(p.begin(), '/');
  return p;
}

namespace {

constexpr const char* kJson = "application/json";

// The route pattern (httplib routes are regular expressions) for a path.
std::string Pattern(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '.') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

struct ExtenderServer::Impl {
  ExtenderServerOptions options;
  std::string prefix;
  httplib::Server http;
  std::thread thread;
  uint16_t port = 0;
  std::atomic<uint64_t> filter{0}, prioritize{0}, refused{0};
  std::atomic<bool> stopped{false};

  void Serve(const char* verb, const httplib::Request& req, httplib::Response& res, bool is_filter) {
    const std::shared_ptr<const ClusterSnapshot> state = options.state->Snapshot();
    ExtenderReply r = is_filter ? HandleFilter(req.body, *state, options.extender)
                                : HandlePrioritize(req.body, *state, options.extender);
    res.status = r.http_status;
    res.set_content(r.body, kJson);
    if (r.http_status != 200) {
      refused.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("{} refused ({}) from {}: {}", verb, r.http_status, req.remote_addr, r.summary);
      return;
    }
    (is_filter ? filter : prioritize).fetch_add(1, std::memory_order_relaxed);
    if (r.job.empty()) {
      spdlog::debug("{} pod {}: {}", verb, r.pod, r.summary);
    } else {
      spdlog::info("{} pod {} job {}: {}", verb, r.pod, r.job, r.summary);
    }
  }
};

ExtenderServer::ExtenderServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ExtenderServer::~ExtenderServer() { Stop(); }

Result<std::unique_ptr<ExtenderServer>> ExtenderServer::Start(const ExtenderServerOptions& options) {
  if (options.state == nullptr) return InvalidArgument("extender: no cluster state source");
  TENAX_RETURN_IF_ERROR(ValidateWeights(options.extender.weights));
  if (options.extender.max_body_bytes == 0) return InvalidArgument("extender: the body limit must be positive");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  TENAX_ASSIGN_OR_RETURN(impl->prefix, NormaliseUrlPrefix(options.url_prefix));
  Impl* p = impl.get();
  httplib::Server& http = impl->http;

  http.Post(Pattern(p->prefix + "/filter"),
            [p](const httplib::Request& req, httplib::Response& res) { p->Serve("filter", req, res, true); });
  http.Post(Pattern(p->prefix + "/prioritize"),
            [p](const httplib::Request& req, httplib::Response& res) { p->Serve("prioritize", req, res, false); });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  // httplib itself refuses a Content-Length over the limit (413) without
  // reading the body into memory; HandleFilter/HandlePrioritize check again
  // for bodies sent without a length (chunked).
  http.set_payload_max_length(options.extender.max_body_bytes);
  http.set_keep_alive_max_count(100);
  // Errors httplib produces itself (404, 413, 400 on a broken request) get
  // the same {"Error": reason} body as ours; ours already have one.
  http.set_error_handler(httplib::Server::HandlerWithResponse([p](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string reason;
    if (res.status == 413 && req.get_header_value("Content-Type") == "application/x-www-form-urlencoded") {
      // httplib parses such bodies as forms and caps them at 8 KiB itself.
      reason =
          "a Content-Type: application/x-www-form-urlencoded body over 8192 bytes is refused; send "
          "Content-Type: application/json, as kube-scheduler does";
    } else if (res.status == 413) {
      reason = "request body is over the extender's limit of " + std::to_string(p->options.extender.max_body_bytes) +
               " bytes (raise --max-body-mib for larger clusters)";
    } else if (res.status == 404) {
      reason = "no route " + req.method + " " + req.path + "; the extender serves POST " + p->prefix +
               "/filter, POST " + p->prefix + "/prioritize and GET /healthz";
    } else {
      reason = "HTTP " + std::to_string(res.status) + " for " + req.method + " " + req.path;
    }
    p->refused.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("refused ({}) {} {} from {}: {}", res.status, req.method, req.path, req.remote_addr, reason);
    res.set_content(EncodeExtenderError(reason), kJson);
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("internal error on {} {}: {}", req.method, req.path, what);
    res.status = 500;
    res.set_content(EncodeExtenderError("internal error: " + what), kJson);
  });

  // httplib's default socket options set SO_REUSEPORT: a second extender
  // (a stale one, or a typo in a manifest) would bind the same port and
  // silently take half of kube-scheduler's calls. SO_REUSEADDR alone still
  // lets a restarted extender take its port back from TIME_WAIT.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  if (options.port == 0) {
    const int port = http.bind_to_any_port(options.host);
    if (port <= 0) return Unavailable("extender: cannot listen on " + options.host + " (any port)");
    impl->port = static_cast<uint16_t>(port);
  } else {
    if (!http.bind_to_port(options.host, options.port)) {
      return Unavailable("extender: cannot listen on " + options.host + ":" + std::to_string(options.port) +
                         " (in use, or not an address of this host)");
    }
    impl->port = options.port;
  }
  impl->thread = std::thread([p] { p->http.listen_after_bind(); });
  // httplib's stop() is a no-op until the accept loop runs: wait for it so
  // that a Stop() right after Start() cannot be lost.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!http.is_running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      // listen_after_bind returned at once (the socket failed) or never ran.
      http.stop();
      impl->thread.join();
      return Internal("extender: the HTTP accept loop did not start within 10 s");
    }
    std::this_thread::yield();
  }
  return std::unique_ptr<ExtenderServer>(new ExtenderServer(std::move(impl)));
}

uint16_t ExtenderServer::port() const { return impl_->port; }
const std::string& ExtenderServer::url_prefix() const { return impl_->prefix; }

ExtenderCounters ExtenderServer::counters() const {
  return ExtenderCounters{impl_->filter.load(), impl_->prioritize.load(), impl_->refused.load()};
}

void ExtenderServer::Stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  impl_->http.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace tenax::sched

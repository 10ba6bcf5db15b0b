// A Node's two UCX planes (create, destroy) and its progress loop. The
// concerns the loop drives live in node_control.cc (handshake, messages),
// node_data.cc (regions, one-sided traffic) and node_peers.cc (life cycle).

#include <cstdlib>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "listener_fence.h"
#include "node_internal.h"
#include "tenax/net/auth.h"
#include "tenax/net/many_connections.h"

namespace tenax::net {
namespace {

// UCX keepalive: how fast a peer that died without closing (SIGKILL on shared
// memory) is noticed when there is no traffic to it.
constexpr const char* kKeepaliveInterval = "1s";

// UCX's default 8 KiB TCP segments cap one-sided TCP transfers near 1 GB/s
// on loopback; 512 KiB segments reach ~4 GB/s (bench transport). UCX reads
// these transport settings only from the environment; a user's own
// UCX_TCP_*_SEG_SIZE wins. Set while the program loads, before any thread
// exists: setenv adding a variable reallocates the environment, and a
// getenv in another thread at that moment read freed memory (a SIGSEGV
// in getenv when several threads created their first Nodes at once).
bool SetUcxTcpSegmentDefaults() {
  ::setenv("UCX_TCP_TX_SEG_SIZE", "512k", /*overwrite=*/0);
  ::setenv("UCX_TCP_RX_SEG_SIZE", "512k", /*overwrite=*/0);
  return true;
}
[[maybe_unused]] const bool kUcxTcpSegmentDefaultsSet = SetUcxTcpSegmentDefaults();

}  // namespace

void Node::Impl::Progress() {
  const auto now = SteadyClock::now();
  // A gap between two looks (the caller computed, or polled once and went
  // on) ends an idle streak: the next wait starts spinning again, so a
  // step's allreduce after a long forward pass is not taken for a long wait.
  if (now - last_progress > kNewWaitGap) {
    idle_spins = 0;
    idle_since = {};
  }
  last_progress = now;
  unsigned events = ucp_worker_progress(worker) + ucp_worker_progress(ctrl_worker);
  while (!conn_requests.empty()) {
    AcceptConnection(conn_requests.front());
    conn_requests.pop_front();
    ++events;
  }
  while (!rndv.empty() && rndv.front()->done) {
    auto r = std::move(rndv.front());
    rndv.pop_front();
    if (r->status == UCS_OK) frames.push_back(std::move(r->frame));
    ++events;
  }
  while (!frames.empty()) {
    Frame f = std::move(frames.front());
    frames.pop_front();
    HandleFrame(f);
    ++events;
  }
  if (link_faults) UpdateLinkFaults();
  events += ApplyHeld();
  events += ReleaseHeldFrames();
  if (!flush_answers.empty()) SendFlushAnswers();
  if (last_progress - last_peer_check >= kPeerCheckEvery) CheckPeers();
  CloseEndpoints();
  SweepGraveyard();
  ReapRequests(pending_sends, [](PendingSend& s) { return s.request; });
  ReapRequests(closing, [](void* r) { return r; });
  ReapDataCloses();
  // Yield when nothing happens so that idle waits leave the core to the
  // peer process (2 cores, several processes). A wait that stays idle past
  // kIdleSleepAfter (a warm spare waiting for a loss, a joiner for its
  // admission, a member for a stopped peer) sleeps kIdleSleep per look
  // instead: yielding, a waiting spare still took 3-18% of a core from the
  // members beside it. A healthy step's waits are shorter, so their latency
  // is untouched; a long one wakes at most kIdleSleep late. Not while frames
  // or puts are held for a link's emulated delay: those leave on time.
  if (events) {
    idle_spins = 0;
    idle_since = {};
  } else if (++idle_spins > 64) {
    if (idle_since == SteadyClock::time_point{}) idle_since = last_progress;
    if (sleep_when_idle && last_progress - idle_since > kIdleSleepAfter && !holding_frames && !holding_puts) {
      std::this_thread::sleep_for(kIdleSleep);
    } else {
      std::this_thread::yield();
    }
  }
}

void Node::Impl::ProgressControl() {
  ucp_worker_progress(ctrl_worker);
  CloseEndpoints();
  ReapRequests(pending_sends, [](PendingSend& s) { return s.request; });
  ReapRequests(closing, [](void* r) { return r; });
}

Node::Node(NodeOptions options) : impl_(std::make_unique<Impl>()), options_(std::move(options)) {
  impl_->options = options_;
}

Node::~Node() {
  if (!impl_) return;
  // No new connections while closing, and none half-accepted when the
  // listener goes (listener_fence.h says why and how): the listening socket
  // is closed now, the listener object only after the endpoints' close.
  // Connection requests that complete meanwhile are refused, never accepted:
  // an endpoint accepted now would have nobody to close it.
  std::optional<internal::QuietListenerTeardown> quiet;
  if (impl_->listener) {
    quiet.emplace();
    internal::CloseListeningSocket(impl_->listen_port);
  }
  // Live peers' control endpoints get a flushing close, so messages sent
  // just before (a barrier's release, a final report) still reach them;
  // dead ones a forced close. The wait below bounds both. Only the control
  // plane is driven from here on: data endpoints go with their worker
  // (ucp_worker_destroy runs no handlers). Driving the data plane while
  // peers still put into this node (a probe measuring throughput to an
  // agent that is stopping) runs UCX 1.13's software-put handler on
  // endpoints that are closing or failed, and its answer through such an
  // endpoint aborts the process ("unexpected error: Endpoint timeout").
  // Nothing is lost: a one-sided transfer that matters is flushed
  // (Flush) or seen by its target before its sender goes on, and messages
  // travel on the control plane.
  for (auto& [id, p] : impl_->peers) {
    if (p.ep) impl_->to_close.push_back({p.ep, p.lost.ok()});
    p.ep = nullptr;
    p.data_ep = nullptr;
    p.stream_eps.clear();
  }
  impl_->by_ep.clear();
  impl_->by_data_ep.clear();
  impl_->ProgressControl();
  auto deadline = Deadline::After(std::chrono::milliseconds(500));
  while ((!impl_->closing.empty() || !impl_->pending_sends.empty()) && !deadline.Expired()) {
    impl_->ProgressControl();
  }
  if (impl_->listener) {
    for (ucp_conn_request_h r : impl_->conn_requests) ucp_listener_reject(impl_->listener, r);
    impl_->conn_requests.clear();
    internal::CloseAcceptedSockets(impl_->listen_port);
    ucp_listener_destroy(impl_->listener);
    impl_->listener = nullptr;
  }
  for (auto& s : impl_->pending_sends) ucp_request_free(s.request);
  for (void* r : impl_->closing) ucp_request_free(r);
  for (auto& [r, peer] : impl_->closing_data) ucp_request_free(r);
  for (auto& r : impl_->graveyard) ucp_mem_unmap(impl_->context, r.memh);  // no data-plane handler runs any more
  if (impl_->worker) ucp_worker_destroy(impl_->worker);
  impl_->FreeDataSendBuffers();  // sends whose callback never ran
  if (impl_->context) ucp_cleanup(impl_->context);
  if (impl_->ctrl_worker) ucp_worker_destroy(impl_->ctrl_worker);
  if (impl_->ctrl_context) ucp_cleanup(impl_->ctrl_context);
}

Result<std::unique_ptr<Node>> Node::Create(NodeOptions options) {
  TENAX_ASSIGN_OR_RETURN(options.secret, ResolveSecret(options.secret));
  if (options.tcp_streams < 1 || options.tcp_streams > kMaxTcpStreams) {
    return InvalidArgument("[" + options.name + "] tcp_streams is " + std::to_string(options.tcp_streams) +
                           ": use 1 to " + std::to_string(kMaxTcpStreams) + " data connections per peer");
  }
  if (options.emulated_host.empty()) {
    TENAX_ASSIGN_OR_RETURN(auto emulated, EmulatedLinksFromEnvironment());
    if (emulated) {
      options.emulated_host = emulated->first;
      options.emulated_links = emulated->second;
    }
  }
  if (options.link_faults_file.empty()) {
    if (const char* f = std::getenv(kLinkFaultsEnvVar); f != nullptr) options.link_faults_file = f;
  }
  if (options.max_peers > 0) {
    const int64_t files = RaiseOpenFileLimit();
    const unsigned events = RaiseAsyncEventLimit(AsyncEventsFor(options.max_peers));
    spdlog::debug("[{}] room for {} peers: UCX async events {}, open files {}", options.name, options.max_peers,
                  events, files);
  }
  std::unique_ptr<Node> node(new Node(options));
  Impl& im = *node->impl_;
  im.sleep_when_idle = options.sleep_when_idle;
  if (!options.emulated_host.empty() && !options.link_faults_file.empty()) im.link_faults.emplace(options.link_faults_file);
  // TENAX_TCP_PUTS=ucx: UCX's own emulated puts, for comparison (bench
  // transport); they have the abort Impl::message_rma avoids.
  const char* tcp_puts = std::getenv("TENAX_TCP_PUTS");
  im.message_rma = options.transports == "tcp" && !(tcp_puts && std::string(tcp_puts) == "ucx");

  // One context + worker per plane (see Impl).
  auto start = [&](const std::string& transports, ucp_context_h* context, ucp_worker_h* worker) -> Status {
    ucp_config_t* config = nullptr;
    if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
      return Unavailable("UCX configuration: " + UcxError(s));
    }
    auto modify = [&](const char* key, const std::string& value) -> Status {
      if (value.empty()) return Status::Ok();
      if (ucs_status_t s = ucp_config_modify(config, key, value.c_str()); s != UCS_OK) {
        return InvalidArgument(std::string("UCX setting ") + key + "=" + value + ": " + UcxError(s));
      }
      return Status::Ok();
    };
    Status st = modify("TLS", transports);
    if (st.ok()) st = modify("NET_DEVICES", options.net_devices);
    if (st.ok()) st = modify("KEEPALIVE_INTERVAL", kKeepaliveInterval);
    if (!st.ok()) {
      ucp_config_release(config);
      return st;
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
    params.name = options.name.c_str();
    ucs_status_t s = ucp_init(&params, config, context);
    ucp_config_release(config);
    if (s != UCS_OK) return Unavailable("UCX init (transports '" + transports + "'): " + UcxError(s));
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if ((s = ucp_worker_create(*context, &wp, worker)) != UCS_OK) return Unavailable("UCX worker: " + UcxError(s));
    return Status::Ok();
  };
  TENAX_RETURN_IF_ERROR(start(options.transports, &im.context, &im.worker));
  TENAX_RETURN_IF_ERROR(start("tcp", &im.ctrl_context, &im.ctrl_worker));
  ucs_status_t s = UCS_OK;
  {
    ucp_address_t* addr = nullptr;
    size_t addr_len = 0;
    if ((s = ucp_worker_get_address(im.worker, &addr, &addr_len)) != UCS_OK) {
      return Unavailable("UCX worker address: " + UcxError(s));
    }
    im.worker_address.assign(reinterpret_cast<const char*>(addr), addr_len);
    ucp_worker_release_address(im.worker, addr);
  }
  for (auto [id, cb] : {std::pair<uint16_t, ucp_am_recv_callback_t>{kControlAm, &Impl::OnControlAm},
                        std::pair<uint16_t, ucp_am_recv_callback_t>{kBulkAm, &Impl::OnBulkAm},
                        std::pair<uint16_t, ucp_am_recv_callback_t>{kPutAm, &Impl::OnPutAm},
                        std::pair<uint16_t, ucp_am_recv_callback_t>{kFlushAm, &Impl::OnFlushAm},
                        std::pair<uint16_t, ucp_am_recv_callback_t>{kFlushAckAm, &Impl::OnFlushAckAm}}) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                    UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = id;
    hp.cb = cb;
    hp.arg = &im;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    // Control messages arrive on the control plane, bulk messages with the data.
    if ((s = ucp_worker_set_am_recv_handler(id == kControlAm ? im.ctrl_worker : im.worker, &hp)) != UCS_OK) {
      return Unavailable("UCX active-message handler: " + UcxError(s));
    }
  }
  return node;
}

void Node::Progress() { impl_->Progress(); }

}  // namespace tenax::net

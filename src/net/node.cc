#include "tenax/net/node.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "tenax/net/auth.h"
#include "tenax/net/control_codec.h"

namespace tenax::net {
namespace {

constexpr uint16_t kControlAm = 1;
constexpr uint16_t kBulkAm = 2;
// UCX keepalive: how fast a peer that died without closing (SIGKILL on shared
// memory) is noticed when there is no traffic to it.
constexpr const char* kKeepaliveInterval = "1s";

std::string UcxError(ucs_status_t s) { return ucs_status_string(s); }

std::string FormatAddress(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

Result<sockaddr_storage> Resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = host.empty() ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || !res) return InvalidArgument("cannot resolve '" + host + "': " + gai_strerror(rc));
  sockaddr_storage ss{};
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return ss;
}

socklen_t AddressLength(const sockaddr_storage& ss) {
  return ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

enum class Phase {
  kAwaitHello,      // server: connection accepted, waiting for Hello
  kAwaitChallenge,  // client: Hello sent
  kAwaitAuth,       // server: Challenge sent
  kAwaitWelcome,    // client: Auth sent
  kReady,
  kLost,
};

struct PeerState {
  PeerId id = 0;
  ucp_ep_h ep = nullptr;       // control: handshake, messages, failure detection (error mode PEER)
  ucp_ep_h data_ep = nullptr;  // one-sided traffic (error mode NONE: UCX keeps its fast shm lanes)
  std::string name;            // the peer's own name, once known
  std::string address;         // host:port
  Phase phase = Phase::kAwaitHello;
  std::string my_nonce;
  std::string their_nonce;
  SteadyClock::time_point started;
  SteadyClock::time_point last_heartbeat;  // last one we sent
  SteadyClock::time_point last_heard;      // last frame from the peer
  Status lost;
  std::optional<LinkShaper> shaper;

  std::string Label() const { return address + (name.empty() ? "" : " (" + name + ")"); }
};

// A message received by a UCX callback, processed later in Progress():
// callbacks only copy and queue, they never send.
struct Frame {
  ucp_ep_h ep = nullptr;
  uint16_t am_id = 0;
  std::vector<uint8_t> data;
};

// A rendezvous receive in flight (large active messages).
struct RndvReceive {
  Frame frame;
  bool done = false;
  ucs_status_t status = UCS_OK;
};

// A send whose buffer must stay alive until UCX is done with it.
struct PendingSend {
  void* request = nullptr;
  std::string buffer;
};

}  // namespace

struct Node::Impl {
  NodeOptions options;
  // Data plane: memory regions, one-sided traffic and bulk messages, on the
  // transports UCX picks (shared memory on one host).
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  // Control plane: handshake, control messages and failure detection, on TCP
  // only: the kernel resets a dead process's sockets, so a SIGKILLed peer is
  // noticed at once, which shared-memory lanes cannot promise.
  ucp_context_h ctrl_context = nullptr;
  ucp_worker_h ctrl_worker = nullptr;
  ucp_listener_h listener = nullptr;

  PeerId next_id = 1;
  std::unordered_map<PeerId, PeerState> peers;
  std::unordered_map<ucp_ep_h, PeerId> by_ep;
  std::unordered_map<ucp_ep_h, PeerId> by_data_ep;
  std::string worker_address;  // ours, handed to peers in the handshake
  std::deque<ucp_conn_request_h> conn_requests;
  std::deque<Frame> frames;
  std::deque<std::unique_ptr<RndvReceive>> rndv;
  std::vector<PendingSend> pending_sends;
  std::vector<void*> closing;  // ep close requests in flight
  // Endpoints to close from Progress; `flush` closes deliver what was sent
  // first (a refusal must reach the refused), force closes are for the dead.
  struct Closing {
    ucp_ep_h ep;
    bool flush;
  };
  std::vector<Closing> to_close;
  std::deque<PeerId> accepted;
  std::deque<ControlMessage> control;
  std::deque<BulkMessage> bulk;
  size_t idle_spins = 0;
  SteadyClock::time_point last_progress;

  // Operations that complete inline (shared memory) never need a wait, but
  // the Node must still run heartbeats and notice lost peers: drive progress
  // at least once per millisecond of such traffic.
  void MaybeProgress() {
    if (SteadyClock::now() - last_progress > std::chrono::milliseconds(1)) Progress();
  }

  // Dropped regions waiting for the peers that might still touch them.
  struct Retired {
    ucp_mem_h memh;
    std::vector<PeerId> peers;
  };
  std::vector<Retired> graveyard;

  void Retire(ucp_mem_h memh) {
    Retired r{memh, {}};
    for (const auto& [id, p] : peers) {
      if (p.phase != Phase::kLost) r.peers.push_back(id);
    }
    if (r.peers.empty()) {
      ucp_mem_unmap(context, memh);
    } else {
      graveyard.push_back(std::move(r));
    }
  }

  void SweepGraveyard() {
    for (size_t i = 0; i < graveyard.size();) {
      bool live = false;
      for (PeerId id : graveyard[i].peers) {
        PeerState* p = Find(id);
        live |= p && p->phase != Phase::kLost;
      }
      if (live) {
        ++i;
      } else {
        ucp_mem_unmap(context, graveyard[i].memh);
        graveyard[i] = std::move(graveyard.back());
        graveyard.pop_back();
      }
    }
  }

  // --- UCX callbacks (run inside ucp_worker_progress) ---

  static void OnConnRequest(ucp_conn_request_h request, void* arg) {
    static_cast<Impl*>(arg)->conn_requests.push_back(request);
  }

  static void OnEpError(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* self = static_cast<Impl*>(arg);
    auto it = self->by_ep.find(ep);
    if (it == self->by_ep.end()) return;
    self->LosePeer(it->second, PeerLost("connection lost (" + UcxError(status) + ")"), /*close_ep=*/true);
  }

  static void OnDataEpError(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* self = static_cast<Impl*>(arg);
    auto it = self->by_data_ep.find(ep);
    if (it == self->by_data_ep.end()) return;
    self->LosePeer(it->second, PeerLost("data connection lost (" + UcxError(status) + ")"), /*close_ep=*/true);
  }

  // The data endpoint: created from the peer's worker address once the
  // handshake has authenticated it. Error mode NONE keeps UCX's
  // shared-memory RMA lanes (with mode PEER, UCX 1.13 moves 64 MiB puts at
  // ~26 MB/s instead of ~12 GB/s); the handler still reports what UCX
  // notices, and the control endpoint detects a dead peer.
  Status CreateDataEp(PeerState& p, const std::string& address) {
    ucp_ep_params_t params{};
    params.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb = OnDataEpError;
    params.err_handler.arg = this;
    ucs_status_t s = ucp_ep_create(worker, &params, &p.data_ep);
    if (s != UCS_OK) return ProtocolError("cannot open a data endpoint to the peer's address: " + UcxError(s));
    by_data_ep[p.data_ep] = p.id;
    return Status::Ok();
  }

  static void OnRndvDone(void* request, ucs_status_t status, size_t, void* user_data) {
    auto* r = static_cast<RndvReceive*>(user_data);
    r->done = true;
    r->status = status;
    ucp_request_free(request);
  }

  static ucs_status_t OnAm(void* arg, const void*, size_t, void* data, size_t length, const ucp_am_recv_param_t* param,
                           uint16_t am_id) {
    auto* self = static_cast<Impl*>(arg);
    const size_t limit = am_id == kControlAm ? self->options.max_control_bytes : self->options.max_bulk_bytes;
    ucp_ep_h ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : nullptr;
    if (!ep) return UCS_OK;  // unattributable: drop
    if (length > limit) {
      auto it = self->by_ep.find(ep);
      if (it == self->by_ep.end()) it = self->by_data_ep.find(ep);
      if (it != self->by_ep.end() && it != self->by_data_ep.end()) {
        self->LosePeer(it->second,
                       ProtocolError("message of " + std::to_string(length) + " bytes exceeds the limit of " +
                                     std::to_string(limit)),
                       true);
      }
      return UCS_OK;  // not received: UCX drops it
    }
    Frame frame{ep, am_id, {}};
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
      auto r = std::make_unique<RndvReceive>();
      r->frame = std::move(frame);
      r->frame.data.resize(length);
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.recv_am = OnRndvDone;
      p.user_data = r.get();
      ucp_worker_h w = am_id == kControlAm ? self->ctrl_worker : self->worker;
      ucs_status_ptr_t req = ucp_am_recv_data_nbx(w, data, r->frame.data.data(), length, &p);
      if (req == nullptr) {
        r->done = true;
      } else if (UCS_PTR_IS_ERR(req)) {
        r->done = true;
        r->status = UCS_PTR_STATUS(req);
      }
      self->rndv.push_back(std::move(r));
      return UCS_OK;
    }
    frame.data.assign(static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + length);
    self->frames.push_back(std::move(frame));
    return UCS_OK;
  }
  static ucs_status_t OnControlAm(void* arg, const void* h, size_t hl, void* d, size_t l,
                                  const ucp_am_recv_param_t* p) {
    return OnAm(arg, h, hl, d, l, p, kControlAm);
  }
  static ucs_status_t OnBulkAm(void* arg, const void* h, size_t hl, void* d, size_t l, const ucp_am_recv_param_t* p) {
    return OnAm(arg, h, hl, d, l, p, kBulkAm);
  }

  // --- peers ---

  PeerState* Find(PeerId id) {
    auto it = peers.find(id);
    return it == peers.end() ? nullptr : &it->second;
  }

  PeerId AddPeer(ucp_ep_h ep, std::string address, Phase phase) {
    PeerId id = next_id++;
    PeerState& p = peers[id];
    p.id = id;
    p.ep = ep;
    p.address = std::move(address);
    p.phase = phase;
    p.started = SteadyClock::now();
    by_ep[ep] = id;
    return id;
  }

  void LosePeer(PeerId id, Status why, bool close_ep, bool flush_close = false) {
    PeerState* p = Find(id);
    if (!p || p->phase == Phase::kLost) return;
    // Deliver what the peer said before it went away (its last message often
    // races with its disconnect in the same progress round).
    if (p->phase == Phase::kReady && p->ep) {
      for (auto it = frames.begin(); it != frames.end();) {
        if (it->ep != p->ep && it->ep != p->data_ep) {
          ++it;
          continue;
        }
        if (it->am_id == kBulkAm) {
          bulk.push_back({id, std::move(it->data)});
        } else if (auto env = DecodeEnvelope(it->data, options.max_control_bytes, p->Label());
                   env.ok() && env->has_user()) {
          control.push_back({id, env->user().kind(), std::move(*env->mutable_user()->mutable_payload())});
        }
        it = frames.erase(it);
      }
    }
    p->phase = Phase::kLost;
    p->lost = why.WithContext("peer " + p->Label());
    spdlog::warn("[{}] {}", options.name, p->lost.message());
    if (close_ep && p->ep) {
      by_ep.erase(p->ep);
      to_close.push_back({p->ep, flush_close});  // closed from Progress, not from a callback
      p->ep = nullptr;
    }
    if (close_ep && p->data_ep) {
      by_data_ep.erase(p->data_ep);
      to_close.push_back({p->data_ep, false});
      p->data_ep = nullptr;
    }
  }

  // --- sending ---

  Status SendEnvelope(PeerState& p, wire::Envelope env) {
    return SendRaw(p, kControlAm, EncodeEnvelope(std::move(env)));
  }

  // Starts an active-message send; the buffer is kept until UCX is done.
  Status SendRaw(PeerState& p, uint16_t am_id, std::string buffer, void** request_out = nullptr) {
    if (!p.ep) return p.lost.ok() ? PeerLost("peer " + p.Label() + ": not connected") : p.lost;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_REPLY;
    ucs_status_ptr_t req = ucp_am_send_nbx(p.ep, am_id, nullptr, 0, buffer.data(), buffer.size(), &param);
    if (UCS_PTR_IS_ERR(req)) return PeerLost("peer " + p.Label() + ": send failed: " + UcxError(UCS_PTR_STATUS(req)));
    if (req != nullptr) {
      pending_sends.push_back({req, std::move(buffer)});
      if (request_out) *request_out = req;
    }
    return Status::Ok();
  }

  void Refuse(PeerState& p, const std::string& reason, Status why) {
    wire::Envelope env;
    env.mutable_refused()->set_reason(reason);
    (void)SendEnvelope(p, std::move(env));
    LosePeer(p.id, std::move(why), /*close_ep=*/true, /*flush_close=*/true);
  }

  // --- the handshake state machine ---

  void HandleControl(PeerState& p, const std::vector<uint8_t>& bytes) {
    auto decoded = DecodeEnvelope(bytes, options.max_control_bytes, p.Label());
    if (!decoded.ok()) {
      Refuse(p, "protocol violation", decoded.status());
      return;
    }
    wire::Envelope& env = *decoded;
    if (env.has_refused()) {
      LosePeer(p.id, tenax::Refused("refused us: " + env.refused().reason()), true);
      return;
    }
    switch (p.phase) {
      case Phase::kAwaitHello: {
        if (!env.has_hello()) return Refuse(p, "expected hello", ProtocolError("message before hello"));
        p.their_nonce = env.hello().client_nonce();
        p.name = env.hello().node_name();
        p.my_nonce = RandomNonce();
        wire::Envelope reply;
        auto* c = reply.mutable_challenge();
        c->set_server_nonce(p.my_nonce);
        c->set_server_proof(ServerProof(options.secret, p.their_nonce, p.my_nonce));
        c->set_node_name(options.name);
        p.phase = Phase::kAwaitAuth;
        if (Status st = SendEnvelope(p, std::move(reply)); !st.ok()) LosePeer(p.id, st, true);
        return;
      }
      case Phase::kAwaitChallenge: {
        if (!env.has_challenge()) return Refuse(p, "expected challenge", ProtocolError("message before challenge"));
        p.their_nonce = env.challenge().server_nonce();
        p.name = env.challenge().node_name();
        if (!ConstantTimeEqual(env.challenge().server_proof(),
                               ServerProof(options.secret, p.my_nonce, p.their_nonce))) {
          return Refuse(p, "server failed to prove the cluster secret",
                        tenax::Refused("server does not know the cluster secret"));
        }
        wire::Envelope reply;
        reply.mutable_auth()->set_client_proof(ClientProof(options.secret, p.their_nonce, p.my_nonce));
        reply.mutable_auth()->set_worker_address(worker_address);
        p.phase = Phase::kAwaitWelcome;
        if (Status st = SendEnvelope(p, std::move(reply)); !st.ok()) LosePeer(p.id, st, true);
        return;
      }
      case Phase::kAwaitAuth: {
        if (!env.has_auth()) return Refuse(p, "expected auth", ProtocolError("message before auth"));
        if (!ConstantTimeEqual(env.auth().client_proof(), ClientProof(options.secret, p.my_nonce, p.their_nonce))) {
          return Refuse(p, "wrong cluster secret", tenax::Refused("wrong cluster secret"));
        }
        if (Status st = CreateDataEp(p, env.auth().worker_address()); !st.ok()) {
          return Refuse(p, "unusable worker address", st);
        }
        wire::Envelope reply;
        reply.mutable_welcome()->set_worker_address(worker_address);
        if (Status st = SendEnvelope(p, std::move(reply)); !st.ok()) return LosePeer(p.id, st, true);
        p.phase = Phase::kReady;
        accepted.push_back(p.id);
        spdlog::debug("[{}] accepted peer {}", options.name, p.Label());
        return;
      }
      case Phase::kAwaitWelcome:
        if (!env.has_welcome()) return Refuse(p, "expected welcome", ProtocolError("message before welcome"));
        if (Status st = CreateDataEp(p, env.welcome().worker_address()); !st.ok()) {
          return Refuse(p, "unusable worker address", st);
        }
        p.phase = Phase::kReady;
        return;
      case Phase::kReady:
        if (env.has_heartbeat()) return;
        if (!env.has_user()) return Refuse(p, "unexpected handshake message", ProtocolError("handshake after ready"));
        control.push_back({p.id, env.user().kind(), std::move(*env.mutable_user()->mutable_payload())});
        return;
      case Phase::kLost:
        return;
    }
  }

  void HandleFrame(Frame& f) {
    PeerId id = 0;
    if (auto it = by_ep.find(f.ep); it != by_ep.end()) id = it->second;
    if (auto it = by_data_ep.find(f.ep); it != by_data_ep.end()) id = it->second;
    if (id == 0) return;  // from a peer we already dropped, or unattributable
    PeerState& p = peers[id];
    if (p.phase == Phase::kLost) return;
    p.last_heard = SteadyClock::now();
    if (f.am_id == kControlAm) return HandleControl(p, f.data);
    if (p.phase != Phase::kReady) {
      return Refuse(p, "data before the handshake", ProtocolError("bulk message before the handshake"));
    }
    bulk.push_back({p.id, std::move(f.data)});
  }

  void AcceptConnection(ucp_conn_request_h request) {
    ucp_conn_request_attr_t attr{};
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    std::string address = "?";
    if (ucp_conn_request_query(request, &attr) == UCS_OK) address = FormatAddress(attr.client_address);
    ucp_ep_params_t params{};
    params.field_mask =
        UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.conn_request = request;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = OnEpError;
    params.err_handler.arg = this;
    ucp_ep_h ep = nullptr;
    ucs_status_t s = ucp_ep_create(ctrl_worker, &params, &ep);
    if (s != UCS_OK) {
      spdlog::warn("[{}] cannot accept connection from {}: {}", options.name, address, UcxError(s));
      return;
    }
    AddPeer(ep, address, Phase::kAwaitHello);
  }

  void Progress() {
    last_progress = SteadyClock::now();
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
    // Handshakes that stall are dropped: a silent client must not hold state.
    const auto now = SteadyClock::now();
    for (auto& [id, p] : peers) {
      if (p.phase == Phase::kReady && p.last_heard != SteadyClock::time_point{} &&
          now - p.last_heard > options.peer_timeout) {
        LosePeer(id, PeerLost("silent for " + std::to_string(options.peer_timeout.count()) + " ms (no heartbeat)"),
                 true);
        continue;
      }
      if (p.phase == Phase::kReady && now - p.last_heartbeat > options.heartbeat_interval) {
        p.last_heartbeat = now;
        wire::Envelope hb;
        hb.mutable_heartbeat();
        if (Status st = SendEnvelope(p, std::move(hb)); !st.ok()) LosePeer(id, st, true);
        continue;
      }
      if (p.phase != Phase::kReady && p.phase != Phase::kLost && now - p.started > options.handshake_timeout) {
        LosePeer(id,
                 DeadlineExceeded("handshake did not finish within " +
                                  std::to_string(options.handshake_timeout.count()) + " ms"),
                 true);
      }
    }
    for (const Closing& c : to_close) {
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = c.flush ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t req = ucp_ep_close_nbx(c.ep, &param);
      if (req && !UCS_PTR_IS_ERR(req)) closing.push_back(req);
    }
    to_close.clear();
    SweepGraveyard();
    ReapRequests(pending_sends, [](PendingSend& s) { return s.request; });
    ReapRequests(closing, [](void* r) { return r; });
    // Yield when nothing happens so that idle waits leave the core to the
    // peer process (2 cores, several processes).
    if (events == 0 && ++idle_spins > 64) {
      std::this_thread::yield();
    } else if (events) {
      idle_spins = 0;
    }
  }

  template <typename T, typename Get>
  static void ReapRequests(std::vector<T>& v, Get get) {
    for (size_t i = 0; i < v.size();) {
      void* req = get(v[i]);
      if (ucp_request_check_status(req) != UCS_INPROGRESS) {
        ucp_request_free(req);
        v[i] = std::move(v.back());
        v.pop_back();
      } else {
        ++i;
      }
    }
  }

  bool StillPending(void* request) const {
    for (const auto& s : pending_sends) {
      if (s.request == request) return true;
    }
    return false;
  }

  Status PeerUsable(PeerId id) {
    PeerState* p = Find(id);
    if (!p) return NotFound("unknown peer " + std::to_string(id));
    if (p->phase == Phase::kLost) return p->lost;
    if (p->phase != Phase::kReady) return FailedPrecondition("peer " + p->Label() + ": handshake not finished");
    return Status::Ok();
  }
};

// ---------------------------------------------------------------- regions

MemoryRegion::MemoryRegion(MemoryRegion&& o) noexcept { *this = std::move(o); }
MemoryRegion& MemoryRegion::operator=(MemoryRegion&& o) noexcept {
  if (this != &o) {
    Reset();
    owner_ = std::exchange(o.owner_, nullptr);
    memh_ = std::exchange(o.memh_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    descriptor_ = std::move(o.descriptor_);
  }
  return *this;
}
MemoryRegion::~MemoryRegion() { Reset(); }
void MemoryRegion::Reset() {
  if (memh_) static_cast<Node::Impl*>(owner_)->Retire(static_cast<ucp_mem_h>(memh_));
  memh_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

RemoteRegion::RemoteRegion(RemoteRegion&& o) noexcept { *this = std::move(o); }
RemoteRegion& RemoteRegion::operator=(RemoteRegion&& o) noexcept {
  if (this != &o) {
    Reset();
    peer_ = o.peer_;
    address_ = o.address_;
    size_ = o.size_;
    rkey_ = std::exchange(o.rkey_, nullptr);
  }
  return *this;
}
RemoteRegion::~RemoteRegion() { Reset(); }
void RemoteRegion::Reset() {
  if (rkey_) ucp_rkey_destroy(static_cast<ucp_rkey_h>(rkey_));
  rkey_ = nullptr;
}

Op::Op(Op&& o) noexcept { *this = std::move(o); }
Op& Op::operator=(Op&& o) noexcept {
  if (this != &o) {
    Release();
    request_ = std::exchange(o.request_, nullptr);
    status_ = std::move(o.status_);
    peer_ = o.peer_;
    complete_at_ = o.complete_at_;
  }
  return *this;
}
Op::~Op() { Release(); }
void Op::Release() {
  if (request_) ucp_request_free(request_);  // UCX completes and frees it
  request_ = nullptr;
}

// ------------------------------------------------------------------- node

Node::Node(NodeOptions options) : impl_(std::make_unique<Impl>()), options_(std::move(options)) {
  impl_->options = options_;
}

Node::~Node() {
  if (!impl_) return;
  // Live peers get a flushing close, so messages sent just before (a
  // barrier's release, a final report) still reach them; dead ones a
  // forced close. The wait below bounds both.
  for (auto& [id, p] : impl_->peers) {
    const bool flush = p.lost.ok();
    if (p.ep) impl_->to_close.push_back({p.ep, flush});
    if (p.data_ep) impl_->to_close.push_back({p.data_ep, flush});
    p.ep = nullptr;
    p.data_ep = nullptr;
  }
  impl_->by_ep.clear();
  impl_->by_data_ep.clear();
  impl_->Progress();
  auto deadline = Deadline::After(std::chrono::milliseconds(500));
  while ((!impl_->closing.empty() || !impl_->pending_sends.empty()) && !deadline.Expired()) impl_->Progress();
  for (auto& s : impl_->pending_sends) ucp_request_free(s.request);
  for (void* r : impl_->closing) ucp_request_free(r);
  for (auto& r : impl_->graveyard) ucp_mem_unmap(impl_->context, r.memh);  // every peer is closed now
  if (impl_->listener) ucp_listener_destroy(impl_->listener);
  if (impl_->worker) ucp_worker_destroy(impl_->worker);
  if (impl_->context) ucp_cleanup(impl_->context);
  if (impl_->ctrl_worker) ucp_worker_destroy(impl_->ctrl_worker);
  if (impl_->ctrl_context) ucp_cleanup(impl_->ctrl_context);
}

Result<std::unique_ptr<Node>> Node::Create(NodeOptions options) {
  TENAX_ASSIGN_OR_RETURN(options.secret, ResolveSecret(options.secret));
  std::unique_ptr<Node> node(new Node(options));
  Impl& im = *node->impl_;

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
  // UCX's default 8 KiB TCP segments cap one-sided TCP transfers near 1 GB/s
  // on loopback; 512 KiB segments reach ~4 GB/s (bench transport). UCX reads
  // these transport settings only from the environment; a user's own
  // UCX_TCP_*_SEG_SIZE wins.
  ::setenv("UCX_TCP_TX_SEG_SIZE", "512k", /*overwrite=*/0);
  ::setenv("UCX_TCP_RX_SEG_SIZE", "512k", /*overwrite=*/0);
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
                        std::pair<uint16_t, ucp_am_recv_callback_t>{kBulkAm, &Impl::OnBulkAm}}) {
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

Result<uint16_t> Node::Listen(const std::string& host, uint16_t port) {
  if (impl_->listener) return FailedPrecondition("node " + options_.name + " is already listening");
  TENAX_ASSIGN_OR_RETURN(sockaddr_storage addr, Resolve(host, port));
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  lp.sockaddr.addrlen = AddressLength(addr);
  lp.conn_handler.cb = &Impl::OnConnRequest;
  lp.conn_handler.arg = impl_.get();
  if (ucs_status_t s = ucp_listener_create(impl_->ctrl_worker, &lp, &impl_->listener); s != UCS_OK) {
    return Unavailable("cannot listen on " + host + ":" + std::to_string(port) + ": " + UcxError(s));
  }
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (ucs_status_t s = ucp_listener_query(impl_->listener, &attr); s != UCS_OK) {
    return Internal("listener query: " + UcxError(s));
  }
  const auto& ss = attr.sockaddr;
  uint16_t bound = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port)
                                            : ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  spdlog::debug("[{}] listening on {}:{}", options_.name, host, bound);
  return bound;
}

Result<PeerId> Node::Connect(const std::string& host, uint16_t port, Deadline deadline) {
  const std::string address = host + ":" + std::to_string(port);
  TENAX_ASSIGN_OR_RETURN(sockaddr_storage addr, Resolve(host, port));
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  params.sockaddr.addrlen = AddressLength(addr);
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Impl::OnEpError;
  params.err_handler.arg = impl_.get();
  ucp_ep_h ep = nullptr;
  if (ucs_status_t s = ucp_ep_create(impl_->ctrl_worker, &params, &ep); s != UCS_OK) {
    return Unavailable("cannot connect to " + address + ": " + UcxError(s));
  }
  PeerId id = impl_->AddPeer(ep, address, Phase::kAwaitChallenge);
  PeerState& p = impl_->peers[id];
  p.my_nonce = RandomNonce();
  wire::Envelope hello;
  hello.mutable_hello()->set_client_nonce(p.my_nonce);
  hello.mutable_hello()->set_node_name(options_.name);
  if (Status st = impl_->SendEnvelope(p, std::move(hello)); !st.ok()) {
    impl_->LosePeer(id, st, true);
    return st;
  }
  while (true) {
    impl_->Progress();
    PeerState& q = impl_->peers[id];
    if (q.phase == Phase::kReady) return id;
    if (q.phase == Phase::kLost) {
      if (q.lost.code() == StatusCode::kPeerLost && q.lost.message().find("unreachable") != std::string::npos) {
        return Unavailable(q.lost.message());
      }
      return q.lost;
    }
    if (deadline.Expired()) {
      impl_->LosePeer(id, DeadlineExceeded("no handshake answer"), true);
      impl_->Progress();
      return DeadlineExceeded("connect to " + address + ": no answer before the deadline");
    }
  }
}

Result<PeerId> Node::Accept(Deadline deadline) {
  while (impl_->accepted.empty()) {
    if (deadline.Expired()) return DeadlineExceeded("[" + options_.name + "] no peer connected before the deadline");
    impl_->Progress();
  }
  PeerId id = impl_->accepted.front();
  impl_->accepted.pop_front();
  return id;
}

Result<MemoryRegion> Node::Register(void* data, size_t size) {
  if (size == 0) return InvalidArgument("cannot register an empty region");
  return MapRegion(data, size, /*allocate=*/false);
}

Result<MemoryRegion> Node::Allocate(size_t size) {
  if (size == 0) return InvalidArgument("cannot allocate an empty region");
  return MapRegion(nullptr, size, /*allocate=*/true);
}

Result<MemoryRegion> Node::MapRegion(void* data, size_t size, bool allocate) {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.address = data;
  mp.length = size;
  mp.flags = allocate ? UCP_MEM_MAP_ALLOCATE : 0;
  ucp_mem_h memh = nullptr;
  if (ucs_status_t s = ucp_mem_map(impl_->context, &mp, &memh); s != UCS_OK) {
    return Unavailable(std::string("cannot ") + (allocate ? "allocate " : "register ") + std::to_string(size) +
                       " bytes: " + UcxError(s));
  }
  MemoryRegion r;  // owns memh from here on, also on the error paths below
  r.owner_ = impl_.get();
  r.memh_ = memh;
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  if (ucs_status_t s = ucp_mem_query(memh, &attr); s != UCS_OK) return Internal("mem query: " + UcxError(s));
  r.data_ = static_cast<uint8_t*>(attr.address);
  r.size_ = size;
  void* rkey = nullptr;
  size_t rkey_size = 0;
  if (ucs_status_t s = ucp_rkey_pack(impl_->context, memh, &rkey, &rkey_size); s != UCS_OK) {
    return Internal("rkey pack: " + UcxError(s));
  }
  r.descriptor_.address = reinterpret_cast<uint64_t>(r.data_);
  r.descriptor_.length = size;
  r.descriptor_.rkey.assign(static_cast<char*>(rkey), rkey_size);
  ucp_rkey_buffer_release(rkey);
  return r;
}

Result<RemoteRegion> Node::Import(PeerId peer, const RegionDescriptor& d) {
  TENAX_RETURN_IF_ERROR(impl_->PeerUsable(peer));
  PeerState& p = impl_->peers[peer];
  if (d.rkey.empty() || d.length == 0) return ProtocolError("peer " + p.Label() + ": empty region descriptor");
  ucp_rkey_h rkey = nullptr;
  if (ucs_status_t s = ucp_ep_rkey_unpack(p.data_ep, d.rkey.data(), &rkey); s != UCS_OK) {
    return ProtocolError("peer " + p.Label() + ": unusable remote key: " + UcxError(s));
  }
  RemoteRegion r;
  r.peer_ = peer;
  r.address_ = d.address;
  r.size_ = d.length;
  r.rkey_ = rkey;
  return r;
}

Result<uint8_t*> Node::MapRemote(const RemoteRegion& remote) {
  TENAX_RETURN_IF_ERROR(impl_->PeerUsable(remote.peer()));
  if (impl_->peers[remote.peer()].shaper) return Unavailable("link emulation is on for this peer");
  void* ptr = nullptr;
  ucs_status_t s = ucp_rkey_ptr(static_cast<ucp_rkey_h>(remote.rkey_), remote.address(), &ptr);
  if (s != UCS_OK || ptr == nullptr) return Unavailable("region not mappable here: " + UcxError(s));
  return static_cast<uint8_t*>(ptr);
}

Op Node::Put(const void* local, size_t size, const RemoteRegion& remote, size_t remote_offset) {
  return Rma(/*put=*/true, const_cast<void*>(local), size, remote, remote_offset);
}

Op Node::Get(void* local, size_t size, const RemoteRegion& remote, size_t remote_offset) {
  return Rma(/*put=*/false, local, size, remote, remote_offset);
}

Op Node::Rma(bool put, void* local, size_t size, const RemoteRegion& remote, size_t remote_offset) {
  const char* what = put ? "put" : "get";
  Op op;
  op.peer_ = remote.peer();
  if (Status st = impl_->PeerUsable(remote.peer()); !st.ok()) {
    op.status_ = st;
    return op;
  }
  if (remote_offset > remote.size() || size > remote.size() - remote_offset) {
    op.status_ = InvalidArgument(std::string(what) + " of " + std::to_string(size) + " bytes at offset " +
                                 std::to_string(remote_offset) + " overruns a remote region of " +
                                 std::to_string(remote.size()) + " bytes");
    return op;
  }
  PeerState& p = impl_->peers[remote.peer()];
  int transmissions = 1;
  if (p.shaper) {
    auto plan = p.shaper->Schedule(size, SteadyClock::now());
    if (plan.failed) {
      op.status_ = PeerLost("peer " + p.Label() + ": emulated link dropped every retransmission");
      return op;
    }
    transmissions = plan.transmissions;
    op.complete_at_ = plan.complete_at;
  }
  ucp_request_param_t param{};
  ucs_status_ptr_t req = nullptr;
  auto rkey = static_cast<ucp_rkey_h>(remote.rkey_);
  for (int i = 0; i < transmissions; ++i) {  // lost transmissions really move the bytes again
    if (req && !UCS_PTR_IS_ERR(req)) ucp_request_free(req);
    req = put ? ucp_put_nbx(p.data_ep, local, size, remote.address() + remote_offset, rkey, &param)
              : ucp_get_nbx(p.data_ep, local, size, remote.address() + remote_offset, rkey, &param);
  }
  if (UCS_PTR_IS_ERR(req)) {
    op.status_ = PeerLost("peer " + p.Label() + ": " + what + " failed: " + UcxError(UCS_PTR_STATUS(req)));
  } else {
    op.request_ = req;
  }
  return op;
}

Status Node::Fence(PeerId peer) {
  TENAX_RETURN_IF_ERROR(impl_->PeerUsable(peer));
  ucs_status_t s = ucp_worker_fence(impl_->worker);
  return s == UCS_OK ? Status::Ok() : Internal("fence: " + UcxError(s));
}

Status Node::Wait(Op& op, Deadline deadline) {
  impl_->MaybeProgress();
  while (true) {
    if (op.request_) {
      ucs_status_t s = ucp_request_check_status(op.request_);
      if (s != UCS_INPROGRESS) {
        ucp_request_free(op.request_);
        op.request_ = nullptr;
        if (s != UCS_OK) {
          PeerState* p = impl_->Find(op.peer_);
          op.status_ = (p && !p->lost.ok()) ? p->lost
                                            : PeerLost("peer " + (p ? p->Label() : std::to_string(op.peer_)) +
                                                       ": operation failed: " + UcxError(s));
        }
      }
    }
    if (!op.request_) {
      if (!op.status_.ok()) return op.status_;
      if (SteadyClock::now() >= op.complete_at_) return Status::Ok();
    }
    if (PeerState* p = impl_->Find(op.peer_); p && p->phase == Phase::kLost) {
      op.Release();
      op.status_ = p->lost;
      return p->lost;
    }
    if (deadline.Expired()) {
      PeerState* p = impl_->Find(op.peer_);
      return DeadlineExceeded("operation on peer " + (p ? p->Label() : std::to_string(op.peer_)) +
                              " did not complete before the deadline");
    }
    impl_->Progress();
  }
}

Status Node::WaitAll(std::vector<Op>& ops, Deadline deadline) {
  for (auto& op : ops) TENAX_RETURN_IF_ERROR(Wait(op, deadline));
  return Status::Ok();
}

Status Node::Flush(PeerId peer, Deadline deadline) {
  TENAX_RETURN_IF_ERROR(impl_->PeerUsable(peer));
  PeerState& p = impl_->peers[peer];
  ucp_request_param_t param{};
  ucs_status_ptr_t req = ucp_ep_flush_nbx(p.data_ep, &param);  // one-sided traffic rides the data endpoint
  Op op;
  op.peer_ = peer;
  if (UCS_PTR_IS_ERR(req)) return PeerLost("peer " + p.Label() + ": flush failed: " + UcxError(UCS_PTR_STATUS(req)));
  op.request_ = req;
  return Wait(op, deadline);
}

Status Node::SendControl(PeerId peer, uint32_t kind, std::string_view payload, Deadline deadline) {
  TENAX_RETURN_IF_ERROR(impl_->PeerUsable(peer));
  wire::Envelope env;
  env.mutable_user()->set_kind(kind);
  env.mutable_user()->set_payload(std::string(payload));
  std::string bytes = EncodeEnvelope(std::move(env));
  if (bytes.size() > options_.max_control_bytes) {
    return InvalidArgument("control message of " + std::to_string(bytes.size()) + " bytes exceeds the limit of " +
                           std::to_string(options_.max_control_bytes));
  }
  void* req = nullptr;
  TENAX_RETURN_IF_ERROR(impl_->SendRaw(impl_->peers[peer], kControlAm, std::move(bytes), &req));
  while (req && impl_->StillPending(req)) {
    if (Status st = PeerStatus(peer); !st.ok()) return st;
    if (deadline.Expired()) return DeadlineExceeded("control message to peer did not leave before the deadline");
    impl_->Progress();
  }
  return PeerStatus(peer);
}

Result<ControlMessage> Node::ReceiveControl(Deadline deadline, std::optional<PeerId> from,
                                            std::optional<uint32_t> kind) {
  while (true) {
    for (auto it = impl_->control.begin(); it != impl_->control.end(); ++it) {
      if ((!from || it->from == *from) && (!kind || it->kind == *kind)) {
        ControlMessage m = std::move(*it);
        impl_->control.erase(it);
        return m;
      }
    }
    if (from) {
      if (Status st = PeerStatus(*from); !st.ok()) return st;
    }
    if (deadline.Expired()) return DeadlineExceeded("[" + options_.name + "] no control message before the deadline");
    impl_->Progress();
  }
}

Status Node::SendBulk(PeerId peer, const void* data, size_t size, Deadline deadline) {
  Op op = StartBulk(peer, data, size);
  return Wait(op, deadline);
}

Op Node::StartBulk(PeerId peer, const void* data, size_t size) {
  Op op;
  op.peer_ = peer;
  if (Status st = impl_->PeerUsable(peer); !st.ok()) {
    op.status_ = st;
    return op;
  }
  if (size > options_.max_bulk_bytes) {
    op.status_ = InvalidArgument("bulk message of " + std::to_string(size) + " bytes exceeds max_bulk_bytes");
    return op;
  }
  PeerState& p = impl_->peers[peer];
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_REPLY;
  ucs_status_ptr_t req = ucp_am_send_nbx(p.data_ep, kBulkAm, nullptr, 0, data, size, &param);
  if (UCS_PTR_IS_ERR(req)) {
    op.status_ = PeerLost("peer " + p.Label() + ": send failed: " + UcxError(UCS_PTR_STATUS(req)));
  } else {
    op.request_ = req;
  }
  return op;
}

Result<BulkMessage> Node::ReceiveBulk(Deadline deadline, std::optional<PeerId> from) {
  while (true) {
    for (auto it = impl_->bulk.begin(); it != impl_->bulk.end(); ++it) {
      if (!from || it->from == *from) {
        BulkMessage m = std::move(*it);
        impl_->bulk.erase(it);
        return m;
      }
    }
    if (from) {
      if (Status st = PeerStatus(*from); !st.ok()) return st;
    }
    if (deadline.Expired()) return DeadlineExceeded("[" + options_.name + "] no bulk message before the deadline");
    impl_->Progress();
  }
}

void Node::SetLinkShape(PeerId peer, LinkShape shape) {
  if (PeerState* p = impl_->Find(peer)) {
    if (shape.is_ideal()) {
      p->shaper.reset();
    } else {
      p->shaper.emplace(shape, peer);
    }
  }
}

Status Node::PeerStatus(PeerId peer) const { return impl_->PeerUsable(peer); }

Result<PeerInfo> Node::Info(PeerId peer) const {
  PeerState* p = impl_->Find(peer);
  if (!p) return NotFound("unknown peer " + std::to_string(peer));
  return PeerInfo{p->name, p->address, p->phase == Phase::kReady, p->lost};
}

void Node::Disconnect(PeerId peer, Deadline deadline) {
  PeerState* p = impl_->Find(peer);
  if (!p || !p->ep) return;
  if (p->phase == Phase::kReady) (void)Flush(peer, deadline);
  p = impl_->Find(peer);
  if (p && p->ep) {
    impl_->by_ep.erase(p->ep);
    impl_->to_close.push_back({p->ep, true});  // Disconnect: deliver what was sent
    p->ep = nullptr;
    if (p->data_ep) {
      impl_->by_data_ep.erase(p->data_ep);
      impl_->to_close.push_back({p->data_ep, true});
      p->data_ep = nullptr;
    }
    p->phase = Phase::kLost;
    p->lost = Unavailable("peer " + p->Label() + ": disconnected by this node");
  }
  impl_->Progress();
}

void Node::Progress() { impl_->Progress(); }

}  // namespace tenax::net

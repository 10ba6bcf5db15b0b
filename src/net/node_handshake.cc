// The control plane: listening, connecting, accepting, and the authenticated
// handshake (see auth.h and docs/architecture.md) that every connection runs
// before it can send a message or learn a worker address.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cstring>

#include "node_internal.h"
#include "tenax/net/auth.h"
#include "tenax/net/control_codec.h"

namespace tenax::net {
namespace {

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

}  // namespace

void Node::Impl::OnConnRequest(ucp_conn_request_h request, void* arg) {
  static_cast<Impl*>(arg)->conn_requests.push_back(request);
}

void Node::Impl::AcceptConnection(ucp_conn_request_h request) {
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

void Node::Impl::Refuse(PeerState& p, const std::string& reason, Status why) {
  wire::Envelope env;
  env.mutable_refused()->set_reason(reason);
  (void)SendEnvelope(p, std::move(env));
  LosePeer(p.id, std::move(why), /*close_ep=*/true, /*flush_close=*/true);
}

void Node::Impl::ShapeEmulatedLink(PeerState& p) {
  if (!options.emulated_links || options.emulated_host.empty() || p.emulated_host.empty()) return;
  const LinkShape shape = options.emulated_links->Between(options.emulated_host, p.emulated_host);
  if (shape.is_ideal()) return;
  p.shaper.emplace(shape, p.id);
  spdlog::debug("[{}] emulated link {} -> {} ({}): delay {} us, loss {}, {} B/s", options.name, options.emulated_host,
                p.emulated_host, p.Label(), shape.delay.count(), shape.loss, shape.bandwidth_bytes_per_second);
}

void Node::Impl::HandleControl(PeerState& p, const std::vector<uint8_t>& bytes) {
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
      p.emulated_host = env.hello().emulated_host();
      p.tcp_streams = AgreedStreams(env.hello().tcp_streams());
      p.my_nonce = RandomNonce();
      wire::Envelope reply;
      auto* c = reply.mutable_challenge();
      c->set_server_nonce(p.my_nonce);
      c->set_server_proof(ServerProof(options.secret, p.their_nonce, p.my_nonce));
      c->set_node_name(options.name);
      c->set_emulated_host(options.emulated_host);
      c->set_tcp_streams(static_cast<uint32_t>(options.tcp_streams));
      p.phase = Phase::kAwaitAuth;
      if (Status st = SendEnvelope(p, std::move(reply)); !st.ok()) LosePeer(p.id, st, true);
      return;
    }
    case Phase::kAwaitChallenge: {
      if (!env.has_challenge()) return Refuse(p, "expected challenge", ProtocolError("message before challenge"));
      p.their_nonce = env.challenge().server_nonce();
      p.name = env.challenge().node_name();
      p.emulated_host = env.challenge().emulated_host();
      p.tcp_streams = AgreedStreams(env.challenge().tcp_streams());
      if (!ConstantTimeEqual(env.challenge().server_proof(), ServerProof(options.secret, p.my_nonce, p.their_nonce))) {
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
      ShapeEmulatedLink(p);
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
      ShapeEmulatedLink(p);
      return;
    case Phase::kReady:
      if (env.has_heartbeat()) return;
      if (!env.has_user()) return Refuse(p, "unexpected handshake message", ProtocolError("handshake after ready"));
      QueueControl(p, env.user().kind(), std::move(*env.mutable_user()->mutable_payload()));
      return;
    case Phase::kLost:
      return;
  }
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
  impl_->listen_port = bound;
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
  hello.mutable_hello()->set_emulated_host(options_.emulated_host);
  hello.mutable_hello()->set_tcp_streams(static_cast<uint32_t>(options_.tcp_streams));
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

}  // namespace tenax::net

// Messages over UCX active messages: receipt (callbacks only copy and queue),
// attribution to peers, control messages (registered kinds, a bounded queue
// of unread ones) and bulk messages.
#include <spdlog/spdlog.h>

#include <cstdio>

#include "node_internal.h"
#include "tenax/net/control_codec.h"
#include "tenax/net/message_kinds.h"

namespace tenax::net {

ucs_status_t Node::Impl::OnAm(void* arg, const void*, size_t, void* data, size_t length,
                              const ucp_am_recv_param_t* param, uint16_t am_id) {
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

ucs_status_t Node::Impl::OnControlAm(void* arg, const void* h, size_t hl, void* d, size_t l,
                                     const ucp_am_recv_param_t* p) {
  return OnAm(arg, h, hl, d, l, p, kControlAm);
}

ucs_status_t Node::Impl::OnBulkAm(void* arg, const void* h, size_t hl, void* d, size_t l,
                                  const ucp_am_recv_param_t* p) {
  return OnAm(arg, h, hl, d, l, p, kBulkAm);
}

void Node::Impl::OnRndvDone(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* r = static_cast<RndvReceive*>(user_data);
  r->done = true;
  r->status = status;
  ucp_request_free(request);
}

Status Node::Impl::SendEnvelope(PeerState& p, wire::Envelope env) {
  return SendRaw(p, kControlAm, EncodeEnvelope(std::move(env)));
}

Status Node::Impl::SendRaw(PeerState& p, uint16_t am_id, std::string buffer, void** request_out) {
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

bool Node::Impl::StillPending(void* request) const {
  for (const auto& s : pending_sends) {
    if (s.request == request) return true;
  }
  return false;
}

void Node::Impl::HandleFrame(Frame& f) {
  PeerId id = 0;
  if (auto it = by_ep.find(f.ep); it != by_ep.end()) id = it->second;
  if (auto it = by_data_ep.find(f.ep); it != by_data_ep.end()) id = it->second;
  if (id == 0) return;  // from a peer we already dropped, or unattributable
  PeerState& p = peers[id];
  if (p.phase == Phase::kLost) return;
  if (!p.held_frames.empty() || p.Dropped(SteadyClock::now())) {
    p.held_frames.push_back(std::move(f));  // the link drops everything now: nothing heard
    holding_frames = true;
    return;
  }
  DispatchFrame(p, f);
}

void Node::Impl::DispatchFrame(PeerState& p, Frame& f) {
  p.last_heard = SteadyClock::now();
  if (f.am_id == kControlAm) return HandleControl(p, f.data);
  if (p.phase != Phase::kReady) {
    return Refuse(p, "data before the handshake", ProtocolError("bulk message before the handshake"));
  }
  bulk.push_back({p.id, std::move(f.data)});
}

size_t Node::Impl::ReleaseHeldFrames() {
  if (!holding_frames) return 0;  // the common case: no link fault held anything
  size_t released = 0;
  const auto now = SteadyClock::now();
  std::vector<PeerId> ids;
  for (auto& [id, p] : peers) {
    if (!p.held_frames.empty()) ids.push_back(id);
  }
  for (PeerId id : ids) {
    PeerState* p = Find(id);
    if (!p) continue;
    if (p->phase == Phase::kLost) {  // lost behind the fault: what it sent never arrived
      p->held_frames.clear();
      continue;
    }
    if (p->Dropped(now)) continue;
    // The puts held with these frames first (their signals follow them).
    if (std::any_of(p->held.begin(), p->held.end(), [now](const PeerState::Held& h) { return h.due <= now; })) {
      continue;
    }
    while (!p->held_frames.empty()) {
      Frame f = std::move(p->held_frames.front());
      p->held_frames.pop_front();
      ++released;
      DispatchFrame(*p, f);
      p = Find(id);  // dispatching may lose the peer
      if (!p || p->phase == Phase::kLost) break;
    }
  }
  holding_frames = std::any_of(peers.begin(), peers.end(), [](const auto& e) { return !e.second.held_frames.empty(); });
  return released;
}

void Node::Impl::QueueControl(PeerState& p, uint32_t kind, std::string payload) {
  if (p.unread_messages + 1 > options.max_unread_control_messages ||
      p.unread_bytes + payload.size() > options.max_unread_control_bytes) {
    // A peer that sends faster than this node reads would grow the queue
    // without bound: it is lost, loudly, rather than silently thinned out.
    const PeerId id = p.id;
    LosePeer(id,
             ProtocolError("flooded this node: " + std::to_string(p.unread_messages) + " control messages (" +
                           std::to_string(p.unread_bytes) + " bytes) unread, the limit is " +
                           std::to_string(options.max_unread_control_messages) + " messages / " +
                           std::to_string(options.max_unread_control_bytes) + " bytes (NodeOptions)"),
             /*close_ep=*/true, /*flush_close=*/false, /*deliver=*/false);
    DropUnreadControl(id);
    return;
  }
  ++p.unread_messages;
  p.unread_bytes += payload.size();
  control.push_back({p.id, kind, std::move(payload)});
}

void Node::Impl::DropUnreadControl(PeerId id) {
  std::erase_if(control, [id](const ControlMessage& m) { return m.from == id; });
  if (PeerState* p = Find(id)) {
    p->unread_messages = 0;
    p->unread_bytes = 0;
  }
}

Status Node::SendControl(PeerId peer, uint32_t kind, std::string_view payload, Deadline deadline) {
  if (!IsRegisteredKind(kind)) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%x", kind);
    return InvalidArgument(std::string("control message kind ") + hex +
                           " is not in the registry (tenax/net/message_kinds.h)");
  }
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
        if (PeerState* p = impl_->Find(m.from)) {
          --p->unread_messages;
          p->unread_bytes -= m.payload.size();
        }
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

}  // namespace tenax::net

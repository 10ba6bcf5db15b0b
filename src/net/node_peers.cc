// Peer life cycle and failure detection: the peer table, heartbeats, silent
// peers and stalled handshakes, lost peers, disconnecting and closing
// endpoints.
#include <spdlog/spdlog.h>

#include "node_internal.h"
#include "tenax/net/control_codec.h"

namespace tenax::net {

void Node::Impl::OnEpError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* self = static_cast<Impl*>(arg);
  auto it = self->by_ep.find(ep);
  if (it == self->by_ep.end()) return;
  self->LosePeer(it->second, PeerLost("connection lost (" + UcxError(status) + ")"), /*close_ep=*/true);
}

PeerState* Node::Impl::Find(PeerId id) {
  auto it = peers.find(id);
  return it == peers.end() ? nullptr : &it->second;
}

PeerId Node::Impl::AddPeer(ucp_ep_h ep, std::string address, Phase phase) {
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

void Node::Impl::LosePeer(PeerId id, Status why, bool close_ep, bool flush_close, bool deliver) {
  PeerState* p = Find(id);
  if (!p || p->phase == Phase::kLost) return;
  // Deliver what the peer said before it went away (its last message often
  // races with its disconnect in the same progress round), within the bounds
  // on unread messages (the peer is lost either way).
  if (deliver && p->phase == Phase::kReady && p->ep) {
    for (auto it = frames.begin(); it != frames.end();) {
      if (it->ep != p->ep && it->ep != p->data_ep) {
        ++it;
        continue;
      }
      if (it->am_id == kBulkAm) {
        bulk.push_back({id, std::move(it->data)});
      } else if (auto env = DecodeEnvelope(it->data, options.max_control_bytes, p->Label());
                 env.ok() && env->has_user()) {
        const size_t bytes = env->user().payload().size();
        if (p->unread_messages < options.max_unread_control_messages &&
            p->unread_bytes + bytes <= options.max_unread_control_bytes) {
          ++p->unread_messages;
          p->unread_bytes += bytes;
          control.push_back({id, env->user().kind(), std::move(*env->mutable_user()->mutable_payload())});
        }
      }
      it = frames.erase(it);
    }
  }
  p->phase = Phase::kLost;
  // `why` may come from a call that already named the peer ("peer X: not
  // connected"): name it once.
  const std::string who = "peer " + p->Label();
  p->lost = why.message().rfind(who, 0) == 0 ? why : why.WithContext(who);
  spdlog::warn("[{}] {}", options.name, p->lost.message());
  if (close_ep && p->ep) {
    by_ep.erase(p->ep);
    to_close.push_back({p->ep, flush_close});  // closed from Progress, not from a callback
    p->ep = nullptr;
  }
  if (close_ep && p->data_ep) CloseDataEp(*p);
}

void Node::Impl::CloseDataEp(PeerState& p) {
  p.stream_eps.push_back(p.data_ep);
  for (ucp_ep_h ep : p.stream_eps) {
    by_data_ep.erase(ep);
    to_close.push_back({ep, /*flush=*/true, /*data=*/true, p.id});  // error mode NONE: flush only (Closing)
    ++p.data_closing;
  }
  p.stream_eps.clear();
  p.data_ep = nullptr;
}

void Node::Impl::ReapDataCloses() {
  for (size_t i = 0; i < closing_data.size();) {
    auto [req, peer] = closing_data[i];
    if (ucp_request_check_status(req) == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    ucp_request_free(req);
    if (PeerState* p = Find(peer); p && p->data_closing > 0) --p->data_closing;
    closing_data[i] = closing_data.back();
    closing_data.pop_back();
  }
}

void Node::Impl::ExcuseOwnStall(SteadyClock::time_point now) {
  const SteadyClock::time_point previous = last_peer_check;
  last_peer_check = now;
  if (previous == SteadyClock::time_point{}) return;
  const SteadyClock::duration gap = now - previous, allowance = options.peer_timeout / 2;
  if (gap <= allowance) return;
  const SteadyClock::duration excused = gap - allowance;
  size_t ready = 0;
  for (auto& [id, p] : peers) {
    if (p.phase == Phase::kLost) continue;
    if (p.phase == Phase::kReady) ++ready;
    if (p.last_heard != SteadyClock::time_point{}) p.last_heard = std::min(now, p.last_heard + excused);
    p.started = std::min(now, p.started + excused);
  }
  if (ready == 0) return;
  spdlog::warn("[{}] this node made no progress for {} ms (its process stopped or starved, or a slow disk); "
               "the silence of its {} peer(s) is counted without the last {} ms of that gap",
               options.name, std::chrono::duration_cast<std::chrono::milliseconds>(gap).count(), ready,
               std::chrono::duration_cast<std::chrono::milliseconds>(excused).count());
}

void Node::Impl::CheckPeers() {
  // Handshakes that stall are dropped: a silent client must not hold state.
  const auto now = SteadyClock::now();
  // Measured between two checks, not two Progress calls: a process stopped
  // inside Progress (most likely in UCX's progress) resumes in this check.
  ExcuseOwnStall(now);
  for (auto& [id, p] : peers) {
    if (p.phase == Phase::kReady && p.last_heard != SteadyClock::time_point{} &&
        now - p.last_heard > options.peer_timeout) {
      LosePeer(id, PeerLost("silent for " + std::to_string(options.peer_timeout.count()) + " ms (no heartbeat)"), true);
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
               DeadlineExceeded("handshake did not finish within " + std::to_string(options.handshake_timeout.count()) +
                                " ms"),
               true);
    }
  }
}

void Node::Impl::CloseEndpoints() {
  for (const Closing& c : to_close) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = c.flush ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t req = ucp_ep_close_nbx(c.ep, &param);
    if (UCS_PTR_IS_ERR(req)) {
      // A flushing close of a failed endpoint still closes it (UCX 1.13
      // returns the flush's error); a refused forced close would not.
      spdlog::debug("[{}] endpoint close: {}", options.name, UcxError(UCS_PTR_STATUS(req)));
    }
    if (req && !UCS_PTR_IS_ERR(req)) {
      if (c.data) {
        closing_data.emplace_back(req, c.peer);
      } else {
        closing.push_back(req);
      }
    } else if (c.data) {
      if (PeerState* p = Find(c.peer); p && p->data_closing > 0) --p->data_closing;  // closed at once
    }
  }
  to_close.clear();
}

Status Node::Impl::PeerUsable(PeerId id) {
  PeerState* p = Find(id);
  if (!p) return NotFound("unknown peer " + std::to_string(id));
  if (p->phase == Phase::kLost) return p->lost;
  if (p->phase != Phase::kReady) return FailedPrecondition("peer " + p->Label() + ": handshake not finished");
  return Status::Ok();
}

Status Node::PeerStatus(PeerId peer) const { return impl_->PeerUsable(peer); }

Result<PeerInfo> Node::Info(PeerId peer) const {
  PeerState* p = impl_->Find(peer);
  if (!p) return NotFound("unknown peer " + std::to_string(peer));
  return PeerInfo{p->name, p->address, p->phase == Phase::kReady, p->lost, p->emulated_host};
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
    if (p->data_ep) impl_->CloseDataEp(*p);
    p->phase = Phase::kLost;
    p->lost = Unavailable("peer " + p->Label() + ": disconnected by this node");
  }
  impl_->Progress();
}

}  // namespace tenax::net

#include "tenax/comm/group.h"

#include <spdlog/spdlog.h>

#include "tenax/comm/channel_codec.h"

namespace tenax::comm {

std::string Group::Describe(int rank) const {
  std::string s = "rank " + std::to_string(rank);
  if (rank >= 0 && static_cast<size_t>(rank) < members_.size() && !members_[static_cast<size_t>(rank)].name.empty()) {
    s += " (" + members_[static_cast<size_t>(rank)].name + ")";
  }
  return s;
}

Status Group::Health() const {
  for (int r = 0; r < world(); ++r) {
    if (r == rank_) continue;
    if (Status st = node_.PeerStatus(peer(r)); !st.ok()) {
      return Status(st.code(), Describe(r) + " is gone: " + st.message());
    }
  }
  return Status::Ok();
}

Status Group::Barrier(Deadline deadline) {
  const std::string token = std::to_string(++barriers_);
  auto expect = [&](int from) -> Status {
    auto msg = node_.ReceiveControl(deadline, peer(from), kBarrierKind);
    if (!msg.ok()) return Status(msg.status().code(), "barrier " + token + ": " + Describe(from) + ": " + msg.status().message());
    if (msg->payload != token) return ProtocolError("barrier " + token + ": " + Describe(from) + " is at barrier " + msg->payload);
    return Status::Ok();
  };
  if (rank_ == 0) {
    for (int r = 1; r < world(); ++r) TENAX_RETURN_IF_ERROR(expect(r));
    for (int r = 1; r < world(); ++r) TENAX_RETURN_IF_ERROR(node_.SendControl(peer(r), kBarrierKind, token, deadline));
    return Status::Ok();
  }
  TENAX_RETURN_IF_ERROR(node_.SendControl(peer(0), kBarrierKind, token, deadline));
  return expect(0);
}

std::unique_ptr<Group> Group::FromPeers(net::Node& node, int rank, std::vector<net::PeerId> peers,
                                        std::vector<GroupMember> members) {
  return std::unique_ptr<Group>(new Group(node, rank, std::move(peers), std::move(members)));
}

Result<std::unique_ptr<Group>> Group::Connect(net::Node& node, const std::string& job_id, int rank,
                                              std::vector<GroupMember> members, Deadline deadline) {
  const int world = static_cast<int>(members.size());
  if (rank < 0 || rank >= world) {
    return InvalidArgument("rank " + std::to_string(rank) + " outside a group of " + std::to_string(world));
  }
  std::vector<net::PeerId> peers(static_cast<size_t>(world), 0);
  const std::string hello = EncodeMeshHello(job_id, static_cast<uint32_t>(rank), static_cast<uint32_t>(world));
  // Dial upwards. A dialled member may itself be busy dialling; its Node
  // still serves our handshake because every wait drives progress.
  for (int r = rank + 1; r < world; ++r) {
    const auto& m = members[static_cast<size_t>(r)];
    auto peer = node.Connect(m.host, m.port, deadline);
    if (!peer.ok()) {
      return Status(peer.status().code(), "cannot reach rank " + std::to_string(r) + " at " + m.host + ":" +
                                              std::to_string(m.port) + ": " + peer.status().message());
    }
    TENAX_RETURN_IF_ERROR(node.SendControl(*peer, kMeshHelloKind, hello, deadline));
    peers[static_cast<size_t>(r)] = *peer;
  }
  // Accept downwards: whoever passes the handshake must introduce itself.
  int missing = rank;
  while (missing > 0) {
    auto peer = node.Accept(deadline);
    if (!peer.ok()) {
      std::string who;
      for (int r = 0; r < rank; ++r) {
        if (peers[static_cast<size_t>(r)] == 0) who += (who.empty() ? "" : ", ") + std::to_string(r);
      }
      return Status(peer.status().code(), "rank(s) " + who + " never connected to rank " + std::to_string(rank) +
                                              ": " + peer.status().message());
    }
    auto msg = node.ReceiveControl(deadline, *peer, kMeshHelloKind);
    if (!msg.ok()) return msg.status();
    auto info = node.Info(*peer);
    const std::string label = info.ok() ? info->address : std::to_string(*peer);
    TENAX_ASSIGN_OR_RETURN(wire::MeshHello h, DecodeMeshHello(msg->payload, label));
    std::string refusal;
    if (h.job_id() != job_id) {
      refusal = "peer " + label + " belongs to job '" + h.job_id() + "', not '" + job_id + "'";
    } else if (static_cast<int>(h.world()) != world) {
      refusal = "peer " + label + " expects " + std::to_string(h.world()) + " ranks, not " + std::to_string(world);
    } else if (static_cast<int>(h.rank()) >= rank || peers[h.rank()] != 0) {
      refusal = "peer " + label + " claims rank " + std::to_string(h.rank()) + ", which is not expected here";
    }
    if (!refusal.empty()) {
      spdlog::warn("rank {}: {}; disconnecting it", rank, refusal);
      node.Disconnect(*peer, Deadline::After(std::chrono::milliseconds(200)));
      continue;
    }
    peers[h.rank()] = *peer;
    --missing;
  }
  return std::unique_ptr<Group>(new Group(node, rank, std::move(peers), std::move(members)));
}

}  // namespace tenax::comm

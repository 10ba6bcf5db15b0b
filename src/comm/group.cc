#include "tenax/comm/group.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

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
                                        std::vector<GroupMember> members, uint64_t generation) {
  return std::unique_ptr<Group>(new Group(node, rank, std::move(peers), std::move(members), generation));
}

std::optional<net::ControlMessage> Group::TakeEarly(net::PeerId from, uint32_t kind) {
  for (auto it = early_.begin(); it != early_.end(); ++it) {
    if (it->from == from && it->kind == kind) {
      net::ControlMessage m = std::move(*it);
      early_.erase(it);
      return m;
    }
  }
  return std::nullopt;
}

namespace {

// How often a forming group consults its interrupt, and how long it waits
// before dialling again a peer still at an older generation.
constexpr auto kInterruptEvery = std::chrono::milliseconds(100);

// Why a peer's hello does not belong in this group ("" if it does).
// `expected_rank` < 0: any rank in `accept_from` not yet connected (`peers`).
std::string Mismatch(const wire::MeshHello& h, const std::string& label, const std::string& job_id, uint64_t generation,
                     int rank, int world, int expected_rank, const std::vector<net::PeerId>& peers,
                     const std::vector<bool>& accept_from) {
  const std::string who = "rank " + std::to_string(h.rank()) + " at " + label;
  if (h.job_id() != job_id) return "peer " + label + " belongs to job '" + h.job_id() + "', not '" + job_id + "'";
  if (static_cast<int>(h.world()) != world) {
    return "peer " + label + " expects " + std::to_string(h.world()) + " ranks, not " + std::to_string(world);
  }
  if (h.generation() != generation) {
    return who + " is at membership generation " + std::to_string(h.generation()) + ", rank " + std::to_string(rank) +
           " at generation " + std::to_string(generation);
  }
  const size_t r = h.rank();
  const bool expected = expected_rank >= 0 ? static_cast<int>(r) == expected_rank
                                           : r < accept_from.size() && accept_from[r] && peers[r] == 0;
  if (!expected) return "peer " + label + " claims rank " + std::to_string(h.rank()) + ", which is not expected here";
  return "";
}

}  // namespace

Result<std::unique_ptr<Group>> Group::Connect(net::Node& node, const std::string& job_id, uint64_t generation, int rank,
                                              std::vector<GroupMember> members, Deadline deadline,
                                              const Interrupt& interrupt) {
  for (auto& m : members) m.joining = true;  // every pair is new: the lower rank dials
  return Form(node, job_id, generation, rank, std::move(members), {}, deadline, interrupt);
}

std::map<uint32_t, net::PeerId> Group::ConnectionsById() const {
  std::map<uint32_t, net::PeerId> out;
  for (int r = 0; r < world(); ++r) {
    if (r != rank_ && static_cast<size_t>(r) < members_.size() && peer(r) != 0) {
      out[members_[static_cast<size_t>(r)].id] = peer(r);
    }
  }
  return out;
}

Result<std::unique_ptr<Group>> Group::Reform(Group& previous, const std::map<uint32_t, net::PeerId>& known,
                                             const std::string& job_id, uint64_t generation, int rank,
                                             std::vector<GroupMember> members, Deadline deadline,
                                             const Interrupt& interrupt) {
  if (rank < 0 || static_cast<size_t>(rank) >= members.size()) {
    return InvalidArgument("rank " + std::to_string(rank) + " outside a group of " + std::to_string(members.size()));
  }
  std::vector<net::PeerId> reuse(members.size(), 0);
  if (!members[static_cast<size_t>(rank)].joining) {
    for (size_t r = 0; r < members.size(); ++r) {
      if (static_cast<int>(r) == rank || members[r].joining) continue;
      auto it = known.find(members[r].id);
      if (it == known.end()) {
        return FailedPrecondition("rank " + std::to_string(r) + " (" + members[r].name +
                                  ") is not joining generation " + std::to_string(generation) +
                                  " but this member has no connection to it from the stable generation");
      }
      if (Status st = previous.node_.PeerStatus(it->second); !st.ok()) {
        return PeerLost("rank " + std::to_string(r) + " (" + members[r].name + ") of generation " +
                        std::to_string(generation) + " is gone: " + st.message());
      }
      reuse[r] = it->second;
    }
  }
  TENAX_ASSIGN_OR_RETURN(auto group, Form(previous.node_, job_id, generation, rank, std::move(members),
                                          std::move(reuse), deadline, interrupt));
  group->early_ = std::move(previous.early_);
  return group;
}

Result<std::unique_ptr<Group>> Group::Form(net::Node& node, const std::string& job_id, uint64_t generation, int rank,
                                           std::vector<GroupMember> members, std::vector<net::PeerId> reuse,
                                           Deadline deadline, const Interrupt& interrupt) {
  const int world = static_cast<int>(members.size());
  if (rank < 0 || rank >= world) {
    return InvalidArgument("rank " + std::to_string(rank) + " outside a group of " + std::to_string(world));
  }
  std::vector<net::PeerId> peers(static_cast<size_t>(world), 0);
  if (!reuse.empty()) peers = reuse;
  const GroupMember& me = members[static_cast<size_t>(rank)];
  // Which new connections this rank dials and which it accepts.
  std::vector<bool> dial(static_cast<size_t>(world), false), accept_from(static_cast<size_t>(world), false);
  for (int r = 0; r < world; ++r) {
    if (r == rank || peers[static_cast<size_t>(r)] != 0) continue;
    const GroupMember& other = members[static_cast<size_t>(r)];
    const bool dials = me.joining != other.joining ? me.joining : rank < r;
    (dials ? dial : accept_from)[static_cast<size_t>(r)] = true;
  }
  const std::string hello =
      EncodeMeshHello(job_id, static_cast<uint32_t>(rank), static_cast<uint32_t>(world), generation);
  auto address = [&](int r) {
    const auto& m = members[static_cast<size_t>(r)];
    return m.host + ":" + std::to_string(m.port);
  };
  // Dial. A dialled member may itself be busy dialling; its Node still
  // serves our handshake because every wait drives progress.
  auto dial_rank = [&](int r) -> Status {
    auto peer = node.Connect(members[static_cast<size_t>(r)].host, members[static_cast<size_t>(r)].port, deadline);
    if (!peer.ok()) {
      return Status(peer.status().code(),
                    "cannot reach rank " + std::to_string(r) + " at " + address(r) + ": " + peer.status().message());
    }
    TENAX_RETURN_IF_ERROR(node.SendControl(*peer, kMeshHelloKind, hello, deadline));
    peers[static_cast<size_t>(r)] = *peer;
    return Status::Ok();
  };
  for (int r = 0; r < world; ++r) {
    if (dial[static_cast<size_t>(r)]) TENAX_RETURN_IF_ERROR(dial_rank(r));
  }
  // Accept: whoever passes the handshake must introduce itself, and hears
  // our hello in return, so a refused peer learns why. A refused peer does
  // not end the wait: the member it posed as may still come.
  std::string refusals;
  int missing = static_cast<int>(std::count(accept_from.begin(), accept_from.end(), true));
  while (missing > 0) {
    auto peer = node.Accept(interrupt ? deadline.Earlier(Deadline::After(kInterruptEvery)) : deadline);
    if (!peer.ok() && interrupt && peer.status().code() == StatusCode::kDeadlineExceeded && !deadline.Expired()) {
      TENAX_RETURN_IF_ERROR(interrupt());
      continue;
    }
    if (!peer.ok()) {
      std::string who;
      for (int r = 0; r < world; ++r) {
        if (accept_from[static_cast<size_t>(r)] && peers[static_cast<size_t>(r)] == 0) {
          who += (who.empty() ? "" : ", ") + std::to_string(r);
        }
      }
      return Status(peer.status().code(), "rank(s) " + who + " never connected to rank " + std::to_string(rank) + ": " +
                                              peer.status().message() +
                                              (refusals.empty() ? "" : " (refused: " + refusals + ")"));
    }
    auto msg = node.ReceiveControl(deadline, *peer, kMeshHelloKind);
    if (!msg.ok()) return msg.status();
    auto info = node.Info(*peer);
    const std::string label = info.ok() ? info->address : std::to_string(*peer);
    TENAX_ASSIGN_OR_RETURN(wire::MeshHello h, DecodeMeshHello(msg->payload, label));
    const std::string refusal = Mismatch(h, label, job_id, generation, rank, world, -1, peers, accept_from);
    (void)node.SendControl(*peer, kMeshHelloKind, hello, deadline);  // a peer gone meanwhile fails below or later
    if (h.job_id() == job_id && h.generation() > generation) {
      // Our generation is superseded: the peer dials again once we caught up.
      node.Disconnect(*peer, Deadline::After(std::chrono::milliseconds(200)));
      return Aborted("generation " + std::to_string(generation) + " is superseded: rank " + std::to_string(h.rank()) +
                     " at " + label + " is at membership generation " + std::to_string(h.generation()));
    }
    if (!refusal.empty()) {
      spdlog::warn("rank {}: {}; disconnecting it", rank, refusal);
      refusals += (refusals.empty() ? "" : "; ") + refusal;
      node.Disconnect(*peer, Deadline::After(std::chrono::milliseconds(200)));
      continue;
    }
    peers[h.rank()] = *peer;
    --missing;
  }
  // The answers of the ranks we dialled: each checks us as we checked ours.
  for (int r = 0; r < world; ++r) {
    if (!dial[static_cast<size_t>(r)]) continue;
    while (true) {
      const net::PeerId peer = peers[static_cast<size_t>(r)];
      auto msg = node.ReceiveControl(deadline, peer, kMeshHelloKind);
      if (!msg.ok()) {
        return Status(msg.status().code(), "rank " + std::to_string(r) + " at " + address(r) +
                                               " did not answer our hello (it refuses a peer of another job or "
                                               "generation, and says why in its log): " +
                                               msg.status().message());
      }
      TENAX_ASSIGN_OR_RETURN(wire::MeshHello h, DecodeMeshHello(msg->payload, address(r)));
      if (h.job_id() == job_id && h.generation() < generation) {
        // Still at an older generation (before its step boundary): it
        // refused this connection; dial it again after a moment.
        spdlog::info("rank {}: rank {} at {} is still at membership generation {} (this is {}); dialling it again",
                     rank, r, address(r), h.generation(), generation);
        node.Disconnect(peer, Deadline::After(std::chrono::milliseconds(200)));
        const Deadline pause = deadline.Earlier(Deadline::After(kInterruptEvery));
        while (!pause.Expired()) {
          node.Progress();
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (interrupt) TENAX_RETURN_IF_ERROR(interrupt());
        if (deadline.Expired()) {
          return DeadlineExceeded("rank " + std::to_string(r) + " at " + address(r) +
                                  " stayed at membership generation " + std::to_string(h.generation()) +
                                  " until the deadline (this is generation " + std::to_string(generation) + ")");
        }
        TENAX_RETURN_IF_ERROR(dial_rank(r));
        continue;
      }
      if (std::string refusal = Mismatch(h, address(r), job_id, generation, rank, world, r, peers, accept_from);
          !refusal.empty()) {
        return FailedPrecondition("rank " + std::to_string(rank) + " refused by its group: " + refusal);
      }
      break;
    }
  }
  return std::unique_ptr<Group>(new Group(node, rank, std::move(peers), std::move(members), generation));
}

}  // namespace tenax::comm

// A collective group: `world` ranks, every pair connected by a net::Node
// connection, each connection introduced by an exchange of MeshHellos
// naming the job, the rank and the membership generation (the
// coordinator's Roster.generation): a member of an older (or newer)
// membership is refused, so it cannot write into this group's buffers.
// Collectives (allreduce.h) run over a Group.
//
// Threading: a Group uses its Node from the Node's thread only.
// Failures: Connect fails with DeadlineExceeded naming the ranks that never
// arrived (and the peers refused meanwhile: another job, another
// generation, a clashing rank; each disconnected), and a refused dialler
// with FailedPrecondition naming the refusing rank and both generations;
// later, a lost member surfaces as the Node's PeerLost status for that peer.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tenax/net/message_kinds.h"
#include "tenax/net/node.h"

namespace tenax::comm {

// Control-message kinds of groups and collectives (registered in net/message_kinds.h).
inline constexpr uint32_t kMeshHelloKind = net::KindValue(net::MessageKind::kMeshHello);
inline constexpr uint32_t kCollectiveOfferKind = net::KindValue(net::MessageKind::kCollectiveOffer);
inline constexpr uint32_t kBarrierKind = net::KindValue(net::MessageKind::kBarrier);

struct GroupMember {
  std::string host;   // where the member's Node listens
  uint16_t port = 0;
  std::string name;   // for logs, e.g. "rank 2 on host-b"
  uint32_t id = 0;    // the coordinator's member id, stable across generations (re-forms match on it)
  bool joining = true;  // new in this generation (re-forms: it dials the members that are not)
};

class Group {
 public:
  // What a forming group consults while it waits for peers (about every
  // 100 ms): a non-OK status ends the wait with that status (an elastic
  // member returns Aborted once a newer generation is published). May be
  // empty.
  using Interrupt = std::function<Status()>;

  // Connects rank `rank` of `members` (index = rank; our own entry is not
  // dialled) to every other member: it dials the ranks above it and
  // accepts the ranks below it. Every member calls this with the same list,
  // job id and generation. `interrupt` as for Join (an elastic job's first
  // generation stops waiting for a member the coordinator has dropped).
  static Result<std::unique_ptr<Group>> Connect(net::Node& node, const std::string& job_id, uint64_t generation,
                                                int rank, std::vector<GroupMember> members, Deadline deadline,
                                                const Interrupt& interrupt = {});

  // A worker new to a running group: like Connect, but the `joining`
  // flags of `members` decide who dials (see Reform).
  static Result<std::unique_ptr<Group>> Join(net::Node& node, const std::string& job_id, uint64_t generation, int rank,
                                             std::vector<GroupMember> members, Deadline deadline,
                                             const Interrupt& interrupt = {}) {
    return Form(node, job_id, generation, rank, std::move(members), {}, deadline, interrupt);
  }

  // The group of the next membership generation. `known`: this member's
  // connections of a generation every member formed (member id -> peer;
  // the stable generation, elastic_membership.h): those to members not
  // joining are kept as they are (PeerLost if one is gone). The others are
  // made as in Connect, where a joining member dials one that is not, and
  // between two joining members the lower rank dials. FailedPrecondition
  // when a member not joining has no connection in `known` (the members
  // disagree about the stable generation). Messages `previous` kept for a
  // later generation move along.
  //
  // Generations that overtake each other (a join and a leave moments
  // apart), for Join, Reform and Connect alike: a peer that dials us with
  // a *newer* generation means ours is superseded, so the wait ends at
  // once with Aborted (after our hello went back to it); a peer that
  // answers our hello with an *older* generation has not reached its step
  // boundary yet: it refuses that connection, and we dial it again until
  // it has caught up, the deadline passes or `interrupt` says stop. A
  // peer of a newer generation answering us, or one of an older
  // generation dialling us, is refused as before (FailedPrecondition /
  // not counted).
  static Result<std::unique_ptr<Group>> Reform(Group& previous, const std::map<uint32_t, net::PeerId>& known,
                                               const std::string& job_id, uint64_t generation, int rank,
                                               std::vector<GroupMember> members, Deadline deadline,
                                               const Interrupt& interrupt = {});
  // This group's connections by member id (for Reform's `known`); ranks
  // it has no connection to (a group made by FromPeers with 0s) are left out.
  std::map<uint32_t, net::PeerId> ConnectionsById() const;

  // A group over connections that already exist (`peers[rank]` is unused),
  // e.g. a sub-group of a Group (which must outlive it) at that group's
  // `generation`.
  static std::unique_ptr<Group> FromPeers(net::Node& node, int rank, std::vector<net::PeerId> peers,
                                          std::vector<GroupMember> members = {}, uint64_t generation = 0);

  net::Node& node() const { return node_; }
  int rank() const { return rank_; }
  int world() const { return static_cast<int>(peers_.size()); }
  uint64_t generation() const { return generation_; }
  const std::vector<GroupMember>& members() const { return members_; }
  net::PeerId peer(int rank) const { return peers_[static_cast<size_t>(rank)]; }
  // "rank R (name)" for messages.
  std::string Describe(int rank) const;
  // The first lost member, if any (OK otherwise).
  Status Health() const;
  // Returns once every rank has entered the barrier (rank 0 gathers and
  // releases, over control messages). A rank must not leave the group while
  // others may still address it: end with a Barrier.
  Status Barrier(Deadline deadline);

  // A control message that arrived for a later generation of this group
  // (e.g. a peer's collective offer, comm/allreduce.h): kept here, handed
  // to the next generation by Reform, taken by whoever expects it.
  void KeepEarly(net::ControlMessage message) { early_.push_back(std::move(message)); }
  std::optional<net::ControlMessage> TakeEarly(net::PeerId from, uint32_t kind);

 private:
  Group(net::Node& node, int rank, std::vector<net::PeerId> peers, std::vector<GroupMember> members,
        uint64_t generation = 0)
      : node_(node), rank_(rank), peers_(std::move(peers)), members_(std::move(members)), generation_(generation) {}
  // Connects every pair that `reuse` does not already connect (see Reform).
  static Result<std::unique_ptr<Group>> Form(net::Node& node, const std::string& job_id, uint64_t generation, int rank,
                                             std::vector<GroupMember> members, std::vector<net::PeerId> reuse,
                                             Deadline deadline, const Interrupt& interrupt);
  net::Node& node_;
  int rank_;
  std::vector<net::PeerId> peers_;
  std::vector<GroupMember> members_;
  uint64_t generation_ = 0;
  uint64_t barriers_ = 0;
  std::vector<net::ControlMessage> early_;
};

}  // namespace tenax::comm

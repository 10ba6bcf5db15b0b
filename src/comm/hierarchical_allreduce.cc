#include "tenax/comm/hierarchical_allreduce.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "wait_backoff.h"

namespace tenax::comm {
namespace {
constexpr size_t kCrossDirectMaxBytes = 256 << 10;
}  // namespace

Result<std::unique_ptr<HierarchicalAllreduce>> HierarchicalAllreduce::Create(Group& group,
                                                                             const std::vector<std::string>& zone_of_rank,
                                                                             size_t count, Deadline deadline,
                                                                             AllreduceOptions options) {
  const int p = group.world();
  if (zone_of_rank.size() != static_cast<size_t>(p)) {
    return InvalidArgument("hierarchical allreduce: " + std::to_string(zone_of_rank.size()) +
                           " zone names for a group of " + std::to_string(p));
  }
  // Zones in the order of their lowest rank; members of each in rank order.
  std::vector<std::vector<int>> zones;
  std::map<std::string, size_t> index;
  for (int r = 0; r < p; ++r) {
    auto [it, fresh] = index.emplace(zone_of_rank[static_cast<size_t>(r)], zones.size());
    if (fresh) zones.emplace_back();
    zones[it->second].push_back(r);
  }
  for (const auto& z : zones) {
    if (z.size() != zones.front().size()) {
      return InvalidArgument("hierarchical allreduce needs zones of equal size: zone '" +
                             zone_of_rank[static_cast<size_t>(z.front())] + "' has " + std::to_string(z.size()) +
                             " members, zone '" + zone_of_rank[0] + "' " + std::to_string(zones.front().size()));
    }
  }
  const size_t my_zone = index.at(zone_of_rank[static_cast<size_t>(group.rank())]);
  const auto& mine = zones[my_zone];
  const int i = static_cast<int>(std::find(mine.begin(), mine.end(), group.rank()) - mine.begin());

  auto sub = [&](const std::vector<int>& ranks, int my_index) {
    std::vector<net::PeerId> peers;
    std::vector<GroupMember> members;
    for (int r : ranks) {
      peers.push_back(r == group.rank() ? net::PeerId{} : group.peer(r));
      members.push_back(static_cast<size_t>(r) < group.members().size() ? group.members()[static_cast<size_t>(r)]
                                                                         : GroupMember{});
      if (members.back().name.empty()) members.back().name = "rank " + std::to_string(r) + " of the job";
    }
    return Group::FromPeers(group.node(), my_index, std::move(peers), std::move(members), group.generation());
  };
  std::vector<int> cross;
  for (const auto& z : zones) cross.push_back(z[static_cast<size_t>(i)]);

  std::unique_ptr<HierarchicalAllreduce> h(new HierarchicalAllreduce());
  h->zones_ = static_cast<int>(zones.size());
  h->zone_size_ = static_cast<int>(mine.size());
  h->piece_floats_ = options.ring_piece_bytes ? std::max<size_t>(options.ring_piece_bytes / sizeof(float), 1) : 0;
  h->zone_ranks_ = mine;
  h->cross_ranks_ = cross;
  h->zone_group_ = sub(mine, i);
  h->cross_group_ = sub(cross, static_cast<int>(my_zone));
  // The two sub-groups share no peer, so their offers cannot be confused.
  // Members that were given other zones refuse each other's offers.
  options.algorithm = "hierarchical zones=";
  for (int r = 0; r < p; ++r) options.algorithm += (r ? "," : "") + zone_of_rank[static_cast<size_t>(r)];
  TENAX_ASSIGN_OR_RETURN(h->zone_, Allreduce::Create(*h->zone_group_, count, deadline, options));
  AllreduceOptions gather = options;
  gather.algorithm += " (allgathers)";
  TENAX_ASSIGN_OR_RETURN(h->gather_, Allreduce::CreateSharingBuffer(*h->zone_, deadline, gather));
  AllreduceOptions across = options;
  if (zones.size() == 2) {
    // Between two zones a direct exchange moves the same bytes as a ring
    // of two (each member's whole chunk, once) in one round instead of
    // two: half the cross-zone delays. Direct segments run one at a time
    // while ring pieces overlap (Allreduce's window), so only chunks small
    // enough for the delay to dominate go direct: a gradient bucket's
    // (256 KiB buckets, halves of them), not a large tensor's 1 MiB pieces.
    across.direct_max_bytes = std::max(options.direct_max_bytes, kCrossDirectMaxBytes);
  }
  TENAX_ASSIGN_OR_RETURN(h->cross_, Allreduce::Create(*h->cross_group_, count, deadline, across));
  return h;
}

void HierarchicalAllreduce::SetInterrupt(std::function<Status()> interrupt) {
  interrupt_ = interrupt;
  zone_->SetInterrupt(interrupt);
  gather_->SetInterrupt(interrupt);
  cross_->SetInterrupt(std::move(interrupt));
}

Status HierarchicalAllreduce::Fail(Status st) {
  if (failed_.ok()) failed_ = st;
  return failed_;
}

Status HierarchicalAllreduce::Start(size_t offset, size_t count, float scale, const float* input) {
  if (!failed_.ok()) return failed_;
  if (offset > this->count() || count > this->count() - offset) {
    return InvalidArgument("hierarchical allreduce segment [" + std::to_string(offset) + ", +" + std::to_string(count) +
                           ") outside the buffer of " + std::to_string(this->count()) + " floats");
  }
  Job j;
  j.scale = scale;
  j.input = input;
  const size_t piece = piece_floats_ ? piece_floats_ : std::max<size_t>(count, 1);
  size_t done = 0;
  do {  // every member cuts alike, so the sub-groups' op numbers stay equal
    Piece pc;
    pc.offset = offset + done;
    pc.count = std::min(piece, count - done);
    pc.mine = Allreduce::ReducedChunk(pc.count, zone_size_, zone_group_->rank());
    j.pieces.push_back(pc);
    done += pc.count;
  } while (done < count);
  // The reduce-scatters queue now, in Start order on every member.
  for (const Piece& pc : j.pieces) {
    if (Status st = zone_->StartPhase(RingPhase::kReduceScatter, pc.offset, pc.count, 1.0f,
                                      input ? input + (pc.offset - offset) : nullptr);
        !st.ok()) {
      return Fail(st);
    }
  }
  jobs_.push_back(std::move(j));
  return Status::Ok();
}

Result<uint64_t> HierarchicalAllreduce::Poll() {
  if (!failed_.ok()) return failed_;
  // Each sub-collective completes in queue order, and each queue holds one
  // kind of step in piece order (over jobs, in Start order): a completion
  // belongs to the first piece still waiting for that step. `step` takes
  // that piece's job (it exists: every queued operation has one).
  bool moved = true;
  auto drain = [&](Allreduce& collective, uint64_t& seen, auto waiting, auto step) -> Status {
    TENAX_ASSIGN_OR_RETURN(uint64_t total, collective.Poll());
    for (; seen < total; ++seen) {
      moved = true;
      auto job = std::find_if(jobs_.begin(), jobs_.end(), waiting);
      if (job != jobs_.end()) TENAX_RETURN_IF_ERROR(step(*job));
    }
    return Status::Ok();
  };
  while (moved) {
    moved = false;
    Status st = drain(
        *zone_, zone_done_, [](const Job& j) { return j.reduced < j.pieces.size(); },
        [&](Job& j) {
          const Piece& pc = j.pieces[j.reduced++];
          const size_t at = pc.offset + pc.mine.begin;
          return cross_->Start(at, pc.mine.length, j.scale, zone_->data() + at);
        });
    if (st.ok()) {
      st = drain(
          *cross_, cross_done_, [](const Job& j) { return j.crossed < j.reduced; },
          [&](Job& j) {
            const Piece& pc = j.pieces[j.crossed++];
            const size_t at = pc.offset + pc.mine.begin;
            std::memcpy(zone_->data() + at, cross_->data() + at, pc.mine.length * sizeof(float));
            return gather_->StartPhase(RingPhase::kAllgather, pc.offset, pc.count);
          });
    }
    if (st.ok()) {
      st = drain(
          *gather_, gather_done_, [](const Job& j) { return j.gathered < j.crossed; },
          [](Job& j) {
            ++j.gathered;
            return Status::Ok();
          });
    }
    if (!st.ok()) return Fail(st);
    while (!jobs_.empty() && jobs_.front().gathered == jobs_.front().pieces.size()) {
      jobs_.pop_front();
      ++completed_;
      moved = true;
    }
  }
  return completed_;
}

Status HierarchicalAllreduce::Wait(Deadline deadline) {
  WaitBackoff backoff(zone_group_->node());  // the same patience as Allreduce::Wait
  while (true) {
    TENAX_ASSIGN_OR_RETURN(uint64_t done, Poll());
    (void)done;
    if (jobs_.empty()) return Status::Ok();
    if (!backoff.Pause()) continue;
    if (Status st = zone_group_->Health(); !st.ok()) return Fail(Status(st.code(), "hierarchical allreduce, zone step: " + st.message()));
    if (Status st = cross_group_->Health(); !st.ok()) {
      return Fail(Status(st.code(), "hierarchical allreduce, cross-zone step: " + st.message()));
    }
    if (interrupt_) {
      if (Status st = interrupt_(); !st.ok()) return Fail(st);
    }
    if (deadline.Expired()) {
      const int w = waiting_for();
      return Fail(DeadlineExceeded("hierarchical allreduce: no progress before the deadline" +
                                   (w >= 0 ? ", waiting for rank " + std::to_string(w) : std::string())));
    }
  }
}

uint64_t HierarchicalAllreduce::bytes_sent_to(int rank) const {
  for (size_t i = 0; i < zone_ranks_.size(); ++i) {
    if (zone_ranks_[i] == rank) {
      return zone_->bytes_sent_to(static_cast<int>(i)) + gather_->bytes_sent_to(static_cast<int>(i));
    }
  }
  for (size_t i = 0; i < cross_ranks_.size(); ++i) {
    if (cross_ranks_[i] == rank) return cross_->bytes_sent_to(static_cast<int>(i));
  }
  return 0;  // neither in our zone nor in our cross group: we never write to it
}

int HierarchicalAllreduce::waiting_for() const {
  if (int z = zone_->waiting_for(); z >= 0) return zone_ranks_[static_cast<size_t>(z)];
  if (int z = gather_->waiting_for(); z >= 0) return zone_ranks_[static_cast<size_t>(z)];
  if (int c = cross_->waiting_for(); c >= 0) return cross_ranks_[static_cast<size_t>(c)];
  return -1;
}

}  // namespace tenax::comm

#include "tenax/train/exchange/coordinator_membership.h"

#include <spdlog/spdlog.h>

namespace tenax {

Result<MembershipView> ViewOf(const wire::Roster& roster, int member_id, bool leaving) {
  MembershipView v;
  v.generation = roster.generation();
  v.stable_generation = roster.stable_generation();
  v.why = roster.why();
  v.members.resize(static_cast<size_t>(roster.members_size()));
  for (const auto& m : roster.members()) {
    v.members[m.rank()] = {m.host(), static_cast<uint16_t>(m.port()), m.name(), m.member_id(), m.joining()};
    if (static_cast<int>(m.member_id()) == member_id) v.rank = static_cast<int>(m.rank());
  }
  if (v.rank < 0) {
    const std::string gen = "generation " + std::to_string(roster.generation());
    if (leaving) return Cancelled("rank " + std::to_string(member_id) + " left the job (" + gen + " goes on without it)");
    return FailedPrecondition("rank " + std::to_string(member_id) + " was removed from the job in " + gen + " (" +
                              roster.why() + ")");
  }
  return v;
}

bool CoordinatorMembership::NewerPublished(uint64_t generation) {
  auto r = client_.PollRoster(newest_ ? std::max(generation, newest_->generation()) : generation);
  if (r.ok() && *r) newest_ = std::move(**r);
  return newest_ && newest_->generation() > generation;
}

Result<MembershipView> CoordinatorMembership::Next(uint64_t generation, Deadline deadline) {
  if (!NewerPublished(generation)) {
    TENAX_ASSIGN_OR_RETURN(wire::Roster r, client_.WaitRoster(deadline, generation));
    newest_ = std::move(r);
    (void)NewerPublished(newest_->generation());  // a newer one that came along
  }
  return ViewOf(*newest_, member_id_, leaving_);
}

void CoordinatorMembership::ReportSuspect(uint32_t member_id, const std::string& reason) {
  spdlog::warn("rank {}: reporting rank {} to the coordinator: {}", member_id_, member_id, reason);
  client_.ReportSuspect(static_cast<int>(member_id), reason);
}

void CoordinatorMembership::Leave(const std::string& reason) {
  leaving_ = true;
  client_.Leave(reason);
}

}  // namespace tenax

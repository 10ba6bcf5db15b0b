// The membership seam of elastic synchronous training (cluster.elastic):
// how the elastic exchange (train/exchange/allreduce_exchange.h) learns of new
// generations and reports what it sees. The worker role implements it over
// its coordinator connection; tests may implement it in memory.
//
// A generation is a roster: members by rank (position 0..W-1), each with a
// stable member id; `joining` marks members not in the stable generation
// (the newest every member reported formed), with whom every pair is new.
// docs/elastic.md has the protocol this serves.
//
// Threading: called from the training thread, which drives the Node.
// Libtorch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/comm/group.h"
#include "tenax/core/deadline.h"
#include "tenax/core/status.h"

namespace tenax {

struct MembershipView {
  uint64_t generation = 0;
  // The newest generation every member of which formed it (0: none): the
  // members not marked joining reuse the connections they made in it.
  uint64_t stable_generation = 0;
  int rank = -1;  // this worker's position in it
  std::vector<comm::GroupMember> members;
  std::string why;
};

class ElasticMembership {
 public:
  virtual ~ElasticMembership() = default;
  virtual std::string job_id() const = 0;
  // Non-blocking: a generation above `generation` has been published.
  virtual bool NewerPublished(uint64_t generation) = 0;
  // The newest generation above `generation`, waiting for it until
  // `deadline`. Cancelled when this worker left (it asked to, Leave) and
  // FailedPrecondition when the coordinator removed it; DeadlineExceeded
  // when none came (e.g. below min_workers and nobody joined).
  virtual Result<MembershipView> Next(uint64_t generation, Deadline deadline) = 0;
  // Best effort, to the coordinator.
  virtual void ReportSuspect(uint32_t member_id, const std::string& reason) = 0;
  // Best effort: this member formed `generation` and agreed on its state.
  virtual void Formed(uint64_t generation) = 0;
  virtual void Leave(const std::string& reason) = 0;
  virtual bool leaving() const = 0;
};

// Failures a new membership repairs: a lost or stuck member, or a newer
// generation overtaking this one. The C++ elastic exchange and
// tenax.torch.Manager (src/python) re-form on exactly these.
inline bool RepairedByNewMembership(const Status& st) {
  return st.code() == StatusCode::kPeerLost || st.code() == StatusCode::kDeadlineExceeded ||
         st.code() == StatusCode::kAborted;
}

// The interrupt for forming generation `forming` (comm::Group::Join and
// Reform): Aborted once a newer generation is published, so that its
// members stop waiting for peers that went on to that one (a joiner of the
// old one may never come). `membership` must outlive the returned function.
inline comm::Group::Interrupt SupersededInterrupt(ElasticMembership& membership, uint64_t forming) {
  return [&membership, forming]() -> Status {
    if (!membership.NewerPublished(forming)) return Status::Ok();
    return Aborted("generation " + std::to_string(forming) + " was superseded while it formed");
  };
}

// The checksum of a state transfer's bytes (64-bit FNV-1a), computed by the
// donor and checked by the receiver. `h`: the checksum of the bytes before
// these (a state in several pieces), FNV's offset basis for the first.
inline uint64_t StateChecksum(const uint8_t* p, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace tenax

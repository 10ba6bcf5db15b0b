// ElasticMembership over the worker's coordinator connection: generations
// are the coordinator's Rosters (coord/coordinator_client.h). Internal to
// the worker role. Threading: the training thread, which drives the Node.
#pragma once

#include <optional>
#include <string>

#include "tenax/coord/coordinator_client.h"
#include "tenax/train/exchange/elastic_membership.h"

namespace tenax {

// This worker's view of a roster; FailedPrecondition/Cancelled when it is
// not in it (see ElasticMembership::Next).
Result<MembershipView> ViewOf(const wire::Roster& roster, int member_id, bool leaving);

class CoordinatorMembership final : public ElasticMembership {
 public:
  CoordinatorMembership(coord::CoordinatorClient& client, std::string job_id, int member_id)
      : client_(client), job_id_(std::move(job_id)), member_id_(member_id) {}

  std::string job_id() const override { return job_id_; }
  bool NewerPublished(uint64_t generation) override;
  Result<MembershipView> Next(uint64_t generation, Deadline deadline) override;
  void ReportSuspect(uint32_t member_id, const std::string& reason) override;
  void Formed(uint64_t generation) override { client_.ReportFormed(generation); }
  void Leave(const std::string& reason) override;
  bool leaving() const override { return leaving_; }

 private:
  coord::CoordinatorClient& client_;
  std::string job_id_;
  int member_id_;
  bool leaving_ = false;
  std::optional<wire::Roster> newest_;
};

}  // namespace tenax

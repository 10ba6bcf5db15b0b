// The coordinator's side of network probes (layer sched, docs/placement.md):
// it registers every probe agent that reports, folds their measurements
// into a time-decayed LinkMatrix, answers each report with the roster of
// agents (so each probes all the others) and answers link queries with the
// matrix. Hosted on the coordinator's node as a net::ControlService.
//
// The matrix is soft state: it is not kept in the coordinator's SQLite
// file; a restarted coordinator learns it again within a probe round.
//
// Threading: Handle runs on the coordinator's thread; Snapshot may be called
// from any thread.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tenax/core/deadline.h"
#include "tenax/net/control_service.h"
#include "tenax/sched/probe/link_matrix.h"

namespace tenax::sched {

struct ProbeAgentInfo {
  std::string node, zone, host;
  uint16_t port = 0;
};

// What a link query returns: the matrix and the nodes the agents measure
// from (their zones), as placement wants them.
struct LinkSnapshot {
  LinkMatrix links;
  std::vector<ProbeAgentInfo> agents;  // sorted by node
};

class LinkBook final : public net::ControlService {
 public:
  explicit LinkBook(double half_life_seconds = 60.0);
  bool Handles(uint32_t kind) const override;
  Status Handle(net::Node& node, const net::ControlMessage& message) override;

  std::vector<ProbeAgentInfo> Agents() const;
  std::string MatrixJson() const { return links_.ToJson(); }

 private:
  LinkMatrix links_;
  mutable std::mutex mu_;
  std::map<std::string, ProbeAgentInfo> agents_;
  SteadyClock::time_point start_ = SteadyClock::now();
};

// Asks the coordinator at `peer` (already connected on `node`) for its
// link matrix. Unavailable/DeadlineExceeded when it does not answer in
// time; ProtocolError for an answer that does not decode.
Result<LinkSnapshot> QueryLinks(net::Node& node, net::PeerId peer, Deadline deadline);

// The same from a fresh node of its own (for tools and the launcher).
Result<LinkSnapshot> FetchLinks(const std::string& host, uint16_t port, const std::string& secret, Deadline deadline);

}  // namespace tenax::sched

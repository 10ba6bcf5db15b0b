// A worker's connection to the coordinator: join, wait for the roster,
// report progress, completion and failures, and learn about other ranks'
// failures. If the coordinator restarts, the client rejoins with its rank
// (at most one attempt per second, from the calls below) while training
// goes on.
//
// Threading: uses its Node from the Node's thread only.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "coord_wire.pb.h"
#include "tenax/net/node.h"

namespace tenax::coord {

struct JoinInfo {
  int rank = 0;
  int world = 0;
  std::string config_toml;
  // The membership generation when admitted: 0 while the job was still
  // gathering its first members, above 0 for a joiner of a running job.
  uint64_t generation = 0;
};

// What the coordinator's refusal of a join says when the job it serves
// has finished (JobStateMachine::OnJoin: "job 'X' has already finished"):
// a late spare or a rank whose Done was stored before a restart is not
// needed, not failed.
inline constexpr std::string_view kJobFinishedRefusal = "has already finished";

class CoordinatorClient {
 public:
  // Connects (retrying until `deadline` while nothing answers, as the
  // coordinator may start after the workers under mpirun) and joins.
  // Refused with the coordinator's reason (wrong job, rank taken...);
  // DeadlineExceeded naming the address when nothing answered; Cancelled
  // when a stop signal (core/signals.h) arrives while it retries.
  static Result<std::unique_ptr<CoordinatorClient>> Join(net::Node& node, const std::string& host, uint16_t port,
                                                         wire::JoinRequest request, Deadline deadline);

  const JoinInfo& info() const { return info_; }
  // The first roster with a generation above `after_generation` (the
  // initial one with 0). An elastic job publishes a new roster for every
  // membership change; rosters of older generations are skipped.
  Result<wire::Roster> WaitRoster(Deadline deadline, uint64_t after_generation = 0);
  // Non-blocking: the newest roster above `after_generation` that has
  // arrived, if any (older ones are dropped).
  Result<std::optional<wire::Roster>> PollRoster(uint64_t after_generation);

  // Elastic jobs. Best effort, like progress: the coordinator decides.
  // This worker leaves at the next step boundary (a preemption notice).
  void Leave(const std::string& reason);
  // Member `member_id` failed a collective with us (lost or stuck).
  void ReportSuspect(int member_id, const std::string& reason);
  // This member formed `generation` (docs/elastic.md: the stable generation).
  void ReportFormed(uint64_t generation);

  // Asynchronous jobs. The next unit for this worker (or "wait"/"done"):
  // asks and waits for the grant, rejoining a restarted coordinator;
  // DeadlineExceeded when no grant came, FailedPrecondition when the job
  // failed meanwhile.
  Result<wire::UnitGrant> RequestUnit(const std::string& worker, Deadline deadline);
  // Best effort: gives a leased unit back unfinished.
  void ReleaseUnit(uint64_t unit, uint64_t attempt, const std::string& reason);

  // Best effort: the coordinator may be restarting.
  void ReportProgress(const wire::Progress& progress);
  void ReportFailure(const std::string& reason);
  // OK once the coordinator acknowledged it (a Done naming this rank, sent
  // after it stored the rank as done), or refused a rejoin because the job
  // has finished; a coordinator lost before acknowledging is rejoined
  // when restarted and told again. DeadlineExceeded when neither came;
  // the refusal of a rejoin otherwise.
  Status ReportDone(const std::string& summary_json, Deadline deadline);
  // Non-blocking: FailedPrecondition naming the failed rank if the
  // coordinator announced a failure; OK otherwise.
  Status CheckFailure();
  // Whether the connection to the coordinator was up at the last call that
  // used it (a lost one is made again by the calls above).
  bool Connected() const { return connected_; }

 private:
  CoordinatorClient(net::Node& node, std::string host, uint16_t port, wire::JoinRequest request)
      : node_(node), host_(std::move(host)), port_(port), request_(std::move(request)) {}
  Status ConnectAndJoin(Deadline deadline);
  bool Usable();  // reconnects when lost, at most once per second

  net::Node& node_;
  std::string host_;
  uint16_t port_;
  wire::JoinRequest request_;
  JoinInfo info_;
  net::PeerId peer_ = 0;
  bool connected_ = false;
  SteadyClock::time_point next_attempt_{};
  Status failure_;
};

}  // namespace tenax::coord

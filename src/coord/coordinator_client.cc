#include "tenax/coord/coordinator_client.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "tenax/core/signals.h"
#include "tenax/coord/coord_codec.h"

namespace tenax::coord {
namespace {
using namespace std::chrono_literals;
}

Status CoordinatorClient::ConnectAndJoin(Deadline deadline) {
  const std::string where = host_ + ":" + std::to_string(port_);
  auto peer = node_.Connect(host_, port_, deadline);
  if (!peer.ok()) return peer.status();
  TENAX_RETURN_IF_ERROR(node_.SendControl(*peer, kJoinRequestKind, request_.SerializeAsString(), deadline));
  auto msg = node_.ReceiveControl(deadline, *peer, kJoinReplyKind);
  if (!msg.ok()) return Status(msg.status().code(), "coordinator " + where + " did not answer the join: " + msg.status().message());
  TENAX_ASSIGN_OR_RETURN(wire::JoinReply reply, DecodeJoinReply(msg->payload, "coordinator " + where));
  if (!reply.error().empty()) return Refused("coordinator " + where + " refused: " + reply.error());
  if (connected_ || info_.world != 0) {
    if (static_cast<int>(reply.rank()) != info_.rank) return ProtocolError("coordinator moved us to another rank");
  }
  info_ = {static_cast<int>(reply.rank()), static_cast<int>(reply.world()), reply.config_toml(), reply.generation()};
  peer_ = *peer;
  connected_ = true;
  return Status::Ok();
}

Result<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Join(net::Node& node, const std::string& host,
                                                                   uint16_t port, wire::JoinRequest request,
                                                                   Deadline deadline) {
  std::unique_ptr<CoordinatorClient> c(new CoordinatorClient(node, host, port, std::move(request)));
  Status last;
  while (true) {
    last = c->ConnectAndJoin(deadline.Earlier(Deadline::After(2s)));
    if (last.ok()) return c;
    // Only "nobody there yet" is worth retrying; a refusal is final.
    if (last.code() != StatusCode::kUnavailable && last.code() != StatusCode::kDeadlineExceeded &&
        last.code() != StatusCode::kPeerLost) {
      return last;
    }
    if (deadline.Expired()) {
      return DeadlineExceeded("coordinator " + host + ":" + std::to_string(port) +
                              " did not answer before the join deadline (" + last.message() + ")");
    }
    // A worker knocking at a coordinator that is gone (a replacement started
    // as the job ended) must still heed SIGTERM at once.
    if (StopRequested()) {
      return Cancelled("stopped by signal " + std::to_string(StopSignal()) + " while joining coordinator " + host +
                       ":" + std::to_string(port) + " (" + last.message() + ")");
    }
    std::this_thread::sleep_for(100ms);  // retry pacing, not synchronisation
  }
}

bool CoordinatorClient::Usable() {
  if (connected_ && node_.PeerStatus(peer_).ok()) return true;
  if (connected_) {
    spdlog::warn("rank {}: lost the coordinator ({}); will rejoin", info_.rank, node_.PeerStatus(peer_).message());
    connected_ = false;
  }
  const auto now = SteadyClock::now();
  if (now < next_attempt_) return false;
  next_attempt_ = now + 1s;
  request_.set_rejoin(true);
  request_.set_requested_rank(info_.rank);
  if (Status st = ConnectAndJoin(Deadline::After(1s)); !st.ok()) {
    spdlog::debug("rank {}: rejoin failed: {}", info_.rank, st.message());
    if (st.code() == StatusCode::kRefused) failure_ = FailedPrecondition(st.message());
    return false;
  }
  spdlog::info("rank {}: rejoined the coordinator", info_.rank);
  return true;
}

Result<wire::Roster> CoordinatorClient::WaitRoster(Deadline deadline, uint64_t after_generation) {
  while (true) {
    TENAX_ASSIGN_OR_RETURN(std::optional<wire::Roster> roster, PollRoster(after_generation));
    if (roster) return *roster;
    if (connected_) {
      auto f = node_.ReceiveControl(Deadline::At(SteadyClock::now()), peer_, kFailureKind);
      if (f.ok()) {
        TENAX_ASSIGN_OR_RETURN(wire::Failure failure, DecodeFailure(f->payload, "coordinator"));
        // Another rank or the job failed, not this worker's input: exit 3.
        failure_ = PeerLost(after_generation == 0 ? "the job failed before it started: " + failure.reason()
                                                            : "the job failed: " + failure.reason());
        return failure_;
      }
      auto msg = node_.ReceiveControl(deadline.Earlier(Deadline::After(50ms)), peer_, kRosterKind);
      if (msg.ok()) {
        TENAX_ASSIGN_OR_RETURN(wire::Roster r, DecodeRoster(msg->payload, "coordinator"));
        if (r.generation() > after_generation) return r;
      }
    }
    if (deadline.Expired()) {
      return DeadlineExceeded(after_generation == 0
                                  ? "the other workers did not all join before the join deadline"
                                  : "no membership after generation " + std::to_string(after_generation) +
                                        " came from the coordinator before the deadline (fewer than "
                                        "cluster.min_workers left, or the coordinator is gone)");
    }
    if (!Usable() && !failure_.ok()) return failure_;
  }
}

Result<std::optional<wire::Roster>> CoordinatorClient::PollRoster(uint64_t after_generation) {
  std::optional<wire::Roster> newest;
  if (!connected_) {
    (void)Usable();
    if (!failure_.ok()) return failure_;
    if (!connected_) return newest;
  }
  while (true) {
    auto msg = node_.ReceiveControl(Deadline::At(SteadyClock::now()), peer_, kRosterKind);
    if (!msg.ok()) break;
    TENAX_ASSIGN_OR_RETURN(wire::Roster r, DecodeRoster(msg->payload, "coordinator"));
    if (r.generation() > after_generation && (!newest || r.generation() > newest->generation())) newest = std::move(r);
  }
  return newest;
}

void CoordinatorClient::Leave(const std::string& reason) {
  wire::Leave l;
  l.set_rank(static_cast<uint32_t>(info_.rank));
  l.set_reason(reason);
  if (Usable()) (void)node_.SendControl(peer_, kLeaveKind, l.SerializeAsString(), Deadline::After(1s));
}

Result<wire::UnitGrant> CoordinatorClient::RequestUnit(const std::string& worker, Deadline deadline) {
  wire::UnitRequest r;
  r.set_worker(worker);
  while (true) {
    TENAX_RETURN_IF_ERROR(CheckFailure());
    if (Usable() && node_.SendControl(peer_, kUnitRequestKind, r.SerializeAsString(), deadline).ok()) {
      // The grant answers this request; a grant that was still queued from
      // an earlier request (a timed-out wait) is just as current.
      while (!deadline.Expired()) {
        auto msg = node_.ReceiveControl(deadline.Earlier(Deadline::After(100ms)), peer_, kUnitGrantKind);
        if (msg.ok()) return DecodeUnitGrant(msg->payload, "coordinator");
        TENAX_RETURN_IF_ERROR(CheckFailure());
        if (!node_.PeerStatus(peer_).ok()) break;  // lost: rejoin and ask again
      }
    }
    if (deadline.Expired()) return DeadlineExceeded("the coordinator granted no work unit before the deadline");
    if (StopRequested()) return Cancelled("stopped by signal " + std::to_string(StopSignal()) + " while asking for work");
    node_.Progress();
    std::this_thread::sleep_for(50ms);  // pacing reconnect attempts
  }
}

void CoordinatorClient::ReleaseUnit(uint64_t unit, uint64_t attempt, const std::string& reason) {
  wire::UnitRelease r;
  r.set_unit(unit);
  r.set_attempt(attempt);
  r.set_reason(reason.substr(0, 4000));
  if (Usable()) (void)node_.SendControl(peer_, kUnitReleaseKind, r.SerializeAsString(), Deadline::After(1s));
}

void CoordinatorClient::ReportSuspect(int member_id, const std::string& reason) {
  wire::Failure f;
  f.set_rank(static_cast<uint32_t>(member_id));
  f.set_reason(reason.substr(0, 4000));
  if (Usable()) (void)node_.SendControl(peer_, kSuspectKind, f.SerializeAsString(), Deadline::After(1s));
}

void CoordinatorClient::ReportFormed(uint64_t generation) {
  wire::Formed f;
  f.set_generation(generation);
  if (Usable()) (void)node_.SendControl(peer_, kFormedKind, f.SerializeAsString(), Deadline::After(1s));
}

void CoordinatorClient::ReportProgress(const wire::Progress& progress) {
  if (Usable()) (void)node_.SendControl(peer_, kProgressKind, progress.SerializeAsString(), Deadline::After(1s));
}

void CoordinatorClient::ReportFailure(const std::string& reason) {
  wire::Failure f;
  f.set_rank(static_cast<uint32_t>(info_.rank));
  f.set_host(request_.host());
  f.set_reason(reason);
  if (Usable()) (void)node_.SendControl(peer_, kFailureKind, f.SerializeAsString(), Deadline::After(1s));
}

Status CoordinatorClient::ReportDone(const std::string& summary_json, Deadline deadline) {
  wire::Done d;
  d.set_rank(static_cast<uint32_t>(info_.rank));
  d.set_summary_json(summary_json);
  const std::string what = "could not tell the coordinator that rank " + std::to_string(info_.rank) + " finished";
  while (true) {
    // Sent is not recorded: a coordinator SIGKILLed before it stored the
    // Done would resume, restarted, waiting for this rank until its join
    // timeout and fail the job. So wait for its acknowledgement (a Done
    // naming this rank, sent once stored), and tell a restarted one again.
    if (Usable() && node_.SendControl(peer_, kDoneKind, d.SerializeAsString(), deadline).ok()) {
      while (!deadline.Expired() && node_.PeerStatus(peer_).ok()) {
        auto ack = node_.ReceiveControl(Deadline::After(100ms).Earlier(deadline), peer_, kDoneKind);
        if (!ack.ok()) continue;
        auto a = DecodeDone(ack->payload, "coordinator");
        if (!a.ok()) return a.status();
        if (a->rank() == static_cast<uint32_t>(info_.rank)) return Status::Ok();  // recorded
      }
    }
    // A restarted coordinator that finished the job refuses the rejoin: it
    // had every Done, this one included.
    if (!failure_.ok() && failure_.message().find(kJobFinishedRefusal) != std::string::npos) return Status::Ok();
    if (!failure_.ok()) return Status(failure_.code(), what + ": " + failure_.message());
    if (deadline.Expired()) return DeadlineExceeded(what);
    node_.Progress();
    std::this_thread::sleep_for(50ms);  // pacing reconnect attempts
  }
}

Status CoordinatorClient::CheckFailure() {
  if (!failure_.ok()) return failure_;
  if (!connected_) {
    (void)Usable();
    return failure_;
  }
  auto msg = node_.ReceiveControl(Deadline::At(SteadyClock::now()), peer_, kFailureKind);
  if (!msg.ok()) return Status::Ok();
  auto f = DecodeFailure(msg->payload, "coordinator");
  failure_ = f.ok() ? PeerLost("rank " + std::to_string(f->rank()) + " on " + f->host() + " failed: " + f->reason())
                    : f.status();
  return failure_;
}

}  // namespace tenax::coord

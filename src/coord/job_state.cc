#include "tenax/coord/job_state.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

namespace tenax::coord {
namespace {

using namespace std::chrono_literals;

constexpr auto kLeaseEvery = 1s;
constexpr auto kLinger = 3s;

std::string Seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

}  // namespace

std::string_view ToString(JobPhase phase) {
  switch (phase) {
    case JobPhase::kJoining:
      return "joining";
    case JobPhase::kRunning:
      return "running";
    case JobPhase::kFinished:
      return "finished";
    case JobPhase::kFailed:
      return "failed";
  }
  return "?";
}

std::string_view ToString(MemberState state) {
  switch (state) {
    case MemberState::kJoined:
      return "joined";
    case MemberState::kDone:
      return "done";
    case MemberState::kFailed:
      return "failed";
  }
  return "?";
}

std::optional<JobPhase> ParseJobPhase(std::string_view s) {
  for (JobPhase p : {JobPhase::kJoining, JobPhase::kRunning, JobPhase::kFinished, JobPhase::kFailed}) {
    if (ToString(p) == s) return p;
  }
  return std::nullopt;
}

std::optional<MemberState> ParseMemberState(std::string_view s) {
  for (MemberState m : {MemberState::kJoined, MemberState::kDone, MemberState::kFailed}) {
    if (ToString(m) == s) return m;
  }
  return std::nullopt;
}

std::chrono::milliseconds JobStateMachine::ReportGrace(std::chrono::milliseconds peer_timeout) {
  return std::min<std::chrono::milliseconds>(peer_timeout / 2 + 1s, 5s);
}

JobStateMachine::JobStateMachine(JobStateOptions options, JobRecord job, std::vector<MemberRecord> members,
                                 CoordTime now)
    : o_(std::move(options)), job_(std::move(job)), started_(now.steady), last_lease_(now.steady) {
  for (auto& m : members) {
    links_[m.rank] = {};
    members_[m.rank] = std::move(m);
  }
}

std::vector<ConnId> JobStateMachine::ConnectedMembers() const {
  std::vector<ConnId> out;
  for (const auto& [rank, link] : links_) {
    if (link.connected) out.push_back(link.conn);
  }
  return out;
}

std::vector<ConnId> JobStateMachine::Connections() const {
  std::vector<ConnId> out = ConnectedMembers();
  out.insert(out.end(), watchers_.begin(), watchers_.end());
  return out;
}

std::optional<int> JobStateMachine::RankOf(ConnId conn) const {
  for (const auto& [rank, link] : links_) {
    if (link.connected && link.conn == conn) return rank;
  }
  return std::nullopt;
}

void JobStateMachine::Refuse(ConnId to, std::string reason, Actions& out) const {
  out.push_back(action::Refuse{to, std::move(reason)});
}

Actions JobStateMachine::OnJoin(ConnId from, const JoinAsk& j, CoordTime now) {
  Actions out;
  const std::string job = "job '" + job_.job_id + "'";
  if (j.job_id != job_.job_id) {
    Refuse(from, "this coordinator serves " + job + ", not '" + j.job_id + "'", out);
    return out;
  }
  if (Ended()) {
    Refuse(from, job + " has already " + std::string(ToString(job_.phase)), out);
    return out;
  }
  int rank = j.requested_rank;
  auto existing = members_.find(rank);
  if (j.rejoin) {
    // A worker of a running job whose coordinator restarted.
    if (existing == members_.end() || existing->second.name != j.name) {
      Refuse(from, "rank " + std::to_string(rank) + " of " + job + " is not '" + j.name + "'", out);
      return out;
    }
  } else {
    if (job_.phase != JobPhase::kJoining) {
      Refuse(from, job + " is already running with all " + std::to_string(job_.world) + " workers", out);
      return out;
    }
    if (rank >= job_.world) {
      Refuse(
          from,
          "rank " + std::to_string(rank) + " asked for, but " + job + " has " + std::to_string(job_.world) + " workers",
          out);
      return out;
    }
    if (rank < 0) {
      for (rank = 0; rank < job_.world && members_.count(rank); ++rank) {
      }
      if (rank == job_.world) {
        Refuse(from, job + " is full", out);
        return out;
      }
    } else if (existing != members_.end() && links_[rank].connected) {
      Refuse(from, "rank " + std::to_string(rank) + " is already taken by " + existing->second.name, out);
      return out;
    }
  }
  const MemberState state = j.rejoin ? existing->second.state : MemberState::kJoined;
  MemberRecord m{rank, j.name, j.host, j.port, state, now.wall_ms + o_.peer_timeout.count()};
  members_[rank] = m;
  links_[rank] = {from, true};
  out.push_back(action::PutMember{m});
  spdlog::info("job {}: rank {} {} {} ({}:{})", job_.job_id, rank, j.rejoin ? "rejoined:" : "joined:", j.name, j.host,
               j.port);
  out.push_back(action::Admit{from, rank, job_.world, job_.config_toml, job_.generation});
  if (job_.phase == JobPhase::kJoining && static_cast<int>(members_.size()) == job_.world) {
    ++job_.generation;
    job_.phase = JobPhase::kRunning;
    std::vector<MemberRecord> roster;
    for (const auto& [r, member] : members_) roster.push_back(member);
    out.push_back(action::PutGeneration{
        {job_.generation, 0, "all " + std::to_string(job_.world) + " workers joined", roster}});
    out.push_back(action::SetJobState{JobPhase::kRunning, "", job_.generation});
    spdlog::info("job {}: all {} workers joined (generation {}); publishing the roster", job_.job_id, job_.world,
                 job_.generation);
    out.push_back(action::PublishRoster{ConnectedMembers(), job_.generation, std::move(roster)});
  }
  return out;
}

Actions JobStateMachine::OnWatch(ConnId from, const std::string& job_id) {
  Actions out;
  if (job_id != job_.job_id) {
    Refuse(from, "this coordinator serves job '" + job_.job_id + "'", out);
    return out;
  }
  watchers_.insert(from);
  if (job_.phase == JobPhase::kFailed) out.push_back(action::AnnounceFailure{{from}, 0, "", job_.failure});
  return out;
}

Actions JobStateMachine::OnProgress(ConnId from) {
  Actions out;
  if (RankOf(from) && !watchers_.empty()) {
    out.push_back(action::RelayProgress{std::vector<ConnId>(watchers_.begin(), watchers_.end())});
  }
  return out;
}

Actions JobStateMachine::OnDone(ConnId from, const std::string& summary_json) {
  Actions out;
  auto rank = RankOf(from);
  if (!rank) return out;
  MemberRecord& m = members_[*rank];
  m.state = MemberState::kDone;
  out.push_back(action::PutMember{m});
  if (!summary_json.empty()) done_summary_ = summary_json;
  spdlog::info("job {}: rank {} finished", job_.job_id, *rank);
  return out;
}

Actions JobStateMachine::OnFailureReport(ConnId from, const std::string& reason, CoordTime now) {
  auto rank = RankOf(from);
  if (rank && !pending_report_) {
    pending_report_ = PendingReport{*rank, members_[*rank].host, reason, now.steady + ReportGrace(o_.peer_timeout)};
  }
  return {};
}

void JobStateMachine::Fail(int rank, const std::string& host, const std::string& reason, Actions& out) {
  if (Ended()) return;
  job_.phase = JobPhase::kFailed;
  job_.failure = "rank " + std::to_string(rank) + " on " + host + " failed: " + reason;
  spdlog::error("job {}: {}", job_.job_id, job_.failure);
  out.push_back(action::SetJobState{JobPhase::kFailed, job_.failure, job_.generation});
  if (auto it = members_.find(rank); it != members_.end()) {
    it->second.state = MemberState::kFailed;
    out.push_back(action::PutMember{it->second});
  }
  out.push_back(action::AnnounceFailure{Connections(), rank, host, reason});
}

void JobStateMachine::OnMemberLost(int rank, const std::string& why, Actions& out) {
  links_[rank].connected = false;
  const MemberRecord& m = members_[rank];
  if (m.state == MemberState::kDone) return;  // finished and left: expected
  if (pending_report_ && pending_report_->reporter == rank) {
    // The reporter left after telling us why; its verdict still waits out
    // the grace period in case the rank it waited for turns out lost.
    return;
  }
  if (job_.phase == JobPhase::kJoining) {
    // Not started yet: the rank is free again.
    spdlog::warn("job {}: rank {} ({}) left before the job started: {}", job_.job_id, rank, m.name, why);
    out.push_back(action::RemoveMember{rank});
    members_.erase(rank);
    links_.erase(rank);
    return;
  }
  Fail(rank, m.host, "lost its connection (" + m.name + "): " + why, out);
}

Actions JobStateMachine::OnConnectionLost(ConnId conn, const std::string& why) {
  Actions out;
  if (auto rank = RankOf(conn)) {
    OnMemberLost(*rank, why, out);
  } else {
    watchers_.erase(conn);
  }
  return out;
}

Actions JobStateMachine::OnTimer(CoordTime now) {
  Actions out;
  if (pending_report_ && now.steady >= pending_report_->until) {
    PendingReport p = *pending_report_;
    pending_report_.reset();
    Fail(p.reporter, p.host, p.reason, out);
  }
  if (now.steady - last_lease_ >= kLeaseEvery) {
    last_lease_ = now.steady;
    std::vector<int> alive;
    for (const auto& [rank, link] : links_) {
      if (link.connected) alive.push_back(rank);
    }
    if (!alive.empty()) out.push_back(action::RenewLeases{std::move(alive), now.wall_ms + o_.peer_timeout.count()});
  }
  const bool timed_out = now.steady - started_ > o_.join_timeout;
  if (job_.phase == JobPhase::kJoining && timed_out) {
    std::vector<int> missing;
    for (int r = 0; r < job_.world; ++r) {
      if (!members_.count(r)) missing.push_back(r);
    }
    std::string names = missing.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < missing.size(); ++i) names += (i ? ", " : "") + std::to_string(missing[i]);
    // The first missing rank is the one named; the coordinator's host stands
    // in for a worker that never said where it runs.
    Fail(missing.empty() ? 0 : missing.front(), o_.listen_host,
         "only " + std::to_string(members_.size()) + " of " + std::to_string(job_.world) + " workers joined within " +
             Seconds(o_.join_timeout) + " s (missing: " + names + ")",
         out);
  }
  if (job_.phase == JobPhase::kRunning && timed_out) {
    // A member recorded before a restart that never came back.
    for (const auto& [rank, link] : links_) {
      const MemberRecord& m = members_[rank];
      if (!link.connected && link.conn == 0 && m.state == MemberState::kJoined) {
        Fail(rank, m.host, "did not reconnect to the restarted coordinator within the join timeout", out);
        break;
      }
    }
  }
  auto done = [](const auto& member) { return member.second.state == MemberState::kDone; };
  if (job_.phase == JobPhase::kRunning && std::all_of(members_.begin(), members_.end(), done)) {
    job_.phase = JobPhase::kFinished;
    out.push_back(action::SetJobState{JobPhase::kFinished, "", job_.generation});
    spdlog::info("job {}: finished", job_.job_id);
    out.push_back(action::AnnounceDone{std::vector<ConnId>(watchers_.begin(), watchers_.end()), done_summary_});
  }
  if (Ended()) {
    // Linger briefly so that the last messages leave and everyone sees the verdict.
    if (!ended_) ended_ = now.steady;
    if (Connections().empty() || now.steady - *ended_ > kLinger) {
      out.push_back(action::Stop{job_.phase == JobPhase::kFailed ? FailedPrecondition(job_.failure) : Status::Ok()});
    }
  }
  return out;
}

}  // namespace tenax::coord

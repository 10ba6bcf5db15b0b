#include "job_state.h"

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
    case MemberState::kSpare:
      return "spare";
    case MemberState::kLeft:
      return "left";
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
  for (MemberState m : {MemberState::kJoined, MemberState::kDone, MemberState::kFailed, MemberState::kSpare,
                        MemberState::kLeft}) {
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
  // The newest generation's members as recorded. A member admitted after
  // it (killed between recording the joiner and its generation) is not
  // among them: it gets a generation of its own when it rejoins (OnJoin).
  for (auto& m : members) {
    links_[m.rank] = {};
    const bool in_newest = job_.newest_members.empty() || job_.newest_members.count(m.rank);
    if (job_.phase == JobPhase::kRunning && Active(m) && in_newest) last_roster_.insert(m.rank);
    members_[m.rank] = std::move(m);
  }
  // A restarted coordinator takes the stable generation it recorded; the
  // members' reports of newer generations died with the old process, so
  // the stable one advances again with the next generation every member
  // forms. Without a record (a file of an older tenax, or none formed
  // yet) it takes the newest generation as formed: a member that had not
  // formed it cannot re-form from it, and its re-form fails naming the
  // member it has no connection to (docs/elastic.md).
  if (job_.stable_generation > 0 && job_.stable_generation <= job_.generation && !job_.stable_members.empty()) {
    stable_ = job_.stable_generation;
    stable_ids_ = job_.stable_members;
  } else {
    stable_ = job_.generation;
    stable_ids_ = last_roster_;
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
  auto it = rank_by_conn_.find(conn);
  if (it == rank_by_conn_.end()) return std::nullopt;
  return it->second;
}

void JobStateMachine::ConnectLink(int rank, ConnId conn) {
  DisconnectLink(rank);
  links_[rank] = {conn, true};
  rank_by_conn_[conn] = rank;
}

void JobStateMachine::DisconnectLink(int rank) {
  auto it = links_.find(rank);
  if (it == links_.end() || !it->second.connected) return;
  if (auto c = rank_by_conn_.find(it->second.conn); c != rank_by_conn_.end() && c->second == rank) rank_by_conn_.erase(c);
  it->second.connected = false;
}

void JobStateMachine::EraseLink(int rank) {
  DisconnectLink(rank);
  links_.erase(rank);
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
  if (o_.elastic && !j.plan_fingerprint.empty()) {
    if (fingerprint_.empty()) fingerprint_ = j.plan_fingerprint;
    if (j.plan_fingerprint != fingerprint_) {
      Refuse(from, j.name + " trains a model with plan fingerprint " + j.plan_fingerprint + ", " + job + " one with " +
                       fingerprint_ + " (a different model, optimizer or tenax build)",
             out);
      return out;
    }
  }
  int rank = j.requested_rank;
  auto existing = members_.find(rank);
  // An elastic job admits joiners while it runs, each under a new id.
  const bool late_joiner = o_.elastic && !j.rejoin && job_.phase == JobPhase::kRunning;
  // A warm spare started with the job: it must not take a member's rank
  // while the job forms, so it gets an id past the world and waits.
  const bool early_spare = o_.elastic && j.spare && !j.rejoin && job_.phase == JobPhase::kJoining;
  if (j.rejoin) {
    // A worker of a running job whose coordinator restarted.
    if (existing == members_.end() || existing->second.name != j.name) {
      Refuse(from, "rank " + std::to_string(rank) + " of " + job + " is not '" + j.name + "'", out);
      return out;
    }
    if (existing->second.state == MemberState::kFailed || existing->second.state == MemberState::kLeft) {
      Refuse(from, "rank " + std::to_string(rank) + " was removed from " + job + " (" +
                       std::string(ToString(existing->second.state)) + "); start a new worker to join it",
             out);
      return out;
    }
  } else if (late_joiner) {
    rank = members_.empty() ? 0 : members_.rbegin()->first + 1;
  } else if (early_spare) {
    rank = std::max(job_.world, members_.empty() ? 0 : members_.rbegin()->first + 1);
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
      for (rank = 0; rank < job_.world && (members_.count(rank) || replaced_by_.count(rank)); ++rank) {
      }
      if (rank == job_.world) {
        Refuse(from, job + " is full", out);
        return out;
      }
    } else if (existing != members_.end() && links_[rank].connected) {
      Refuse(from, "rank " + std::to_string(rank) + " is already taken by " + existing->second.name, out);
      return out;
    }
    if (auto by = replaced_by_.find(rank); by != replaced_by_.end()) {
      Refuse(from,
             "rank " + std::to_string(rank) + " of " + job + " was lost before the job formed and spare " +
                 std::to_string(by->second) + " took its place; start this worker without a rank to join as a spare",
             out);
      return out;
    }
    vacated_.erase(rank);
  }
  const int active = ActiveCount();
  MemberState state = j.rejoin ? existing->second.state : MemberState::kJoined;
  if ((late_joiner && active >= max_workers()) || early_spare) state = MemberState::kSpare;
  MemberRecord m{rank, j.name, j.host, j.port, state, now.wall_ms + o_.peer_timeout.count()};
  members_[rank] = m;
  ConnectLink(rank, from);
  out.push_back(action::PutMember{m});
  const char* waits = early_spare                     ? "; waits as a spare (started with the job)"
                      : state == MemberState::kSpare ? "; waits as a spare (max_workers reached)"
                                                     : "";
  spdlog::info("job {}: rank {} {} {} ({}:{}){}", job_.job_id, rank, j.rejoin ? "rejoined:" : "joined:", j.name, j.host,
               j.port, waits);
  out.push_back(action::Admit{from, rank, late_joiner ? active + 1 : job_.world, job_.config_toml, job_.generation});
  if (late_joiner && state == MemberState::kJoined) {
    NextGeneration("rank " + std::to_string(rank) + " joined (" + j.name + ")", out);
  } else if (j.rejoin && o_.elastic && job_.phase == JobPhase::kRunning && last_roster_.count(rank)) {
    // The restarted coordinator re-publishes the newest generation to the
    // rejoined member: one that already has it ignores it.
    // It names the same joiners as the first publication (the members not
    // in the stable generation): a member that never got that one learns
    // from this one which pairs are new (it has no connection to a joiner).
    std::vector<MemberRecord> roster;
    std::set<int> joining;
    for (int id : last_roster_) {
      roster.push_back(members_[id]);
      if (!stable_ids_.count(id)) joining.insert(id);
    }
    if (o_.rosters) {
      out.push_back(action::PublishRoster{{from}, job_.generation, std::move(roster), "coordinator restarted",
                                          std::move(joining), stable_});
    }
  } else if (j.rejoin && o_.elastic && job_.phase == JobPhase::kRunning && Active(members_[rank])) {
    // Admitted by the old coordinator, which died before it recorded the
    // generation that takes it in: that generation is issued now.
    NextGeneration("rank " + std::to_string(rank) + " joined (" + j.name +
                       "; its generation was lost with the old coordinator)",
                   out);
  }
  if (early_spare) {
    FillVacatedPlaces(out);  // a member was lost before this spare came
  } else {
    FormWhenFull(out);
  }
  return out;
}

void JobStateMachine::FormWhenFull(Actions& out) {
  if (job_.phase != JobPhase::kJoining) return;
  const int ranked = RankedCount();
  // An elastic job without spares does not wait for members that are
  // gone: once every other place is taken, it starts short of them if
  // min_workers allows, as it would go on without them a moment later. (A
  // worker of that rank started again joins the running job.) With spares
  // it waits for one to take each place (FillVacatedPlaces): they start
  // with the job, and the launcher replaces one that fails.
  const bool short_of_the_lost = o_.elastic && o_.spares <= 0 && !vacated_.empty() &&
                                 ranked + static_cast<int>(vacated_.size()) >= job_.world &&
                                 ranked >= std::max(o_.min_workers, 1);
  if (ranked < job_.world && !short_of_the_lost) return;
  job_.phase = JobPhase::kRunning;
  std::string why = ranked >= job_.world
                        ? "all " + std::to_string(job_.world) + " workers joined"
                        : std::to_string(ranked) + " of " + std::to_string(job_.world) + " workers joined";
  std::vector<std::string> notes;
  for (const auto& [place, spare] : replaced_by_) {
    notes.push_back("spare " + std::to_string(spare) + " in place of rank " + std::to_string(place) +
                    ", lost before the job formed");
  }
  if (ranked < job_.world) {
    std::string lost = vacated_.size() == 1 ? "rank " : "ranks ";
    for (auto it = vacated_.begin(); it != vacated_.end(); ++it) lost += (it == vacated_.begin() ? "" : ", ") + std::to_string(*it);
    notes.push_back(lost + " lost before the job formed; no spare to take " + (vacated_.size() == 1 ? "its" : "their") +
                    " place");
  }
  for (size_t i = 0; i < notes.size(); ++i) why += (i == 0 ? " (" : "; ") + notes[i];
  NextGeneration(why + (notes.empty() ? "" : ")"), out);
}

void JobStateMachine::FillVacatedPlaces(Actions& out) {
  for (auto& [id, m] : members_) {
    if (vacated_.empty()) break;
    if (m.state != MemberState::kSpare || !links_[id].connected) continue;
    const int place = *vacated_.begin();
    vacated_.erase(vacated_.begin());
    replaced_by_[place] = id;
    m.state = MemberState::kJoined;
    out.push_back(action::PutMember{m});
    spdlog::info("job {}: spare rank {} ({}) takes the place of rank {}, lost before the job formed", job_.job_id, id,
                 m.name, place);
  }
  FormWhenFull(out);
}

void JobStateMachine::NextGeneration(const std::string& why, Actions& out) {
  int active = ActiveCount();
  for (auto& [r, m] : members_) {  // spares fill the places lost members left
    if (active >= max_workers()) break;
    if (m.state == MemberState::kSpare && links_[r].connected) {
      m.state = MemberState::kJoined;
      out.push_back(action::PutMember{m});
      spdlog::info("job {}: spare rank {} ({}) is admitted", job_.job_id, r, m.name);
      ++active;
    }
  }
  if (o_.elastic && active < o_.min_workers) {
    if (!paused_) {
      spdlog::warn("job {}: {} of min_workers {} workers left ({}); waiting up to {} s for joiners", job_.job_id,
                   active, o_.min_workers, why, Seconds(o_.join_timeout));
    }
    paused_ = true;
    return;
  }
  paused_ = false;
  paused_since_.reset();
  lost_since_pause_.clear();
  ++job_.generation;
  std::vector<MemberRecord> roster;
  std::set<int> ids, joining;
  for (const auto& [r, m] : members_) {
    if (!Active(m)) continue;
    roster.push_back(m);
    ids.insert(r);
    if (!stable_ids_.count(r)) joining.insert(r);
  }
  if (o_.rosters) forming_[job_.generation] = {ids, ids};  // (async members report no Formed)
  // Told to the members of the new generation and to those of the last
  // one still connected (a leaver learns that it may go).
  std::set<int> told = ids;
  told.insert(last_roster_.begin(), last_roster_.end());
  last_roster_ = ids;
  // Durable before it is announced: a restarted coordinator re-publishes it.
  out.push_back(action::PutGeneration{{job_.generation, 0, why, roster}});
  out.push_back(action::SetJobState{JobPhase::kRunning, "", job_.generation});
  spdlog::info("job {}: generation {} of {} workers ({}); publishing the roster", job_.job_id, job_.generation,
               roster.size(), why);
  std::vector<ConnId> to;
  for (int id : told) {
    if (o_.rosters && links_[id].connected) to.push_back(links_[id].conn);
  }
  if (o_.elastic) to.insert(to.end(), watchers_.begin(), watchers_.end());  // the launcher shows it
  out.push_back(
      action::PublishRoster{std::move(to), job_.generation, std::move(roster), why, std::move(joining), stable_});
}

Actions JobStateMachine::OnFormed(ConnId from, uint64_t generation) {
  auto rank = RankOf(from);
  auto it = forming_.find(generation);
  if (!o_.elastic || !rank || it == forming_.end()) return {};
  it->second.yet.erase(*rank);
  if (!it->second.yet.empty()) return {};
  stable_ = generation;
  stable_ids_ = it->second.members;
  forming_.erase(forming_.begin(), std::next(it));  // older ones can no longer become stable
  spdlog::info("job {}: every member formed generation {}", job_.job_id, generation);
  return {action::SetStableGeneration{generation}};
}

void JobStateMachine::Remove(int rank, MemberState state, const std::string& why, Actions& out) {
  MemberRecord& m = members_[rank];
  const bool was_active = Active(m);
  m.state = state;
  out.push_back(action::PutMember{m});
  if (!was_active) return;  // a spare: no generation changes
  const std::string text = "rank " + std::to_string(rank) + (state == MemberState::kLeft ? " left" : " lost") +
                           " (" + m.name + " on " + m.host + "): " + why;
  if (state != MemberState::kLeft) {
    lost_since_pause_.push_back("rank " + std::to_string(rank) + " on " + m.host);
    if (lost_since_pause_.size() == 1) first_lost_ = rank;
  }
  spdlog::warn("job {}: {}", job_.job_id, text);
  NextGeneration(text, out);
}

Actions JobStateMachine::OnLeave(ConnId from, const std::string& reason) {
  Actions out;
  auto rank = RankOf(from);
  if (!o_.elastic || !rank || job_.phase != JobPhase::kRunning) return out;
  Remove(*rank, MemberState::kLeft, reason, out);
  return out;
}

Actions JobStateMachine::OnSuspect(ConnId from, int suspect, const std::string& reason) {
  Actions out;
  auto reporter = RankOf(from);
  auto it = members_.find(suspect);
  if (!o_.elastic || !reporter || job_.phase != JobPhase::kRunning || it == members_.end() || !Active(it->second) ||
      !last_roster_.count(*reporter)) {
    return out;
  }
  Remove(suspect, MemberState::kFailed, "reported by rank " + std::to_string(*reporter) + ": " + reason, out);
  if (links_[suspect].connected) {
    // It may still be alive (stuck): it must not take part any more.
    Refuse(links_[suspect].conn, "removed from job '" + job_.job_id + "': " + reason, out);
    DisconnectLink(suspect);
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
  out.push_back(action::AckDone{from, *rank});  // after the PutMember: once it is stored
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

Actions JobStateMachine::OnWorkerExited(int rank, const std::string& reason) {
  Actions out;
  if (!o_.elastic || job_.phase != JobPhase::kJoining || rank < 0 || rank >= job_.world) return out;
  if (members_.count(rank) || replaced_by_.count(rank) || vacated_.count(rank)) return out;
  spdlog::warn("job {}: the launcher says rank {} ended before the job formed ({})", job_.job_id, rank, reason);
  vacated_.insert(rank);
  FillVacatedPlaces(out);
  return out;
}

Actions JobStateMachine::OnJobFailure(const std::string& reason) {
  Actions out;
  Fail(-1, o_.listen_host, reason, out);
  return out;
}

void JobStateMachine::Fail(int rank, const std::string& host, const std::string& reason, Actions& out) {
  if (Ended()) return;
  job_.phase = JobPhase::kFailed;
  job_.failure = rank < 0 ? reason : "rank " + std::to_string(rank) + " on " + host + " failed: " + reason;
  failed_by_member_ = rank >= 0;
  spdlog::error("job {}: {}", job_.job_id, job_.failure);
  out.push_back(action::SetJobState{JobPhase::kFailed, job_.failure, job_.generation});
  if (auto it = members_.find(rank); it != members_.end()) {
    it->second.state = MemberState::kFailed;
    out.push_back(action::PutMember{it->second});
  }
  out.push_back(action::AnnounceFailure{Connections(), std::max(rank, 0), host, reason});
}

void JobStateMachine::OnMemberLost(int rank, const std::string& why, Actions& out) {
  DisconnectLink(rank);
  const MemberRecord& m = members_[rank];
  if (m.state == MemberState::kDone) return;  // finished and left: expected
  if (pending_report_ && pending_report_->reporter == rank) {
    // The reporter left after telling us why; its verdict still waits out
    // the grace period in case the rank it waited for turns out lost.
    return;
  }
  if (o_.elastic && job_.phase == JobPhase::kRunning) {
    if (m.state == MemberState::kFailed || m.state == MemberState::kLeft) return;  // already removed
    if (m.state == MemberState::kSpare) {
      out.push_back(action::RemoveMember{rank});
      members_.erase(rank);
      EraseLink(rank);
      return;
    }
    Remove(rank, MemberState::kFailed, "lost its connection: " + why, out);
    return;
  }
  if (job_.phase == JobPhase::kJoining) {
    // Not started yet: the rank is free again. In an elastic job a spare
    // waiting beside the forming job takes the place (FillVacatedPlaces),
    // as it would a member's lost later: a preemptible machine is as
    // likely to go in the job's first seconds as in any others.
    const bool spare = m.state == MemberState::kSpare;
    int place = rank < job_.world ? rank : -1;
    for (auto it = replaced_by_.begin(); it != replaced_by_.end(); ++it) {
      if (it->second == rank) {  // a spare that had taken a lost member's place
        place = it->first;
        replaced_by_.erase(it);
        break;
      }
    }
    spdlog::warn("job {}: {} {} ({}) left before the job started: {}", job_.job_id, spare ? "spare rank" : "rank", rank,
                 m.name, why);
    out.push_back(action::RemoveMember{rank});
    members_.erase(rank);
    EraseLink(rank);
    if (o_.elastic && !spare && place >= 0) {
      vacated_.insert(place);
      FillVacatedPlaces(out);
    }
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
      if (!members_.count(r) && !replaced_by_.count(r)) missing.push_back(r);
    }
    std::string names = missing.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < missing.size(); ++i) names += (i ? ", " : "") + std::to_string(missing[i]);
    // The first missing rank is the one named; the coordinator's host stands
    // in for a worker that never said where it runs.
    Fail(missing.empty() ? 0 : missing.front(), o_.listen_host,
         "only " + std::to_string(RankedCount()) + " of " + std::to_string(job_.world) + " workers joined within " +
             Seconds(o_.join_timeout) + " s (missing: " + names + ")",
         out);
  }
  // An elastic job does not wait the join timeout for a member recorded
  // before a restart: the others keep training, so one that has not
  // reconnected within a few peer timeouts (they retry every second) is
  // treated as lost.
  const auto rejoin_window =
      o_.elastic ? std::min<std::chrono::milliseconds>(o_.join_timeout, std::max<std::chrono::milliseconds>(3 * o_.peer_timeout, 3s))
                 : o_.join_timeout;
  if (job_.phase == JobPhase::kRunning && now.steady - started_ > rejoin_window) {
    // A member recorded before a restart that never came back.
    for (const auto& [rank, link] : links_) {
      const MemberRecord& m = members_[rank];
      if (!link.connected && link.conn == 0 && m.state == MemberState::kJoined) {
        if (o_.elastic) {
          Remove(rank, MemberState::kFailed, "did not reconnect to the restarted coordinator", out);
          continue;
        }
        Fail(rank, m.host, "did not reconnect to the restarted coordinator within the join timeout", out);
        break;
      }
    }
  }
  if (paused_ && job_.phase == JobPhase::kRunning) {
    if (!paused_since_) paused_since_ = now.steady;
    if (now.steady - *paused_since_ > o_.join_timeout) {
      const int active = ActiveCount();
      std::string lost;
      for (const auto& l : lost_since_pause_) lost += (lost.empty() ? "" : ", ") + l;
      Fail(first_lost_ >= 0 ? first_lost_ : 0, o_.listen_host,
           "only " + std::to_string(active) + " of min_workers " + std::to_string(o_.min_workers) +
               " workers left and no joiner came within " + Seconds(o_.join_timeout) + " s (missing: " +
               (lost.empty() ? "?" : lost) + ")",
           out);
    }
  }
  // Done when every member of the current membership is (lost, left and
  // spare workers of an elastic job are not waited for).
  auto done = [](const auto& member) {
    return member.second.state == MemberState::kDone || member.second.state == MemberState::kFailed ||
           member.second.state == MemberState::kLeft || member.second.state == MemberState::kSpare;
  };
  auto some_done = [](const auto& member) { return member.second.state == MemberState::kDone; };
  if (job_.phase == JobPhase::kRunning && std::all_of(members_.begin(), members_.end(), done) &&
      std::any_of(members_.begin(), members_.end(), some_done) && !paused_) {
    job_.phase = JobPhase::kFinished;
    out.push_back(action::SetJobState{JobPhase::kFinished, "", job_.generation});
    spdlog::info("job {}: finished", job_.job_id);
    out.push_back(action::AnnounceDone{std::vector<ConnId>(watchers_.begin(), watchers_.end()), done_summary_});
  }
  if (Ended()) {
    // Linger briefly so that the last messages leave and everyone sees the verdict.
    if (!ended_) ended_ = now.steady;
    if (Connections().empty() || now.steady - *ended_ > kLinger) {
      Status end = Status::Ok();
      if (job_.phase == JobPhase::kFailed) end = failed_by_member_ ? PeerLost(job_.failure) : FailedPrecondition(job_.failure);
      out.push_back(action::Stop{end});
    }
  }
  return out;
}

}  // namespace tenax::coord

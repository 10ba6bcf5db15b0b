// The coordinator's decisions, without its I/O: a JobStateMachine is fed
// events (a worker joined, watched, reported progress, done or a failure;
// a connection was lost; time passed) and answers with actions (write this
// record, admit or refuse that connection, publish the roster, announce a
// failure naming the rank and host, stop). coordinator.cc owns the Node and
// the JobStore and carries the actions out, in order; this class never
// touches a socket, a file or a clock, so every transition is a unit test.
//
// Job phases: joining -> running (all `world` ranks joined: the membership
// generation bumps and the roster is published) -> finished (every rank
// sent Done) | failed (a member lost, a worker's report, a timeout). A
// member is joined, done or failed.
//
// Time comes in as a parameter (steady time for timers, wall-clock ms for
// the leases recorded in the store). Connections are the caller's opaque
// ids (net::PeerId); 0 is never a connection.
//
// Threading: not thread-safe; one owner. Failures: none of its own; the
// caller reports a store action that failed and stops (a decision is never
// announced before the actions that make it durable, which precede it).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tenax/core/deadline.h"
#include "tenax/core/status.h"

namespace tenax::coord {

enum class JobPhase { kJoining, kRunning, kFinished, kFailed };
// kSpare: an elastic job's joiner waiting for a place (max_workers reached);
// kLeft: left an elastic job on its own (SIGTERM). kFailed in an elastic job:
// lost and removed from the membership (a later rejoin is refused).
enum class MemberState { kJoined, kDone, kFailed, kSpare, kLeft };

// The words stored in the state file and used in messages ("joining", ...).
std::string_view ToString(JobPhase phase);
std::string_view ToString(MemberState state);
std::optional<JobPhase> ParseJobPhase(std::string_view s);
std::optional<MemberState> ParseMemberState(std::string_view s);

struct JobRecord {
  std::string job_id;
  std::string config_toml;
  int world = 0;
  JobPhase phase = JobPhase::kJoining;
  uint64_t generation = 0;
  std::string failure;   // why it failed (phase kFailed)
  bool resumed = false;  // the row existed before this process opened the store
  // Of a resumed elastic job: the stable generation as last recorded, and
  // its members' ids (0 and empty when none was recorded).
  uint64_t stable_generation = 0;
  std::set<int> stable_members;
  // The members of generation `generation` as recorded (empty when none
  // was): a member admitted after it (its generation was not written when
  // the coordinator died) is not among them.
  std::set<int> newest_members;
};

struct MemberRecord {
  int rank = 0;
  std::string name;
  std::string host;
  uint16_t port = 0;
  MemberState state = MemberState::kJoined;
  int64_t lease_until_ms = 0;  // wall-clock ms; renewed while the member is connected
  bool operator==(const MemberRecord&) const = default;
};

// One membership generation: every change of the member set (today: all
// workers joined; with elastic training also a join, a leave or a loss)
// is a row, written before the generation is published, so a restarted
// coordinator knows the current generation and its members.
struct GenerationRecord {
  uint64_t number = 0;
  int64_t first_step = 0;              // the first training step it runs
  std::string why;                     // "all 3 workers joined", "rank 1 lost: ..."
  std::vector<MemberRecord> members;   // by rank (state and lease as at the change)
  bool operator==(const GenerationRecord&) const = default;
};

using ConnId = uint64_t;

struct CoordTime {
  SteadyClock::time_point steady;
  int64_t wall_ms = 0;
};

// A worker's JoinRequest, decoded.
struct JoinAsk {
  std::string job_id;
  std::string name;
  std::string host;
  uint16_t port = 0;
  int requested_rank = -1;  // -1: any free rank
  bool rejoin = false;      // a running worker whose coordinator restarted
  std::string plan_fingerprint;  // "" = not checked
  bool spare = false;            // elastic: waits as a spare, also while the job forms
};

namespace action {
// Store writes (JobStore's methods of the same names).
struct PutMember {
  MemberRecord member;
};
struct RemoveMember {
  int rank = 0;
};
struct SetJobState {
  JobPhase phase;
  std::string failure;
  uint64_t generation = 0;
};
struct RenewLeases {
  std::vector<int> ranks;
  int64_t until_ms = 0;
};
struct PutGeneration {
  GenerationRecord generation;
};
struct SetStableGeneration {
  uint64_t generation = 0;
};
// Messages.
struct Refuse {  // a JoinReply with this error, then disconnect
  ConnId to = 0;
  std::string reason;
};
struct Admit {  // the JoinReply of an admitted worker
  ConnId to = 0;
  int rank = 0;
  int world = 0;
  std::string config_toml;
  uint64_t generation = 0;
};
struct PublishRoster {
  std::vector<ConnId> to;
  uint64_t generation = 0;
  std::vector<MemberRecord> members;  // by position in the group (rank = the member's id)
  std::string why;
  std::set<int> joining;  // ids not in generation `stable` (every pair with them is new)
  // The newest generation every member of which reported it formed
  // (OnFormed); 0: none. Members reuse that generation's connections.
  uint64_t stable = 0;
};
struct AnnounceFailure {
  std::vector<ConnId> to;
  int rank = 0;
  std::string host, reason;
};
struct RelayProgress {  // forward the progress message being handled
  std::vector<ConnId> to;
};
struct AnnounceDone {
  std::vector<ConnId> to;
  std::string summary_json;
};
// Tell member `rank` (on `to`) that its Done is recorded: sent after the
// PutMember that stores it, so a member that has this may exit; one whose
// coordinator was lost before sending it tells the restarted one again.
struct AckDone {
  ConnId to = 0;
  int rank = 0;
};
// Serving is over: return `verdict` (OK, or FailedPrecondition naming the
// failed rank).
struct Stop {
  Status verdict;
};
}  // namespace action

using Action = std::variant<action::PutMember, action::RemoveMember, action::SetJobState, action::RenewLeases,
                            action::PutGeneration, action::SetStableGeneration,
                            action::Refuse, action::Admit, action::PublishRoster, action::AnnounceFailure,
                            action::RelayProgress, action::AnnounceDone, action::AckDone, action::Stop>;
using Actions = std::vector<Action>;

struct JobStateOptions {
  std::string listen_host;  // named as the "host" of a join timeout, where no worker is to blame
  std::chrono::milliseconds join_timeout{60000};
  std::chrono::milliseconds peer_timeout{10000};
  // Elastic jobs (cluster.elastic): a lost or leaving member makes a new
  // generation of the others instead of failing the job; joiners are
  // admitted while running (up to max_workers, then wait as spares); below
  // min_workers the job pauses for up to join_timeout, then fails naming
  // the members it lost.
  bool elastic = false;
  int min_workers = 1;
  int max_workers = 0;  // 0 = the job's world
  // cluster.spares: warm spares are started with the job, so a member lost
  // before the job formed waits for one (FillVacatedPlaces); without any,
  // the job forms short of it (min_workers permitting) instead of waiting.
  int spares = 0;
  // Whether members are sent each generation's roster. An asynchronous job
  // (elastic membership, but its workers ask for units and never read a
  // roster) records its generations without sending them: every join sent
  // its roster of all members to every member, 500,500 rosters (11 GB)
  // for 1,000 joins, left unread in the workers' queues.
  bool rosters = true;
};

class JobStateMachine {
 public:
  // From what the store holds (a resumed job brings its members, which get
  // the join timeout from `now` to rejoin). A job that already ended only
  // stops, with its verdict, at the first timer.
  JobStateMachine(JobStateOptions options, JobRecord job, std::vector<MemberRecord> members, CoordTime now);

  Actions OnJoin(ConnId from, const JoinAsk& ask, CoordTime now);
  Actions OnWatch(ConnId from, const std::string& job_id);
  // Messages from connections that are not members are ignored.
  Actions OnProgress(ConnId from);
  Actions OnDone(ConnId from, const std::string& summary_json);
  // A worker's report that training failed. Held back (half the peer
  // timeout + 1 s, at most 5 s) because its peers often notice a dead rank
  // before the coordinator sees that rank's connection drop: the lost rank
  // is the one to name, and supersedes the report.
  Actions OnFailureReport(ConnId from, const std::string& reason, CoordTime now);
  // A member's or watcher's connection is gone.
  Actions OnConnectionLost(ConnId conn, const std::string& why);
  // Elastic jobs: a member leaves (SIGTERM), or reports another member lost
  // (its collective failed). Ignored for other jobs and from non-members.
  Actions OnLeave(ConnId from, const std::string& reason);
  Actions OnSuspect(ConnId from, int suspect, const std::string& reason);
  // Elastic jobs: a member formed `generation` and agreed on its state.
  // Once every member of a generation has, it is the stable one: the next
  // roster marks as joining whoever is not in it, and the others reuse its
  // connections. (Marking "not in the last published roster" instead broke
  // when a generation was superseded before every member formed it: a
  // member that skipped it had no connection to its joiner.)
  Actions OnFormed(ConnId from, uint64_t generation);
  // The job failed for a reason no member is to blame for (an async job's
  // unit that failed every attempt): `reason` is the whole failure.
  Actions OnJobFailure(const std::string& reason);
  // The launcher (a watcher) saw the process of worker `rank` end. Only
  // an elastic job that has not formed acts on it: a rank that is not a
  // member (it may never have joined, so there was no connection to lose)
  // is vacated, and a waiting spare takes its place (FillVacatedPlaces), or
  // without spares the job may start short of it (FormWhenFull). A
  // member's own lost connection says the same, so that one is left to
  // OnConnectionLost.
  Actions OnWorkerExited(int rank, const std::string& reason);
  // Timers: held-back reports, lease renewal (every second), the join
  // timeout, members of a resumed job that never came back, the end of the
  // job, and the linger after it (up to 3 s while anyone is connected, so
  // the verdict reaches them).
  Actions OnTimer(CoordTime now);

  // The connections worth watching for loss: connected members (by rank),
  // then watchers.
  std::vector<ConnId> Connections() const;
  std::optional<int> RankOf(ConnId conn) const;
  const JobRecord& job() const { return job_; }
  const std::map<int, MemberRecord>& members() const { return members_; }
  const std::set<ConnId>& watchers() const { return watchers_; }
  // Held-back report grace for a peer timeout.
  static std::chrono::milliseconds ReportGrace(std::chrono::milliseconds peer_timeout);

 private:
  struct Link {
    ConnId conn = 0;  // 0: not connected since this coordinator started (resumed member)
    bool connected = false;
  };
  struct PendingReport {
    int reporter = 0;
    std::string host, reason;
    SteadyClock::time_point until;
  };
  void Fail(int rank, const std::string& host, const std::string& reason, Actions& out);
  // Elastic: removes `rank` from the membership (state `state`) and forms
  // the next generation.
  void Remove(int rank, MemberState state, const std::string& why, Actions& out);
  // Elastic: admits spares up to max_workers and publishes the next
  // generation of the active members, or pauses below min_workers.
  void NextGeneration(const std::string& why, Actions& out);
  bool Active(const MemberRecord& m) const {
    return m.state == MemberState::kJoined || m.state == MemberState::kDone;
  }
  // Members that are not waiting spares: those that joined with a rank
  // below the world, and spares that took the place of one lost before the
  // job formed. The job forms when there are `world` of them.
  int RankedCount() const {
    int n = 0;
    for (const auto& [rank, m] : members_) n += m.state != MemberState::kSpare ? 1 : 0;
    return n;
  }
  int ActiveCount() const {
    int n = 0;
    for (const auto& [rank, m] : members_) n += Active(m) ? 1 : 0;
    return n;
  }
  int max_workers() const { return o_.max_workers > 0 ? o_.max_workers : job_.world; }
  void OnMemberLost(int rank, const std::string& why, Actions& out);
  // Elastic, while the job forms: connected spares take the places of
  // members lost before it formed (vacated_), and the job forms once every
  // place is filled.
  void FillVacatedPlaces(Actions& out);
  // The first generation, once `world` members are there (RankedCount),
  // or, in an elastic job without spares, once every place not vacated is
  // taken and at least min_workers members are there.
  void FormWhenFull(Actions& out);
  void Refuse(ConnId to, std::string reason, Actions& out) const;
  std::vector<ConnId> ConnectedMembers() const;
  bool Ended() const { return job_.phase == JobPhase::kFinished || job_.phase == JobPhase::kFailed; }

  JobStateOptions o_;
  JobRecord job_;
  std::map<int, MemberRecord> members_;
  std::map<int, Link> links_;
  // The connected links by connection (RankOf runs for every message: a
  // scan of links_ made each one O(members), and 1,000 members' progress
  // reports quadratic). Kept by ConnectLink / DisconnectLink / EraseLink.
  std::unordered_map<ConnId, int> rank_by_conn_;
  void ConnectLink(int rank, ConnId conn);
  void DisconnectLink(int rank);
  void EraseLink(int rank);
  std::set<ConnId> watchers_;
  std::string done_summary_;
  std::optional<PendingReport> pending_report_;
  SteadyClock::time_point started_, last_lease_;
  std::optional<SteadyClock::time_point> ended_;
  // Elastic bookkeeping.
  std::string fingerprint_;                 // the job's plan fingerprint (the first one heard)
  std::set<int> last_roster_;               // ids of the newest published generation
  uint64_t stable_ = 0;                     // see OnFormed
  std::set<int> stable_ids_;                // the members of generation stable_
  struct Forming {
    std::set<int> members, yet;  // of the generation; those yet to report formed
  };
  std::map<uint64_t, Forming> forming_;     // published generations above stable_
  bool paused_ = false;                     // below min_workers, waiting for joiners
  std::optional<SteadyClock::time_point> paused_since_;
  std::vector<std::string> lost_since_pause_;  // "rank 1 on host"
  int first_lost_ = -1;
  // Elastic, before the first generation: ranks whose member was lost and
  // that no worker or spare has taken yet, and the spare (member id) that
  // took each filled one. Not persisted: a coordinator restarted before the
  // job formed counts members only (a spare it recorded as joined counts).
  std::set<int> vacated_;
  std::map<int, int> replaced_by_;
  // The job failed in this machine's life because a member was lost or hung
  // (exit 3: "a worker failed"), not for a job-level reason or a state file
  // that already said so (exit 2).
  bool failed_by_member_ = false;
};

}  // namespace tenax::coord

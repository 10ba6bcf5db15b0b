// The coordinator's state machine, event by event, on a fake clock: every
// test checks the actions it answers with (their order, addressees and
// values), never a sleep.
#include "job_state.h"

#include "tenax/coord/coord_codec.h"
#include "tenax/coord/coordinator_client.h"

#include <gtest/gtest.h>

#include <set>

namespace tenax::coord {
namespace {

using namespace std::chrono_literals;

// A clock that only moves when told.
struct FakeClock {
  SteadyClock::time_point steady{std::chrono::hours(1)};
  int64_t wall_ms = 1'700'000'000'000;
  CoordTime now() const { return {steady, wall_ms}; }
  CoordTime Advance(std::chrono::milliseconds d) {
    steady += d;
    wall_ms += d.count();
    return now();
  }
};

JobStateOptions Options() {
  JobStateOptions o;
  o.listen_host = "10.0.0.1";
  o.join_timeout = 30s;
  o.peer_timeout = 2s;
  return o;
}

JobRecord NewJob(int world) { return {"job-x", "mode = \"sync\"\n", world, JobPhase::kJoining, 0, "", false, 0, {}, {}}; }

JoinAsk Ask(int requested_rank, const std::string& name) {
  return {"job-x", name, "host-" + name, static_cast<uint16_t>(5000 + name.size()), requested_rank, false, ""};
}

// A warm spare's join (cluster.spares): no rank asked, JoinRequest.spare set.
JoinAsk SpareAsk() {
  JoinAsk a = Ask(-1, "spare");
  a.spare = true;
  return a;
}

template <typename T>
std::vector<T> All(const Actions& actions) {
  std::vector<T> out;
  for (const auto& a : actions) {
    if (auto* t = std::get_if<T>(&a)) out.push_back(*t);
  }
  return out;
}

template <typename T>
size_t IndexOf(const Actions& actions) {
  for (size_t i = 0; i < actions.size(); ++i) {
    if (std::holds_alternative<T>(actions[i])) return i;
  }
  return actions.size();
}

// The single action of type T, failing the test if there is not exactly one.
template <typename T>
T One(const Actions& actions) {
  auto all = All<T>(actions);
  EXPECT_EQ(1u, all.size());
  return all.empty() ? T{} : all.front();
}

// The rank an admitted join got (-1 and a test failure if it was refused).
int AdmittedRank(const Actions& actions) {
  auto admits = All<action::Admit>(actions);
  EXPECT_EQ(1u, admits.size());
  for (const auto& r : All<action::Refuse>(actions)) ADD_FAILURE() << "refused: " << r.reason;
  return admits.empty() ? -1 : admits.front().rank;
}

std::string Refusal(const Actions& actions) {
  auto r = All<action::Refuse>(actions);
  EXPECT_EQ(1u, r.size());
  EXPECT_TRUE(All<action::Admit>(actions).empty());
  return r.empty() ? "" : r.front().reason;
}

// A running job of `world` ranks: rank r joined on connection 100 + r.
struct Running {
  FakeClock clock;
  JobStateMachine m;
  explicit Running(int world, JobStateOptions o = Options()) : m(o, NewJob(world), {}, clock.now()) {
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(r, AdmittedRank(m.OnJoin(100 + r, Ask(r, "w" + std::to_string(r)), clock.now())));
    }
    EXPECT_EQ(JobPhase::kRunning, m.job().phase);
    // Every member formed the first generation (an elastic worker reports
    // it); the last report makes it the stable one, which is recorded.
    for (int r = 0; r < world; ++r) {
      const Actions a = m.OnFormed(100 + r, 1);
      if (o.elastic && r + 1 == world) {
        EXPECT_EQ(1u, One<action::SetStableGeneration>(a).generation);
      } else {
        EXPECT_TRUE(a.empty());
      }
    }
  }
};

TEST(JobStateMachine, RanksGoToWhoAsksThenToTheLowestFree) {
  FakeClock clock;
  JobStateMachine m(Options(), NewJob(4), {}, clock.now());
  EXPECT_EQ(2, AdmittedRank(m.OnJoin(1, Ask(2, "a"), clock.now())));
  EXPECT_EQ(0, AdmittedRank(m.OnJoin(2, Ask(-1, "b"), clock.now())));
  EXPECT_EQ(1, AdmittedRank(m.OnJoin(3, Ask(-1, "c"), clock.now())));
  // Taken while its holder is connected; out of range.
  EXPECT_EQ("rank 2 is already taken by a", Refusal(m.OnJoin(4, Ask(2, "d"), clock.now())));
  EXPECT_EQ("rank 4 asked for, but job 'job-x' has 4 workers", Refusal(m.OnJoin(4, Ask(4, "d"), clock.now())));
  EXPECT_EQ("this coordinator serves job 'job-x', not 'other'",
            Refusal(m.OnJoin(4, JoinAsk{"other", "d", "h", 1, -1, false, ""}, clock.now())));
  // The admitted member is recorded (before it is told) with its lease.
  auto actions = m.OnJoin(5, Ask(-1, "e"), clock.now());
  EXPECT_EQ(3, AdmittedRank(actions));
  EXPECT_LT(IndexOf<action::PutMember>(actions), IndexOf<action::Admit>(actions));
  EXPECT_EQ((MemberRecord{3, "e", "host-e", 5001, MemberState::kJoined, clock.wall_ms + 2000}),
            One<action::PutMember>(actions).member);
  const auto admit = One<action::Admit>(actions);
  EXPECT_EQ(5u, admit.to);
  EXPECT_EQ(4, admit.world);
  EXPECT_EQ("mode = \"sync\"\n", admit.config_toml);
  // Everyone is in: a fifth is refused.
  EXPECT_EQ("job 'job-x' is already running with all 4 workers", Refusal(m.OnJoin(6, Ask(-1, "f"), clock.now())));
  EXPECT_EQ((std::vector<ConnId>{2, 3, 1, 5}), m.Connections());  // by rank
}

TEST(JobStateMachine, RosterIsPublishedOnceAllJoinedWithTheNextGeneration) {
  FakeClock clock;
  JobStateMachine m(Options(), NewJob(3), {}, clock.now());
  for (int r : {1, 0}) {
    auto actions = m.OnJoin(10 + r, Ask(r, "w" + std::to_string(r)), clock.now());
    EXPECT_TRUE(All<action::PublishRoster>(actions).empty());
    EXPECT_EQ(0u, One<action::Admit>(actions).generation);
  }
  EXPECT_EQ(JobPhase::kJoining, m.job().phase);
  auto actions = m.OnJoin(12, Ask(-1, "w2"), clock.now());
  EXPECT_EQ(2, AdmittedRank(actions));
  const auto state = One<action::SetJobState>(actions);
  EXPECT_EQ(JobPhase::kRunning, state.phase);
  EXPECT_EQ(1u, state.generation);
  const auto roster = One<action::PublishRoster>(actions);
  EXPECT_LT(IndexOf<action::SetJobState>(actions), IndexOf<action::PublishRoster>(actions)) << "durable first";
  // The generation is a row of its own, written before anyone hears of it.
  const auto generation = One<action::PutGeneration>(actions).generation;
  EXPECT_LT(IndexOf<action::PutGeneration>(actions), IndexOf<action::PublishRoster>(actions)) << "durable first";
  EXPECT_EQ(1u, generation.number);
  EXPECT_EQ(0, generation.first_step);
  EXPECT_EQ("all 3 workers joined", generation.why);
  EXPECT_EQ(roster.members, generation.members);
  EXPECT_EQ(1u, roster.generation);
  EXPECT_EQ((std::vector<ConnId>{10, 11, 12}), roster.to);
  ASSERT_EQ(3u, roster.members.size());
  for (int r = 0; r < 3; ++r) {
    const std::string name = "w" + std::to_string(r);
    EXPECT_EQ((MemberRecord{r, name, "host-" + name, 5002, MemberState::kJoined, clock.wall_ms + 2000}),
              roster.members[static_cast<size_t>(r)]);
  }
  EXPECT_EQ(1u, m.job().generation);
}

TEST(JobStateMachine, AMemberLeavingBeforeTheStartFreesItsRank) {
  FakeClock clock;
  JobStateMachine m(Options(), NewJob(2), {}, clock.now());
  EXPECT_EQ(0, AdmittedRank(m.OnJoin(1, Ask(-1, "a"), clock.now())));
  auto actions = m.OnConnectionLost(1, "gone");
  EXPECT_EQ(0, One<action::RemoveMember>(actions).rank);
  EXPECT_TRUE(All<action::AnnounceFailure>(actions).empty());
  EXPECT_EQ(0, AdmittedRank(m.OnJoin(2, Ask(-1, "b"), clock.now())));
  EXPECT_EQ(1, AdmittedRank(m.OnJoin(3, Ask(-1, "c"), clock.now())));
  EXPECT_EQ("b", m.members().at(0).name);
}

TEST(JobStateMachine, LostMemberFailsTheJobNamingRankAndHostToEveryone) {
  Running job(3);
  EXPECT_TRUE(job.m.OnWatch(50, "job-x").empty());
  auto actions = job.m.OnConnectionLost(101, "connection reset");
  const auto failure = One<action::AnnounceFailure>(actions);
  EXPECT_EQ(1, failure.rank);
  EXPECT_EQ("host-w1", failure.host);
  EXPECT_EQ("lost its connection (w1): connection reset", failure.reason);
  EXPECT_EQ((std::vector<ConnId>{100, 102, 50}), failure.to);  // the survivors and the watcher
  const auto state = One<action::SetJobState>(actions);
  EXPECT_EQ(JobPhase::kFailed, state.phase);
  EXPECT_EQ("rank 1 on host-w1 failed: lost its connection (w1): connection reset", state.failure);
  EXPECT_EQ(MemberState::kFailed, One<action::PutMember>(actions).member.state);
  EXPECT_LT(IndexOf<action::SetJobState>(actions), IndexOf<action::AnnounceFailure>(actions)) << "durable first";
  // Only the first loss is the verdict; a late watcher hears it.
  EXPECT_TRUE(job.m.OnConnectionLost(100, "reset").empty());
  const auto late = One<action::AnnounceFailure>(job.m.OnWatch(51, "job-x"));
  EXPECT_EQ((std::vector<ConnId>{51}), late.to);
  EXPECT_EQ(state.failure, late.reason);
  EXPECT_EQ("job 'job-x' has already failed", Refusal(job.m.OnJoin(9, Ask(-1, "z"), job.clock.now())));
}

TEST(JobStateMachine, AReportIsHeldBackAndTheLostRankItWaitedForIsNamed) {
  Running job(3);  // peer timeout 2 s: grace 2 s
  ASSERT_EQ(2000ms, JobStateMachine::ReportGrace(2s));
  EXPECT_TRUE(job.m.OnFailureReport(100, "waiting for rank 2: deadline exceeded", job.clock.now()).empty());
  // The reporter leaves right after telling us: still held back.
  EXPECT_TRUE(job.m.OnConnectionLost(100, "closed").empty());
  EXPECT_TRUE(All<action::AnnounceFailure>(job.m.OnTimer(job.clock.Advance(1999ms))).empty());
  // Rank 2's connection drops within the grace: rank 2 is named.
  auto actions = job.m.OnConnectionLost(102, "timed out");
  const auto failure = One<action::AnnounceFailure>(actions);
  EXPECT_EQ(2, failure.rank);
  EXPECT_EQ("host-w2", failure.host);
  EXPECT_EQ((std::vector<ConnId>{101}), failure.to);
  // The held-back report expires without a second verdict.
  actions = job.m.OnTimer(job.clock.Advance(10ms));
  EXPECT_TRUE(All<action::AnnounceFailure>(actions).empty());
  EXPECT_TRUE(All<action::SetJobState>(actions).empty());
  EXPECT_EQ("rank 2 on host-w2 failed: lost its connection (w2): timed out", job.m.job().failure);
}

TEST(JobStateMachine, AReportNobodySupersedesNamesTheReporterAfterTheGrace) {
  JobStateOptions o = Options();
  o.peer_timeout = 10s;  // grace min(5 s + 1 s, 5 s)
  Running job(2, o);
  ASSERT_EQ(5000ms, JobStateMachine::ReportGrace(10s));
  job.m.OnFailureReport(101, "out of memory", job.clock.now());
  job.clock.Advance(1s);
  job.m.OnFailureReport(100, "a second report", job.clock.now());  // the first report stands
  EXPECT_TRUE(All<action::AnnounceFailure>(job.m.OnTimer(job.clock.Advance(3999ms))).empty());
  const auto failure = One<action::AnnounceFailure>(job.m.OnTimer(job.clock.Advance(1ms)));
  EXPECT_EQ(1, failure.rank);
  EXPECT_EQ("host-w1", failure.host);
  EXPECT_EQ("out of memory", failure.reason);
  EXPECT_EQ("rank 1 on host-w1 failed: out of memory", job.m.job().failure);
}

TEST(JobStateMachine, DoneByEveryRankFinishesTheJobAndStopsOnceAllLeft) {
  Running job(2);
  EXPECT_TRUE(job.m.OnWatch(50, "job-x").empty());
  EXPECT_EQ((std::vector<ConnId>{50}), One<action::RelayProgress>(job.m.OnProgress(100)).to);
  EXPECT_TRUE(job.m.OnProgress(77).empty()) << "not a member";
  auto actions = job.m.OnDone(101, "{\"steps\": 60}");
  EXPECT_EQ(MemberState::kDone, One<action::PutMember>(actions).member.state);
  // The member hears that its Done is recorded only after it is stored.
  EXPECT_EQ(101u, One<action::AckDone>(actions).to);
  EXPECT_EQ(1, One<action::AckDone>(actions).rank);
  EXPECT_LT(IndexOf<action::PutMember>(actions), IndexOf<action::AckDone>(actions));
  EXPECT_TRUE(job.m.OnConnectionLost(101, "closed").empty()) << "done and gone is expected";
  actions = job.m.OnTimer(job.clock.Advance(10ms));
  EXPECT_TRUE(All<action::SetJobState>(actions).empty()) << "rank 0 is not done yet";
  job.m.OnDone(100, "");
  actions = job.m.OnTimer(job.clock.Advance(10ms));
  const auto state = One<action::SetJobState>(actions);
  EXPECT_EQ(JobPhase::kFinished, state.phase);
  EXPECT_EQ(1u, state.generation);
  const auto done = One<action::AnnounceDone>(actions);
  EXPECT_EQ((std::vector<ConnId>{50}), done.to);
  EXPECT_EQ("{\"steps\": 60}", done.summary_json);  // the last non-empty summary
  EXPECT_LT(IndexOf<action::SetJobState>(actions), IndexOf<action::AnnounceDone>(actions));
  EXPECT_TRUE(All<action::Stop>(actions).empty()) << "lingers while rank 0 and the watcher are connected";
  // A rank rejoining it now (its Done was stored before a restart) hears
  // that the job finished, in the words its client knows to mean "done".
  const std::string finished = Refusal(job.m.OnJoin(9, Ask(-1, "z"), job.clock.now()));
  EXPECT_EQ("job 'job-x' has already finished", finished);
  EXPECT_NE(std::string::npos, finished.find(kJobFinishedRefusal));
  job.m.OnConnectionLost(100, "closed");
  EXPECT_TRUE(All<action::Stop>(job.m.OnTimer(job.clock.Advance(10ms))).empty()) << "the watcher";
  job.m.OnConnectionLost(50, "closed");
  const auto stop = One<action::Stop>(job.m.OnTimer(job.clock.Advance(10ms)));
  EXPECT_TRUE(stop.verdict.ok()) << stop.verdict.ToString();
}

TEST(JobStateMachine, AFailedJobLingersAtMostThreeSecondsThenStopsWithTheVerdict) {
  Running job(2);
  job.m.OnConnectionLost(101, "reset");
  EXPECT_TRUE(All<action::Stop>(job.m.OnTimer(job.clock.now())).empty()) << "rank 0 still connected";
  EXPECT_TRUE(All<action::Stop>(job.m.OnTimer(job.clock.Advance(3000ms))).empty());
  const auto stop = One<action::Stop>(job.m.OnTimer(job.clock.Advance(1ms)));
  // A lost member: exit 3 ("a worker failed"), not 2 (bad input).
  EXPECT_EQ(StatusCode::kPeerLost, stop.verdict.code());
  EXPECT_EQ("rank 1 on host-w1 failed: lost its connection (w1): reset", stop.verdict.message());
}

TEST(JobStateMachine, AJobLevelFailureStopsAsAFailedPrecondition) {
  Running job(2);
  job.m.OnJobFailure("the work queue failed: disk full");
  job.m.OnConnectionLost(100, "bye");
  job.m.OnConnectionLost(101, "bye");
  const auto stop = One<action::Stop>(job.m.OnTimer(job.clock.Advance(3001ms)));
  EXPECT_EQ(StatusCode::kFailedPrecondition, stop.verdict.code());
  EXPECT_EQ("the work queue failed: disk full", stop.verdict.message());
}

TEST(JobStateMachine, JoinTimeoutNamesTheMissingRanks) {
  FakeClock clock;
  JobStateMachine m(Options(), NewJob(4), {}, clock.now());
  m.OnJoin(1, Ask(1, "a"), clock.now());
  m.OnJoin(2, Ask(3, "b"), clock.now());
  EXPECT_TRUE(All<action::AnnounceFailure>(m.OnTimer(clock.Advance(30s))).empty()) << "not yet past 30 s";
  const auto failure = One<action::AnnounceFailure>(m.OnTimer(clock.Advance(1ms)));
  EXPECT_EQ(0, failure.rank);
  EXPECT_EQ("10.0.0.1", failure.host);
  EXPECT_EQ("only 2 of 4 workers joined within 30 s (missing: ranks 0, 2)", failure.reason);
  EXPECT_EQ((std::vector<ConnId>{1, 2}), failure.to);
  EXPECT_EQ(JobPhase::kFailed, m.job().phase);
}

TEST(JobStateMachine, LeasesOfConnectedMembersAreRenewedEverySecond) {
  Running job(3);
  job.m.OnDone(102, "");
  job.m.OnConnectionLost(102, "closed");
  EXPECT_TRUE(All<action::RenewLeases>(job.m.OnTimer(job.clock.Advance(999ms))).empty());
  const auto renew = One<action::RenewLeases>(job.m.OnTimer(job.clock.Advance(1ms)));
  EXPECT_EQ((std::vector<int>{0, 1}), renew.ranks);
  EXPECT_EQ(job.clock.wall_ms + 2000, renew.until_ms);
  EXPECT_TRUE(All<action::RenewLeases>(job.m.OnTimer(job.clock.Advance(500ms))).empty());
}

// A coordinator restarted on its state file: the members it recorded rejoin
// with their ranks; one that does not come back fails the job.
TEST(JobStateMachine, ResumedJobTakesItsMembersBackAndFailsOneThatNeverReturns) {
  FakeClock clock;
  JobRecord job{"job-x", "cfg", 3, JobPhase::kRunning, 1, "", true, 0, {}, {}};
  std::vector<MemberRecord> stored;
  for (int r = 0; r < 3; ++r) {
    stored.push_back({r, "w" + std::to_string(r), "host-w" + std::to_string(r), 7000, MemberState::kJoined, 5});
  }
  stored[2].state = MemberState::kDone;  // finished before the restart
  JobStateMachine m(Options(), job, stored, clock.now());
  EXPECT_TRUE(m.Connections().empty());
  // Only a rejoin with the recorded name gets a rank back.
  EXPECT_EQ("job 'job-x' is already running with all 3 workers", Refusal(m.OnJoin(1, Ask(0, "w0"), clock.now())));
  JoinAsk ask = Ask(0, "impostor");
  ask.rejoin = true;
  EXPECT_EQ("rank 0 of job 'job-x' is not 'impostor'", Refusal(m.OnJoin(1, ask, clock.now())));
  ask = {"job-x", "w0", "host-w0", 7001, 0, true, ""};
  auto actions = m.OnJoin(2, ask, clock.Advance(5s));
  const auto admit = One<action::Admit>(actions);
  EXPECT_EQ(0, admit.rank);
  EXPECT_EQ(1u, admit.generation) << "same generation: nothing changed";
  EXPECT_TRUE(All<action::PublishRoster>(actions).empty());
  EXPECT_EQ(7001, One<action::PutMember>(actions).member.port);
  EXPECT_EQ(std::optional<int>(0), m.RankOf(2));
  // Rank 1 never comes back; rank 2 had finished and need not.
  EXPECT_TRUE(All<action::AnnounceFailure>(m.OnTimer(clock.Advance(25s))).empty()) << "30 s since the restart";
  const auto failure = One<action::AnnounceFailure>(m.OnTimer(clock.Advance(1ms)));
  EXPECT_EQ(1, failure.rank);
  EXPECT_EQ("host-w1", failure.host);
  EXPECT_EQ("did not reconnect to the restarted coordinator within the join timeout", failure.reason);
  EXPECT_EQ((std::vector<ConnId>{2}), failure.to);
}

TEST(JobStateMachine, ResumedJobFinishesWhenTheRejoinedRanksAreDone) {
  FakeClock clock;
  JobRecord job{"job-x", "cfg", 2, JobPhase::kRunning, 1, "", true, 0, {}, {}};
  std::vector<MemberRecord> stored{{0, "w0", "h0", 7000, MemberState::kJoined, 5},
                                   {1, "w1", "h1", 7000, MemberState::kJoined, 5}};
  JobStateMachine m(Options(), job, stored, clock.now());
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(r, AdmittedRank(m.OnJoin(10 + r, {"job-x", stored[r].name, "h", 1, r, true, ""}, clock.now())));
    m.OnDone(10 + r, "");
  }
  const auto state = One<action::SetJobState>(m.OnTimer(clock.Advance(1ms)));
  EXPECT_EQ(JobPhase::kFinished, state.phase);
  EXPECT_EQ(1u, state.generation);
}

TEST(JobStateMachine, PhasesAndMemberStatesRoundTripThroughTheirStoredWords) {
  for (JobPhase p : {JobPhase::kJoining, JobPhase::kRunning, JobPhase::kFinished, JobPhase::kFailed}) {
    EXPECT_EQ(p, ParseJobPhase(ToString(p)));
  }
  for (MemberState s : {MemberState::kJoined, MemberState::kDone, MemberState::kFailed}) {
    EXPECT_EQ(s, ParseMemberState(ToString(s)));
  }
  EXPECT_EQ("running", ToString(JobPhase::kRunning));
  EXPECT_FALSE(ParseJobPhase("Running").has_value());
  EXPECT_FALSE(ParseMemberState("").has_value());
}


// --- Elastic jobs ---

JobStateOptions ElasticOptions(int min_workers, int max_workers) {
  JobStateOptions o = Options();
  o.elastic = true;
  o.min_workers = min_workers;
  o.max_workers = max_workers;
  return o;
}

// An elastic job with `spares` warm spares started with it (cluster.spares).
JobStateOptions SpareOptions(int min_workers, int max_workers, int spares = 1) {
  JobStateOptions o = ElasticOptions(min_workers, max_workers);
  o.spares = spares;
  return o;
}

std::vector<int> Ids(const std::vector<MemberRecord>& members) {
  std::vector<int> ids;
  for (const auto& m : members) ids.push_back(m.rank);
  return ids;
}

TEST(JobStateMachineElastic, ALostMemberMakesTheNextGenerationOfTheOthersWrittenBeforeItIsPublished) {
  Running job(3, ElasticOptions(2, 3));
  auto actions = job.m.OnConnectionLost(101, "peer silent for 2000 ms");
  EXPECT_TRUE(All<action::AnnounceFailure>(actions).empty());
  const auto gen = One<action::PutGeneration>(actions).generation;
  const auto roster = One<action::PublishRoster>(actions);
  EXPECT_LT(IndexOf<action::PutGeneration>(actions), IndexOf<action::PublishRoster>(actions));
  EXPECT_EQ(2u, gen.number);
  EXPECT_EQ((std::vector<int>{0, 2}), Ids(gen.members));
  EXPECT_EQ((std::vector<int>{0, 2}), Ids(roster.members));
  EXPECT_EQ((std::vector<ConnId>{100, 102}), roster.to);
  EXPECT_TRUE(roster.joining.empty());
  EXPECT_NE(roster.why.find("rank 1 lost"), std::string::npos) << roster.why;
  EXPECT_NE(roster.why.find("peer silent"), std::string::npos) << roster.why;
  EXPECT_EQ(JobPhase::kRunning, job.m.job().phase);
  EXPECT_EQ(MemberState::kFailed, job.m.members().at(1).state);
}

// An asynchronous job (rosters = false): a join still makes a generation,
// recorded before anything else, but its roster goes only to the watchers
// (the launcher shows it), not to the members, who never read one.
TEST(JobStateMachineElastic, AnAsyncJobRecordsEachGenerationButSendsItsRosterOnlyToWatchers) {
  JobStateOptions o = ElasticOptions(1, 8);
  o.rosters = false;
  FakeClock clock;
  JobStateMachine m(o, NewJob(2), {}, clock.now());
  (void)m.OnWatch(300, "job-x");
  for (int r = 0; r < 2; ++r) {
    auto joined = m.OnJoin(100 + r, Ask(r, "w" + std::to_string(r)), clock.now());
    EXPECT_EQ(r, AdmittedRank(joined));
    if (r == 1) {  // the first generation
      EXPECT_EQ((std::vector<ConnId>{300}), One<action::PublishRoster>(joined).to);
    }
  }
  auto actions = m.OnJoin(200, Ask(-1, "late"), clock.now());
  EXPECT_EQ(2, AdmittedRank(actions));
  const auto gen = One<action::PutGeneration>(actions).generation;
  EXPECT_EQ(2u, gen.number);
  EXPECT_EQ((std::vector<int>{0, 1, 2}), Ids(gen.members));
  const auto roster = One<action::PublishRoster>(actions);
  EXPECT_EQ((std::vector<ConnId>{300}), roster.to);
  EXPECT_EQ((std::vector<int>{0, 1, 2}), Ids(roster.members));
  // A loss likewise: recorded, told to the watcher only.
  actions = m.OnConnectionLost(101, "reset");
  EXPECT_EQ(3u, One<action::PutGeneration>(actions).generation.number);
  EXPECT_EQ((std::vector<ConnId>{300}), One<action::PublishRoster>(actions).to);
}

// RankOf answers for every message (an index by connection since stop 51,
// no longer a scan of the members): it follows losses, evictions, joins and
// a rank's rejoin on a new connection, and never names a stale connection.
TEST(JobStateMachineElastic, RankOfFollowsEveryConnectionThroughLossesEvictionsAndJoins) {
  Running job(3, ElasticOptions(1, 4));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(std::optional<int>(r), job.m.RankOf(static_cast<ConnId>(100 + r)));
  EXPECT_EQ(std::nullopt, job.m.RankOf(99));
  (void)job.m.OnConnectionLost(101, "reset");
  EXPECT_EQ(std::nullopt, job.m.RankOf(101));
  EXPECT_EQ(std::optional<int>(0), job.m.RankOf(100));
  // Rank 0 reports rank 2 stuck: it is evicted and its connection no longer counts.
  (void)job.m.OnSuspect(100, 2, "no progress before the deadline");
  EXPECT_EQ(std::nullopt, job.m.RankOf(102));
  auto admitted = job.m.OnJoin(200, Ask(-1, "late"), job.clock.now());
  const int late = AdmittedRank(admitted);
  EXPECT_EQ(3, late);
  EXPECT_EQ(std::optional<int>(late), job.m.RankOf(200));
  EXPECT_EQ(std::optional<int>(0), job.m.RankOf(100));
  const auto connected = job.m.Connections();
  EXPECT_EQ((std::set<ConnId>{100, 200}), std::set<ConnId>(connected.begin(), connected.end()));
}

TEST(JobStateMachineElastic, AJoinerGetsANewIdAndIsPublishedAsJoiningUpToMaxWorkersThenWaitsAsASpare) {
  Running job(2, ElasticOptions(1, 3));
  auto actions = job.m.OnJoin(200, Ask(-1, "late"), job.clock.now());
  EXPECT_EQ(2, AdmittedRank(actions));
  auto roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(2u, roster.generation);
  EXPECT_EQ((std::vector<int>{0, 1, 2}), Ids(roster.members));
  EXPECT_EQ((std::set<int>{2}), roster.joining);
  EXPECT_EQ(1u, roster.stable);
  EXPECT_EQ((std::vector<ConnId>{100, 101, 200}), roster.to);
  for (ConnId c : {100, 101, 200}) job.m.OnFormed(c, 2);
  // max_workers reached: the next joiner waits, and no generation is made.
  actions = job.m.OnJoin(201, Ask(-1, "spare"), job.clock.now());
  EXPECT_EQ(3, AdmittedRank(actions));
  EXPECT_TRUE(All<action::PublishRoster>(actions).empty());
  EXPECT_EQ(MemberState::kSpare, job.m.members().at(3).state);
  // A member is lost: the spare takes its place in the same generation.
  actions = job.m.OnConnectionLost(100, "reset");
  roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(3u, roster.generation);
  EXPECT_EQ((std::vector<int>{1, 2, 3}), Ids(roster.members));
  EXPECT_EQ((std::set<int>{3}), roster.joining);
  EXPECT_EQ(2u, roster.stable);
}

// cluster.spares: the launcher starts its spares with the workers. A spare
// that joins while the job forms takes no member's rank (the world still
// waits for its own workers), is not in the first generation, and takes a
// lost member's place in the generation that drops it.
TEST(JobStateMachineElastic, ASpareJoiningWhileTheJobFormsWaitsPastTheWorldAndFillsTheFirstLoss) {
  FakeClock clock;
  JobStateMachine m(ElasticOptions(1, 2), NewJob(2), {}, clock.now());
  EXPECT_EQ(2, AdmittedRank(m.OnJoin(300, SpareAsk(), clock.now())));
  EXPECT_EQ(MemberState::kSpare, m.members().at(2).state);
  EXPECT_EQ(JobPhase::kJoining, m.job().phase);
  // An unranked worker still gets the lowest free member rank, not the spare's.
  EXPECT_EQ(0, AdmittedRank(m.OnJoin(100, Ask(-1, "w0"), clock.now())));
  auto actions = m.OnJoin(101, Ask(1, "w1"), clock.now());
  EXPECT_EQ(1, AdmittedRank(actions));
  EXPECT_EQ(JobPhase::kRunning, m.job().phase);
  auto roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(1u, roster.generation);
  EXPECT_EQ((std::vector<int>{0, 1}), Ids(roster.members));
  EXPECT_EQ((std::vector<ConnId>{100, 101}), roster.to);  // the spare is not told: it is not a member
  EXPECT_EQ(MemberState::kSpare, m.members().at(2).state);
  for (ConnId c : {100, 101}) m.OnFormed(c, 1);
  actions = m.OnConnectionLost(101, "reset");
  roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(2u, roster.generation);
  EXPECT_EQ((std::vector<int>{0, 2}), Ids(roster.members));
  EXPECT_EQ((std::set<int>{2}), roster.joining);
  EXPECT_EQ(MemberState::kJoined, m.members().at(2).state);
}

// A spare that only waited while the job formed and then left frees
// nothing the job waits for: the workers still form it.
TEST(JobStateMachineElastic, ASpareThatLeavesWhileTheJobFormsIsForgotten) {
  FakeClock clock;
  JobStateMachine m(ElasticOptions(1, 2), NewJob(2), {}, clock.now());
  EXPECT_EQ(2, AdmittedRank(m.OnJoin(300, SpareAsk(), clock.now())));
  (void)m.OnConnectionLost(300, "reset");
  EXPECT_EQ(0u, m.members().count(2));
  EXPECT_EQ(0, AdmittedRank(m.OnJoin(100, Ask(0, "w0"), clock.now())));
  auto actions = m.OnJoin(101, Ask(1, "w1"), clock.now());
  EXPECT_EQ((std::vector<int>{0, 1}), Ids(One<action::PublishRoster>(actions).members));
}

// A member lost before the job formed, with a spare waiting: the spare
// takes its place at once and the first generation forms with it (it used
// to wait the join timeout and fail: "only 2 of 3 workers joined"). The
// roster is generation 1, the job's first: nobody trained yet, so the spare
// enters as a first-generation member (its initial model, not a state
// copy; worker_role.cc and elastic_member.cc decide on the generation).
TEST(JobStateMachineElastic, ASpareTakesThePlaceOfAMemberLostBeforeTheJobFormed) {
  FakeClock clock;
  JobStateMachine m(SpareOptions(2, 3), NewJob(3), {}, clock.now());
  EXPECT_EQ(3, AdmittedRank(m.OnJoin(300, SpareAsk(), clock.now())));
  EXPECT_EQ(0, AdmittedRank(m.OnJoin(100, Ask(0, "w0"), clock.now())));
  EXPECT_EQ(1, AdmittedRank(m.OnJoin(101, Ask(1, "w1"), clock.now())));
  auto actions = m.OnConnectionLost(101, "reset");  // rank 1 lost: the spare fills its place; rank 2 not there yet
  EXPECT_EQ(MemberState::kJoined, m.members().at(3).state);
  EXPECT_EQ(0u, m.members().count(1));
  EXPECT_EQ(JobPhase::kJoining, m.job().phase) << "rank 2 is still to come";
  // Rank 1 again (a restarted worker asking for it): refused, naming the spare.
  EXPECT_EQ("rank 1 of job 'job-x' was lost before the job formed and spare 3 took its place; start this worker "
            "without a rank to join as a spare",
            Refusal(m.OnJoin(102, Ask(1, "w1-again"), clock.now())));
  // An unranked worker gets rank 2, not the filled rank 1.
  actions = m.OnJoin(103, Ask(-1, "w2"), clock.now());
  EXPECT_EQ(2, AdmittedRank(actions));
  EXPECT_EQ(JobPhase::kRunning, m.job().phase);
  auto roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(1u, roster.generation);
  EXPECT_EQ((std::vector<int>{0, 2, 3}), Ids(roster.members));
  EXPECT_EQ(0u, roster.stable) << "the first generation: every member enters with its initial model";
  EXPECT_EQ((std::set<int>{0, 2, 3}), roster.joining);
  EXPECT_EQ("all 3 workers joined (spare 3 in place of rank 1, lost before the job formed)", roster.why);
}

// A worker whose process ended before it ever joined left no connection to
// lose: the launcher (a watcher) says so, and the waiting spare takes the
// place. Ignored where it cannot apply: a rank that is a member (its own
// lost connection will say it), out of range, or a job that already formed.
TEST(JobStateMachineElastic, TheLauncherSayingAWorkerEndedBeforeJoiningLetsASpareTakeItsPlace) {
  FakeClock clock;
  JobStateMachine m(SpareOptions(1, 2), NewJob(2), {}, clock.now());
  (void)m.OnWatch(900, "job-x");
  EXPECT_EQ(2, AdmittedRank(m.OnJoin(300, SpareAsk(), clock.now())));
  EXPECT_EQ(0, AdmittedRank(m.OnJoin(100, Ask(0, "w0"), clock.now())));
  EXPECT_TRUE(m.OnWorkerExited(0, "worker 0 ended").empty()) << "rank 0 is a member";
  EXPECT_TRUE(m.OnWorkerExited(7, "?").empty());
  EXPECT_TRUE(m.OnWorkerExited(-1, "?").empty());
  EXPECT_EQ(MemberState::kSpare, m.members().at(2).state);
  auto actions = m.OnWorkerExited(1, "worker 1 ended before the job formed");
  EXPECT_EQ(MemberState::kJoined, m.members().at(2).state);
  EXPECT_EQ(JobPhase::kRunning, m.job().phase);
  EXPECT_EQ((std::vector<int>{0, 2}), Ids(One<action::PublishRoster>(actions).members));
  EXPECT_TRUE(m.OnWorkerExited(0, "late").empty()) << "the job formed: losses are the running job's";
}

// Without spares, an elastic job does not wait for a member that is gone:
// once every other place is taken it starts short of it, min_workers
// permitting ("2 of 3 workers joined (rank 1 lost before the job formed;
// no spare to take its place)"); a worker started again for that rank
// joins the running job. Below min_workers the rank stays free for a new
// worker and the job waits.
TEST(JobStateMachineElastic, WithoutSparesAnElasticJobStartsShortOfAMemberLostBeforeItFormed) {
  FakeClock clock;
  JobStateMachine m(ElasticOptions(2, 3), NewJob(3), {}, clock.now());
  EXPECT_EQ(0, AdmittedRank(m.OnJoin(100, Ask(0, "w0"), clock.now())));
  EXPECT_TRUE(m.OnWorkerExited(1, "worker 1 ended").empty()) << "rank 2 is still to come";
  auto actions = m.OnJoin(102, Ask(2, "w2"), clock.now());
  EXPECT_EQ(JobPhase::kRunning, m.job().phase);
  auto roster = One<action::PublishRoster>(actions);
  EXPECT_EQ((std::vector<int>{0, 2}), Ids(roster.members));
  EXPECT_EQ("2 of 3 workers joined (rank 1 lost before the job formed; no spare to take its place)", roster.why);
  actions = m.OnJoin(101, Ask(1, "w1-again"), clock.now());
  EXPECT_EQ(3, AdmittedRank(actions)) << "a joiner of the running job, under a new id";
  EXPECT_EQ((std::vector<int>{0, 2, 3}), Ids(One<action::PublishRoster>(actions).members));

  FakeClock clock2;
  JobStateMachine n(ElasticOptions(2, 2), NewJob(2), {}, clock2.now());
  EXPECT_EQ(0, AdmittedRank(n.OnJoin(100, Ask(0, "w0"), clock2.now())));
  EXPECT_TRUE(n.OnWorkerExited(1, "worker 1 ended").empty()) << "1 member is below min_workers 2";
  EXPECT_EQ(JobPhase::kJoining, n.job().phase);
  actions = n.OnJoin(101, Ask(-1, "w1-again"), clock2.now());
  EXPECT_EQ(1, AdmittedRank(actions)) << "the free rank, for a new worker";
  EXPECT_EQ("all 2 workers joined", One<action::PublishRoster>(actions).why);
}

// The other order: the member is lost before any spare is there; the
// spare, joining later while the job forms, takes the place at once. Its
// own loss before the job formed frees the place again, and the next spare
// takes it; without one, the job waits (and its join timeout names rank 1).
TEST(JobStateMachineElastic, ASpareComingAfterAMemberLostBeforeTheJobFormedFillsThePlace) {
  FakeClock clock2;
  JobStateMachine n(SpareOptions(1, 2), NewJob(2), {}, clock2.now());
  EXPECT_EQ(0, AdmittedRank(n.OnJoin(100, Ask(0, "w0"), clock2.now())));
  (void)n.OnConnectionLost(100, "reset");  // rank 0 lost; no spare yet
  EXPECT_EQ(1, AdmittedRank(n.OnJoin(101, Ask(1, "w1"), clock2.now())));
  EXPECT_EQ(JobPhase::kJoining, n.job().phase);
  auto actions = n.OnJoin(300, SpareAsk(), clock2.now());
  EXPECT_EQ(2, AdmittedRank(actions));
  EXPECT_EQ(MemberState::kJoined, n.members().at(2).state);
  EXPECT_EQ(JobPhase::kRunning, n.job().phase);
  EXPECT_EQ((std::vector<int>{1, 2}), Ids(One<action::PublishRoster>(actions).members));

  FakeClock clock3;
  JobStateMachine o(SpareOptions(1, 2, 2), NewJob(2), {}, clock3.now());
  EXPECT_EQ(2, AdmittedRank(o.OnJoin(300, SpareAsk(), clock3.now())));
  EXPECT_EQ(3, AdmittedRank(o.OnJoin(301, SpareAsk(), clock3.now())));
  EXPECT_EQ(0, AdmittedRank(o.OnJoin(100, Ask(0, "w0"), clock3.now())));
  (void)o.OnConnectionLost(100, "reset");
  EXPECT_EQ(MemberState::kJoined, o.members().at(2).state) << "the lowest spare took rank 0's place";
  (void)o.OnConnectionLost(300, "reset");  // that spare lost too, before the job formed
  EXPECT_EQ(0u, o.members().count(2));
  EXPECT_EQ(MemberState::kJoined, o.members().at(3).state) << "the next spare took rank 0's place";
  (void)o.OnConnectionLost(301, "reset");
  EXPECT_EQ(0u, o.members().count(3));
  EXPECT_EQ(0, AdmittedRank(o.OnJoin(102, Ask(-1, "w0-again"), clock3.now())))
      << "with no spare left, rank 0 is free again for a worker";
  EXPECT_EQ(JobPhase::kJoining, o.job().phase) << "rank 1 never came";
  actions = o.OnTimer(clock3.Advance(std::chrono::seconds(3600)));
  EXPECT_EQ(JobPhase::kFailed, o.job().phase);
  EXPECT_NE(std::string::npos, o.job().failure.find("(missing: rank 1)")) << o.job().failure;
}

// A sync job that is not elastic has no spares: a member lost before the
// job formed frees its rank, and nothing else changes.
TEST(JobStateMachine, AMemberLostBeforeAFixedJobFormedFreesItsRankOnly) {
  FakeClock clock;
  JobStateMachine m(Options(), NewJob(2), {}, clock.now());
  EXPECT_EQ(0, AdmittedRank(m.OnJoin(100, Ask(0, "w0"), clock.now())));
  (void)m.OnConnectionLost(100, "reset");
  EXPECT_EQ(0u, m.members().count(0));
  EXPECT_EQ(0, AdmittedRank(m.OnJoin(101, Ask(-1, "w0-again"), clock.now())));
  EXPECT_EQ(1, AdmittedRank(m.OnJoin(102, Ask(-1, "w1"), clock.now())));
  EXPECT_EQ(JobPhase::kRunning, m.job().phase);
}

// A join (generation 2) superseded by a leave before every member formed
// it (generation 3): a member that skipped generation 2 never connected to
// the joiner, so the joiner stays joining (every pair with it is new) and
// the members reuse the connections of generation 1, the stable one. Once
// every member forms generation 3, it is the stable one.
TEST(JobStateMachineElastic, AJoinerOfAGenerationNotEveryMemberFormedStaysJoining) {
  Running job(3, ElasticOptions(1, 4));
  auto actions = job.m.OnJoin(200, Ask(-1, "late"), job.clock.now());
  EXPECT_EQ(3, AdmittedRank(actions));
  auto roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(2u, roster.generation);
  EXPECT_EQ((std::set<int>{3}), roster.joining);
  EXPECT_EQ(1u, roster.stable);
  // Ranks 0 and the joiner formed generation 2; rank 1 did not (yet).
  job.m.OnFormed(100, 2);
  job.m.OnFormed(200, 2);
  job.m.OnFormed(200, 7);  // a generation never published: ignored
  actions = job.m.OnLeave(102, "stopped by signal 15");
  roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(3u, roster.generation);
  EXPECT_EQ((std::vector<int>{0, 1, 3}), Ids(roster.members));
  EXPECT_EQ((std::set<int>{3}), roster.joining);
  EXPECT_EQ(1u, roster.stable);
  // Rank 1's late report for generation 2 cannot make it stable any more
  // (rank 2 never reported it); generation 3, once all formed it, is.
  job.m.OnFormed(101, 2);
  for (ConnId c : {100, 101}) job.m.OnFormed(c, 3);
  actions = job.m.OnConnectionLost(101, "reset");
  roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(4u, roster.generation);
  EXPECT_EQ((std::set<int>{3}), roster.joining) << "generation 3 is not formed by the joiner yet";
  EXPECT_EQ(1u, roster.stable);
  job.m.OnFormed(200, 3);  // now every member of generation 3 formed it, but 4 is out
  job.m.OnFormed(100, 4);
  job.m.OnFormed(200, 4);
  actions = job.m.OnJoin(201, Ask(-1, "later"), job.clock.now());
  roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(5u, roster.generation);
  EXPECT_EQ((std::vector<int>{0, 3, 4}), Ids(roster.members));
  EXPECT_EQ((std::set<int>{4}), roster.joining);
  EXPECT_EQ(4u, roster.stable);
}

TEST(JobStateMachineElastic, ALeaveIsAGenerationToldToTheLeaverTooAndCostsNoFailure) {
  Running job(3, ElasticOptions(1, 3));
  auto actions = job.m.OnLeave(102, "stopped by signal 15");
  auto roster = One<action::PublishRoster>(actions);
  EXPECT_EQ((std::vector<int>{0, 1}), Ids(roster.members));
  EXPECT_EQ(MemberState::kLeft, job.m.members().at(2).state);
  EXPECT_NE(roster.why.find("rank 2 left"), std::string::npos) << roster.why;
  // Its connection then drops: nothing more happens.
  EXPECT_TRUE(job.m.OnConnectionLost(102, "closed").empty());
  // The job finishes when the remaining members are done.
  job.m.OnDone(100, "{\"steps\": 10}");
  job.m.OnDone(101, "");
  actions = job.m.OnTimer(job.clock.Advance(1s));
  EXPECT_EQ(JobPhase::kFinished, One<action::SetJobState>(actions).phase);
  EXPECT_EQ("{\"steps\": 10}", One<action::AnnounceDone>(actions).summary_json);
}

TEST(JobStateMachineElastic, BelowMinWorkersTheJobWaitsForJoinersThenFailsNamingWhoIsMissing) {
  Running job(3, ElasticOptions(3, 3));
  auto actions = job.m.OnConnectionLost(101, "reset");
  EXPECT_TRUE(All<action::PublishRoster>(actions).empty());  // paused: no generation below min_workers
  actions = job.m.OnTimer(job.clock.Advance(29s));
  EXPECT_TRUE(All<action::AnnounceFailure>(actions).empty());
  // A joiner in time resumes the job.
  actions = job.m.OnJoin(300, Ask(-1, "replacement"), job.clock.now());
  EXPECT_EQ((std::vector<int>{0, 2, 3}), Ids(One<action::PublishRoster>(actions).members));
  // A second loss, and nobody comes: the job fails after the join timeout, naming the lost member.
  job.m.OnConnectionLost(102, "reset");
  EXPECT_TRUE(All<action::AnnounceFailure>(job.m.OnTimer(job.clock.Advance(1s))).empty());
  actions = job.m.OnTimer(job.clock.Advance(31s));
  const auto failure = One<action::AnnounceFailure>(actions);
  EXPECT_EQ(2, failure.rank);
  EXPECT_NE(failure.reason.find("only 2 of min_workers 3"), std::string::npos) << failure.reason;
  EXPECT_NE(failure.reason.find("rank 2 on host-w2"), std::string::npos) << failure.reason;
  EXPECT_EQ(JobPhase::kFailed, job.m.job().phase);
}

TEST(JobStateMachineElastic, AJoinerOfAnotherModelIsRefusedWithBothFingerprintsAndTheJobIsUntouched) {
  FakeClock clock;
  JobStateMachine m(ElasticOptions(1, 3), NewJob(1), {}, clock.now());
  JoinAsk first = Ask(0, "w0");
  first.plan_fingerprint = "aaaa000000000000";
  EXPECT_EQ(0, AdmittedRank(m.OnJoin(100, first, clock.now())));
  JoinAsk other = Ask(-1, "other");
  other.plan_fingerprint = "bbbb000000000000";
  auto actions = m.OnJoin(101, other, clock.now());
  const std::string why = Refusal(actions);
  EXPECT_NE(why.find("bbbb000000000000"), std::string::npos) << why;
  EXPECT_NE(why.find("aaaa000000000000"), std::string::npos) << why;
  EXPECT_TRUE(All<action::PutMember>(actions).empty());
  EXPECT_EQ(1u, m.members().size());
  EXPECT_EQ(1u, m.job().generation);
}

TEST(JobStateMachineElastic, AMemberRemovedThenContinuedIsRefusedWhenItRejoins) {
  Running job(3, ElasticOptions(1, 3));
  job.m.OnConnectionLost(101, "peer silent");
  JoinAsk back = Ask(1, "w1");
  back.rejoin = true;
  const std::string why = Refusal(job.m.OnJoin(400, back, job.clock.now()));
  EXPECT_NE(why.find("rank 1 was removed"), std::string::npos) << why;
}

TEST(JobStateMachineElastic, ASuspectReportedByAMemberIsRemovedAndItsConnectionRefused) {
  Running job(3, ElasticOptions(1, 3));
  auto actions = job.m.OnSuspect(100, 2, "no progress for 10 s");
  EXPECT_EQ((std::vector<int>{0, 1}), Ids(One<action::PublishRoster>(actions).members));
  EXPECT_EQ(102u, One<action::Refuse>(actions).to);
  // Reports from non-members and about removed members change nothing.
  EXPECT_TRUE(job.m.OnSuspect(999, 1, "x").empty());
  EXPECT_TRUE(job.m.OnSuspect(100, 2, "again").empty());
}

TEST(JobStateMachineElastic, ARestartedCoordinatorRepublishesTheNewestGenerationToARejoiner) {
  FakeClock clock;
  JobRecord job = NewJob(3);
  job.phase = JobPhase::kRunning;
  job.generation = 4;
  job.resumed = true;
  std::vector<MemberRecord> members = {{0, "w0", "host-w0", 5002, MemberState::kJoined, 0},
                                       {1, "w1", "host-w1", 5002, MemberState::kFailed, 0},
                                       {2, "w2", "host-w2", 5002, MemberState::kJoined, 0}};
  JobStateMachine m(ElasticOptions(1, 3), job, members, clock.now());
  JoinAsk back = Ask(2, "w2");
  back.rejoin = true;
  auto actions = m.OnJoin(500, back, clock.now());
  EXPECT_EQ(2, AdmittedRank(actions));
  const auto roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(4u, roster.generation);
  EXPECT_EQ((std::vector<int>{0, 2}), Ids(roster.members));
  EXPECT_EQ((std::vector<ConnId>{500}), roster.to);
}


// A coordinator killed after it recorded a joiner but before it recorded
// the generation that takes it in: the restarted one re-publishes the
// recorded generation (without it) to the members, and when the joiner
// rejoins it issues that generation, naming the joiner as joining (the
// members have no connection to it yet).
TEST(JobStateMachineElastic, AJoinerWhoseGenerationWasLostGetsOneWhenItRejoins) {
  FakeClock clock;
  JobRecord job = NewJob(2);
  job.phase = JobPhase::kRunning;
  job.generation = 1;
  job.resumed = true;
  job.stable_generation = 1;
  job.stable_members = {0, 1};
  job.newest_members = {0, 1};
  std::vector<MemberRecord> members = {{0, "w0", "host-w0", 5002, MemberState::kJoined, 0},
                                       {1, "w1", "host-w1", 5002, MemberState::kJoined, 0},
                                       {2, "j", "host-j", 5002, MemberState::kJoined, 0}};
  JobStateMachine m(ElasticOptions(1, 3), job, members, clock.now());
  for (int r = 0; r < 2; ++r) {
    JoinAsk back = Ask(r, "w" + std::to_string(r));
    back.rejoin = true;
    const auto roster = One<action::PublishRoster>(m.OnJoin(400 + r, back, clock.now()));
    EXPECT_EQ(1u, roster.generation);
    EXPECT_EQ((std::vector<int>{0, 1}), Ids(roster.members)) << "the recorded generation, without the joiner";
  }
  JoinAsk back = Ask(2, "j");
  back.rejoin = true;
  const auto actions = m.OnJoin(402, back, clock.now());
  EXPECT_EQ(2, AdmittedRank(actions));
  const auto roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(2u, roster.generation);
  EXPECT_EQ((std::vector<int>{0, 1, 2}), Ids(roster.members));
  EXPECT_EQ((std::set<int>{2}), roster.joining);
  EXPECT_EQ(1u, roster.stable);
  EXPECT_EQ((std::vector<ConnId>{400, 401, 402}), roster.to);
}

// A coordinator restarted after a join whose generation not every member
// formed yet: it takes the stable generation it recorded, not its newest
// one, so the joiner is still joining in the next generation (the members
// that never formed the join's generation have no connection to it).
TEST(JobStateMachineElastic, ARestartedCoordinatorKeepsTheRecordedStableGenerationForJoiningFlags) {
  FakeClock clock;
  JobRecord job = NewJob(3);
  job.phase = JobPhase::kRunning;
  job.generation = 3;  // rank 3 joined in generation 3
  job.resumed = true;
  job.stable_generation = 2;
  job.stable_members = {0, 1, 2};
  std::vector<MemberRecord> members = {{0, "w0", "host-w0", 5002, MemberState::kJoined, 0},
                                       {1, "w1", "host-w1", 5002, MemberState::kJoined, 0},
                                       {2, "w2", "host-w2", 5002, MemberState::kJoined, 0},
                                       {3, "w3", "host-w3", 5002, MemberState::kJoined, 0}};
  JobStateMachine m(ElasticOptions(1, 4), job, members, clock.now());
  for (int r = 0; r < 4; ++r) {
    JoinAsk back = Ask(r, "w" + std::to_string(r));
    back.rejoin = true;
    const auto actions = m.OnJoin(300 + r, back, clock.now());
    EXPECT_EQ(r, AdmittedRank(actions));
    EXPECT_EQ(2u, One<action::PublishRoster>(actions).stable) << "the re-published generation 3 names stable 2";
    // ...and rank 3 as joining, as the first publication did: a member
    // that never got that one (the coordinator was killed inside the
    // join's window) has no connection to it yet.
    EXPECT_EQ((std::set<int>{3}), One<action::PublishRoster>(actions).joining);
  }
  auto actions = m.OnLeave(302, "stopped by signal 15");
  auto roster = One<action::PublishRoster>(actions);
  EXPECT_EQ(4u, roster.generation);
  EXPECT_EQ((std::vector<int>{0, 1, 3}), Ids(roster.members));
  EXPECT_EQ((std::set<int>{3}), roster.joining);
  EXPECT_EQ(2u, roster.stable);
  // Once every member forms generation 4 it is stable, and recorded.
  EXPECT_TRUE(m.OnFormed(300, 4).empty());
  EXPECT_TRUE(m.OnFormed(301, 4).empty());
  EXPECT_EQ(4u, One<action::SetStableGeneration>(m.OnFormed(303, 4)).generation);

  // Without a record (an older file): the newest generation, as before.
  job.stable_generation = 0;
  job.stable_members.clear();
  JobStateMachine old(ElasticOptions(1, 4), job, members, clock.now());
  for (int r = 0; r < 4; ++r) {
    JoinAsk back = Ask(r, "w" + std::to_string(r));
    back.rejoin = true;
    (void)old.OnJoin(400 + r, back, clock.now());
  }
  roster = One<action::PublishRoster>(old.OnLeave(402, "stopped by signal 15"));
  EXPECT_TRUE(roster.joining.empty());
  EXPECT_EQ(3u, roster.stable);
}

// What a member reads about the stable generation comes off the network:
// a roster whose stable generation is above its own, or of generation 0,
// and a Formed report without a generation are refused naming the peer.
TEST(CoordCodec, ARosterOrFormedReportThatContradictsItselfIsRefused) {
  auto roster = [](uint64_t generation, uint64_t stable) {
    wire::Roster r;
    r.set_generation(generation);
    r.set_stable_generation(stable);
    auto* m = r.add_members();
    m->set_rank(0);
    m->set_member_id(4);
    m->set_host("10.0.0.2");
    m->set_port(7000);
    m->set_name("w4");
    return r.SerializeAsString();
  };
  auto ok = DecodeRoster(roster(3, 2), "coordinator");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(2u, ok->stable_generation());
  EXPECT_TRUE(DecodeRoster(roster(3, 3), "coordinator").ok());  // a restarted coordinator's re-publication
  auto above = DecodeRoster(roster(3, 4), "coordinator");
  EXPECT_EQ(StatusCode::kProtocolError, above.status().code());
  EXPECT_NE(std::string::npos, above.status().message().find("roster of generation 3 with stable generation 4"))
      << above.status().ToString();
  EXPECT_NE(std::string::npos, above.status().message().find("coordinator")) << above.status().ToString();
  EXPECT_FALSE(DecodeRoster(roster(0, 0), "coordinator").ok());
  wire::Formed f;
  EXPECT_FALSE(DecodeFormed(f.SerializeAsString(), "rank 2").ok());
  f.set_generation(5);
  auto formed = DecodeFormed(f.SerializeAsString(), "rank 2");
  ASSERT_TRUE(formed.ok()) << formed.status().ToString();
  EXPECT_EQ(5u, formed->generation());
  EXPECT_FALSE(DecodeFormed("\xff\xff\xff", "rank 2").ok());
}

}  // namespace
}  // namespace tenax::coord

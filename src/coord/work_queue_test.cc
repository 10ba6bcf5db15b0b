#include "tenax/coord/work_queue.h"

#include <gtest/gtest.h>

#include <map>

#include "testing.h"

namespace tenax::coord {
namespace {

using tenax::testing::ScratchDir;

WorkQueueOptions Options(int64_t total = 50, int64_t unit = 20, int shards = 1, int max_attempts = 5) {
  return {.total_steps = total, .unit_steps = unit, .shards = shards, .lease_ms = 1000, .max_attempts = max_attempts};
}

std::unique_ptr<WorkQueue> OpenQueue(const std::string& path, const WorkQueueOptions& o) {
  auto q = WorkQueue::Open(path, o);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return q.ok() ? std::move(*q) : nullptr;
}

UnitLease LeaseOne(WorkQueue& q, const std::string& worker, int64_t now) {
  auto l = q.Lease(worker, now);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_TRUE(l.ok() && l->kind == LeaseOutcome::Kind::kUnit);
  return l.ok() ? l->lease : UnitLease{};
}

// Every shard checks valid and merges; returns the verdict kind.
UnitVerdict::Kind Deliver(WorkQueue& q, const UnitLease& l, int64_t now, int64_t steps_done = -1) {
  UnitVerdict::Kind kind = UnitVerdict::Kind::kPending;
  for (int s : l.shards) {
    auto v = q.ReportCheck(l.unit, l.attempt, s, true, "", steps_done < 0 ? l.steps : steps_done, now);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    if (v.ok()) kind = v->kind;
  }
  if (kind == UnitVerdict::Kind::kAccepted) {
    for (int s : l.shards) EXPECT_TRUE(q.RecordMerged(l.unit, l.attempt, s, l.unit + 1, now).ok());
  }
  return kind;
}

// (unit, shard) -> merged attempts, minus those a "reopened" rolled back.
std::map<std::pair<int64_t, int>, std::vector<int64_t>> Merges(WorkQueue& q) {
  std::map<std::pair<int64_t, int>, std::vector<int64_t>> out;
  auto events = q.Events();
  EXPECT_TRUE(events.ok());
  if (!events.ok()) return out;
  for (const auto& e : *events) {
    if (e.what == "merged") out[{e.unit, e.shard}].push_back(e.attempt);
    if (e.what == "reopened") out[{e.unit, e.shard}].clear();
  }
  return out;
}

TEST(WorkQueueTest, UnitsCoverTheJobInOrderAndTheLastIsShorter) {
  ScratchDir dir;
  auto q = OpenQueue(dir / "q.db", Options(50, 20));
  ASSERT_TRUE(q);
  std::vector<std::pair<int64_t, int64_t>> got;
  for (int i = 0; i < 3; ++i) {
    UnitLease l = LeaseOne(*q, "w", 0);
    got.emplace_back(l.start_step, l.steps);
    EXPECT_EQ(1, l.attempt);
    EXPECT_EQ(1000, l.deadline_ms);
  }
  EXPECT_EQ((std::vector<std::pair<int64_t, int64_t>>{{0, 20}, {20, 20}, {40, 10}}), got);
  auto wait = q->Lease("w", 1);
  ASSERT_TRUE(wait.ok());
  EXPECT_EQ(LeaseOutcome::Kind::kWait, wait->kind);
}

TEST(WorkQueueTest, AllDoneOnceEveryUnitIsMerged) {
  ScratchDir dir;
  auto q = OpenQueue(dir / "q.db", Options(40, 20));
  ASSERT_TRUE(q);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(UnitVerdict::Kind::kAccepted, Deliver(*q, LeaseOne(*q, "w", 0), 1));
  auto done = q->Lease("w", 2);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(LeaseOutcome::Kind::kAllDone, done->kind);
  auto all = q->AllDone();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(*all);
}

TEST(WorkQueueTest, AnExpiredLeaseIsReissuedAndItsLateResultIsMergedOnce) {
  ScratchDir dir;
  auto q = OpenQueue(dir / "q.db", Options(20, 20));
  ASSERT_TRUE(q);
  UnitLease first = LeaseOne(*q, "slow", 0);
  UnitLease second = LeaseOne(*q, "fast", 1000);  // the first lease expired
  EXPECT_EQ(first.unit, second.unit);
  EXPECT_EQ(2, second.attempt);
  // The late result of attempt 1 still wins: the unit was open.
  EXPECT_EQ(UnitVerdict::Kind::kAccepted, Deliver(*q, first, 1100));
  auto dup = q->ReportCheck(second.unit, second.attempt, 0, true, "", second.steps, 1200);
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(UnitVerdict::Kind::kDuplicate, dup->kind);
  auto counts = q->Counts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(1, counts->leases_expired);
  EXPECT_EQ(1, counts->units_reissued);
  EXPECT_EQ(2, counts->units_issued);
  EXPECT_EQ((std::vector<int64_t>{1}), (Merges(*q)[{0, 0}]));
}

TEST(WorkQueueTest, ALostWorkersLeasesExpireAtOnce) {
  ScratchDir dir;
  auto q = OpenQueue(dir / "q.db", Options(60, 20));
  ASSERT_TRUE(q);
  UnitLease a = LeaseOne(*q, "worker 0", 0);
  UnitLease b = LeaseOne(*q, "worker 1", 0);
  auto n = q->ExpireLeasesOf("worker 0", "connection lost", 10);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(1, *n);
  UnitLease again = LeaseOne(*q, "worker 2", 11);  // long before the deadline (1000)
  EXPECT_EQ(a.unit, again.unit);
  EXPECT_EQ(2, again.attempt);
  EXPECT_NE(b.unit, again.unit);
  auto counts = q->Counts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(1, counts->leases_expired);
}

TEST(WorkQueueTest, TwoShardsWaitForEachOtherAndOneInvalidPartRejects) {
  ScratchDir dir;
  auto q = OpenQueue(dir / "q.db", Options(20, 20, 2));
  ASSERT_TRUE(q);
  UnitLease l = LeaseOne(*q, "w", 0);
  EXPECT_EQ((std::vector<int>{0, 1}), l.shards);
  auto v0 = q->ReportCheck(l.unit, l.attempt, 0, true, "", 20, 1);
  ASSERT_TRUE(v0.ok());
  EXPECT_EQ(UnitVerdict::Kind::kPending, v0->kind);
  auto v1 = q->ReportCheck(l.unit, l.attempt, 1, false, "NaN at index 3", 20, 2);
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(UnitVerdict::Kind::kRejected, v1->kind);
  EXPECT_EQ("NaN at index 3", v1->reason);
  UnitLease again = LeaseOne(*q, "w", 3);  // re-issued at once
  EXPECT_EQ(2, again.attempt);
  EXPECT_EQ(UnitVerdict::Kind::kAccepted, Deliver(*q, again, 4));
  auto counts = q->Counts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(1, counts->results_rejected);
  auto merges = Merges(*q);
  EXPECT_EQ((std::vector<int64_t>{2}), (merges[{0, 0}]));
  EXPECT_EQ((std::vector<int64_t>{2}), (merges[{0, 1}]));
}

TEST(WorkQueueTest, AUnitErrorsOutAfterMaxAttempts) {
  ScratchDir dir;
  auto q = OpenQueue(dir / "q.db", Options(20, 20, 1, 2));
  ASSERT_TRUE(q);
  for (int i = 0; i < 2; ++i) {
    UnitLease l = LeaseOne(*q, "w", i);
    auto v = q->ReportCheck(l.unit, l.attempt, 0, false, "bad", 20, i);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(UnitVerdict::Kind::kRejected, v->kind);
  }
  auto counts = q->Counts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(1, counts->failed_units);
  auto l = q->Lease("w", 10);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(LeaseOutcome::Kind::kWait, l->kind);  // never handed out again, never done
}

TEST(WorkQueueTest, APartialResultSplitsTheRestIntoANewUnit) {
  ScratchDir dir;
  auto q = OpenQueue(dir / "q.db", Options(40, 20));
  ASSERT_TRUE(q);
  UnitLease l = LeaseOne(*q, "w", 0);
  EXPECT_EQ(UnitVerdict::Kind::kAccepted, Deliver(*q, l, 1, 7));
  UnitLease next = LeaseOne(*q, "w", 2);  // unit 1 [20, 40)
  EXPECT_EQ(1, next.unit);
  UnitLease rest = LeaseOne(*q, "w", 2);
  EXPECT_EQ(2, rest.unit);
  EXPECT_EQ(7, rest.start_step);
  EXPECT_EQ(13, rest.steps);
  auto counts = q->Counts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(3, counts->units);
  EXPECT_EQ(1, counts->partial_results);
}

// A queue of three 20-step units on two shards, every unit merged by both
// (merge_seq = unit + 1), then shard 1 restarted on a checkpoint that held
// its first merge only (at time 5). `reopened` gets the units re-opened for
// it; nullptr (and a test failure) if any step failed.
std::unique_ptr<WorkQueue> ShardOneRestartedAfterThreeMerges(const ScratchDir& dir, std::vector<int64_t>& reopened) {
  auto q = OpenQueue(dir / "q.db", Options(60, 20, 2));
  if (!q) return nullptr;
  for (int i = 0; i < 3; ++i) {
    UnitLease l = LeaseOne(*q, "w", 0);
    if (Deliver(*q, l, 1) != UnitVerdict::Kind::kAccepted) {
      ADD_FAILURE() << "unit " << l.unit << " was not accepted";
      return nullptr;
    }
  }
  auto r = q->ShardRestored(1, 1, 5);
  if (!r.ok()) {
    ADD_FAILURE() << r.status().ToString();
    return nullptr;
  }
  reopened = *r;
  return q;
}

TEST(WorkQueueTest, ARestartedShardReMergesOnlyWhatItsCheckpointLost) {
  ScratchDir dir;
  std::vector<int64_t> reopened;
  auto q = ShardOneRestartedAfterThreeMerges(dir, reopened);
  ASSERT_TRUE(q);
  EXPECT_EQ((std::vector<int64_t>{1, 2}), reopened);
  for (int64_t u : {1, 2}) {
    UnitLease l = LeaseOne(*q, "w", 6);
    EXPECT_EQ(u, l.unit);
    EXPECT_EQ((std::vector<int>{1}), l.shards);
    EXPECT_EQ(UnitVerdict::Kind::kAccepted, Deliver(*q, l, 7));
  }
  auto merges = Merges(*q);
  for (int64_t u = 0; u < 3; ++u) {
    for (int s = 0; s < 2; ++s) EXPECT_EQ(1u, (merges[{u, s}].size())) << "unit " << u << " shard " << s;
  }
  EXPECT_EQ((std::vector<int64_t>{1}), (merges[{1, 0}]));
  EXPECT_EQ((std::vector<int64_t>{2}), (merges[{1, 1}]));
  auto all = q->AllDone();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(*all);
}

// A unit re-opened for one restarted shard and then returned partial (a
// preempted worker) splits: its remainder is needed by that shard alone.
// The other shard merged the whole unit once already; it must neither be
// given the remainder nor be counted as missing it (the soak's merge-log
// check counted it as a lost unit).
TEST(WorkQueueTest, ARemainderOfAUnitReopenedForOneShardIsRequiredOfThatShardAlone) {
  ScratchDir dir;
  std::vector<int64_t> reopened;
  auto q = ShardOneRestartedAfterThreeMerges(dir, reopened);  // shard 1 keeps unit 0's merge only
  ASSERT_TRUE(q);
  UnitLease again = LeaseOne(*q, "w", 6);
  ASSERT_EQ(1, again.unit);
  EXPECT_EQ(UnitVerdict::Kind::kAccepted, Deliver(*q, again, 7, 5));  // 5 of 20 steps: a partial result
  UnitLease second = LeaseOne(*q, "w", 8);
  EXPECT_EQ(2, second.unit);
  EXPECT_EQ(UnitVerdict::Kind::kAccepted, Deliver(*q, second, 9));
  UnitLease rest = LeaseOne(*q, "w", 10);
  EXPECT_EQ(3, rest.unit);
  EXPECT_EQ(25, rest.start_step);
  EXPECT_EQ(15, rest.steps);
  EXPECT_EQ((std::vector<int>{1}), rest.shards);
  EXPECT_EQ(UnitVerdict::Kind::kAccepted, Deliver(*q, rest, 11));

  auto required = q->RequiredMerges();
  ASSERT_TRUE(required.ok()) << required.status().ToString();
  EXPECT_EQ((std::vector<std::pair<int64_t, int>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}, {3, 1}}), *required);
  auto merges = Merges(*q);
  for (const auto& need : *required) {
    EXPECT_EQ(1u, merges[need].size()) << "unit " << need.first << " shard " << need.second;
  }
  EXPECT_TRUE((merges[{3, 0}].empty())) << "shard 0 was given the remainder of a unit it had merged whole";
  auto all = q->AllDone();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(*all);
}

// A shard that checked a result and was then restarted (a new process on
// its checkpoint) no longer holds that result: its earlier check must not
// accept the unit when the other shard's check comes (found by the soak:
// the unit was accepted, the new process told "merge" for a result it never
// saw, and the job waited forever). The attempt waits, expires, and the
// unit is issued again and merged once by each shard.
TEST(WorkQueueTest, ARestartedShardsEarlierCheckAcceptsNothing) {
  ScratchDir dir;
  auto q = OpenQueue(dir / "q.db", Options(20, 20, 2));
  ASSERT_TRUE(q);
  const UnitLease l = LeaseOne(*q, "w", 0);  // unit 0, held until 1000
  auto first = q->ReportCheck(l.unit, l.attempt, 0, true, "", l.steps, 10);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(UnitVerdict::Kind::kPending, first->kind);
  auto reopened = q->ShardRestored(0, 0, 20);  // shard 0's new process: nothing merged, nothing re-opened
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_TRUE(reopened->empty());
  auto second = q->ReportCheck(l.unit, l.attempt, 1, true, "", l.steps, 30);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(UnitVerdict::Kind::kPending, second->kind) << "accepted on a check of a process that is gone";
  auto owed = q->AcceptedNotMerged(0);
  ASSERT_TRUE(owed.ok());
  EXPECT_TRUE(owed->empty());
  // Its lease expires; the unit is issued again and merged once by each shard.
  const UnitLease again = LeaseOne(*q, "w2", 1000);
  EXPECT_EQ(l.unit, again.unit);
  EXPECT_EQ(2, again.attempt);
  EXPECT_EQ(UnitVerdict::Kind::kAccepted, Deliver(*q, again, 1001));
  const auto merges = Merges(*q);
  EXPECT_EQ(std::vector<int64_t>{2}, merges.at({0, 0}));
  EXPECT_EQ(std::vector<int64_t>{2}, merges.at({0, 1}));
  auto all = q->AllDone();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(*all);
}

// A coordinator killed between accepting a unit and hearing a shard's merge
// report: the restarted one (the same file) lists what each shard still
// owes, and the shard's report, told again, is recorded once.
TEST(WorkQueueTest, AMergeReportToldAgainAfterARestartIsRecordedOnce) {
  ScratchDir dir;
  {
    auto q = OpenQueue(dir / "q.db", Options(40, 20, 2));
    ASSERT_TRUE(q);
    const UnitLease l = LeaseOne(*q, "w", 0);
    for (int s : {0, 1}) ASSERT_TRUE(q->ReportCheck(l.unit, l.attempt, s, true, "", l.steps, 1).ok());
    ASSERT_TRUE(q->RecordMerged(l.unit, l.attempt, 1, 1, 2).ok());  // shard 0's report never arrives
  }
  auto q = OpenQueue(dir / "q.db", Options(40, 20, 2));
  ASSERT_TRUE(q);
  auto owed0 = q->AcceptedNotMerged(0);
  ASSERT_TRUE(owed0.ok()) << owed0.status().ToString();
  EXPECT_EQ((std::vector<std::pair<int64_t, int64_t>>{{0, 1}}), *owed0);
  auto owed1 = q->AcceptedNotMerged(1);
  ASSERT_TRUE(owed1.ok());
  EXPECT_TRUE(owed1->empty()) << "shard 1's merge was recorded";
  auto done = q->AllDone();
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(*done);
  // Shard 0 merged it as its merge 1 and says so (twice: once for the
  // repeated verdict, once for its repeated check).
  ASSERT_TRUE(q->RecordMerged(0, 1, 0, 1, 3).ok());
  ASSERT_TRUE(q->RecordMerged(0, 1, 0, 1, 4).ok()) << "the same report again is no error";
  EXPECT_FALSE(q->RecordMerged(0, 1, 0, 2, 5).ok()) << "another merge of the same unit is refused";
  const auto merges = Merges(*q);
  EXPECT_EQ(std::vector<int64_t>{1}, merges.at({0, 0})) << "recorded once";
  EXPECT_EQ(std::vector<int64_t>{1}, merges.at({0, 1}));
  owed0 = q->AcceptedNotMerged(0);
  ASSERT_TRUE(owed0.ok());
  EXPECT_TRUE(owed0->empty());
}

TEST(WorkQueueTest, AReopenedQueueKeepsLeasesAttemptsAndCounts) {
  ScratchDir dir;
  const std::string path = dir / "q.db";
  {
    auto q = OpenQueue(path, Options(40, 20));
    ASSERT_TRUE(q);
    Deliver(*q, LeaseOne(*q, "w", 0), 1);
    LeaseOne(*q, "w", 2);  // unit 1, attempt 1, held until 1002
  }
  auto q = OpenQueue(path, Options(40, 20));
  ASSERT_TRUE(q);
  auto busy = q->Lease("w", 500);
  ASSERT_TRUE(busy.ok());
  EXPECT_EQ(LeaseOutcome::Kind::kWait, busy->kind);
  UnitLease l = LeaseOne(*q, "w", 1002);
  EXPECT_EQ(1, l.unit);
  EXPECT_EQ(2, l.attempt);
  auto counts = q->Counts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(3, counts->units_issued);
  EXPECT_EQ(1, counts->accepted);
  auto other = WorkQueue::Open(path, Options(40, 10));
  EXPECT_EQ(StatusCode::kFailedPrecondition, other.status().code());
}

TEST(WorkQueueTest, CallsNamingWhatDoesNotExistChangeNothing) {
  ScratchDir dir;
  auto q = OpenQueue(dir / "q.db", Options(20, 20, 2));
  ASSERT_TRUE(q);
  UnitLease l = LeaseOne(*q, "w", 0);
  auto before = q->Events();
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, q->ReportCheck(9, 1, 0, true, "", 1, 1).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, q->ReportCheck(l.unit, 2, 0, true, "", 1, 1).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, q->ReportCheck(l.unit, 1, 5, true, "", 1, 1).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, q->ReportCheck(l.unit, 1, 0, true, "", 21, 1).status().code());
  EXPECT_EQ(StatusCode::kInvalidArgument, q->RecordMerged(l.unit, 1, 0, 1, 1).code());
  EXPECT_EQ(StatusCode::kInvalidArgument, q->Release(l.unit, 3, "x", 1).code());
  auto after = q->Events();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(before->size(), after->size());
  EXPECT_EQ(StatusCode::kInvalidArgument, WorkQueue::Open(dir / "x.db", Options(0)).status().code());
}

}  // namespace

// A lease flipped on disk (the worker it names) passes SQLite's integrity
// check but not its row's checksum: the queue refuses to open, naming the
// table and the unit, rather than trust who holds what.
TEST(WorkQueueTest, ALeaseFlippedOnDiskIsCaughtByItsRowChecksumAndNamed) {
  ScratchDir dir;
  const std::string path = dir / "q.db";
  {
    auto q = OpenQueue(path, Options(40, 20));
    ASSERT_TRUE(q);
    UnitLease l = LeaseOne(*q, "worker-QQQQ", 0);
    EXPECT_EQ(0, l.unit);
  }
  ASSERT_GE(tenax::testing::FlipLastByteOf(path, "worker-QQQQ"), 1);
  auto q = WorkQueue::Open(path, Options(40, 20));
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(StatusCode::kDataLoss, q.status().code());
  EXPECT_NE(std::string::npos, q.status().message().find(path + ": table wq_unit, unit 0: its values do not match"))
      << q.status().ToString();
}

}  // namespace tenax::coord

// JobStore against a real SQLite file in a scratch directory: what a
// coordinator writes is what its restarted successor reads, and files that
// are not its own are refused with the reason.
#include "job_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "testing.h"

namespace tenax::coord {
namespace {

using tenax::testing::ScratchDir;

std::unique_ptr<JobStore> OpenStore(const std::string& path) {
  auto s = JobStore::Open(path);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// SQLite's own verdict on the file ("ok" when its structure is sound).
std::string IntegrityCheck(const std::string& path) {
  sqlite3* db = nullptr;
  std::string verdict = "cannot open";
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* q = nullptr;
    verdict = "cannot check";
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, nullptr) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
      verdict = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
    }
    sqlite3_finalize(q);
  }
  sqlite3_close(db);
  return verdict;
}

// Runs SQL on a file with SQLite itself, as another program would (one
// that keeps the row checksums: the values it writes are consistent, only
// not what tenax writes).
void RawSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(SQLITE_OK, sqlite3_open(path.c_str(), &db));
  ASSERT_TRUE(RegisterRowChecksumFunction(db));
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(SQLITE_OK, rc) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// The state file on a disk that fills (a 128 KiB tmpfs the test mounts; root
// only): the write that does not fit fails with an error naming the file,
// and nothing committed before it is lost: the file reopens, passes SQLite's
// integrity check and holds exactly the members written before the failure.
TEST(JobStore, AFullDiskFailsTheWriteNamingTheFileAndKeepsEveryCommittedRow) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  ScratchDir dir;
  const std::string disk = dir / "disk";
  std::filesystem::create_directories(disk);
  ASSERT_EQ(::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=128k"), 0) << std::strerror(errno);
  struct Unmount {
    std::string at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{disk};
  const std::string path = disk + "/state.db";
  int written = 0;
  Status failure;
  {
    auto store = OpenStore(path);
    ASSERT_NE(nullptr, store);
    ASSERT_TRUE(store->OpenJob("job-full", "mode = \"sync\"\n", 4).ok());
    for (int rank = 0; rank < 1000; ++rank) {  // 1000 x 2 KiB is far beyond 128 KiB
      MemberRecord m{rank, std::string(2048, 'a' + rank % 26), "127.0.0.1", static_cast<uint16_t>(1000 + rank)};
      failure = store->PutMember(m);
      if (!failure.ok()) break;
      ++written;
    }
  }
  ASSERT_FALSE(failure.ok()) << "the disk never filled";
  std::printf("full disk after %d members: %s\n", written, failure.message().c_str());
  EXPECT_GT(written, 0);
  EXPECT_NE(failure.message().find(path), std::string::npos) << failure.message();
  EXPECT_NE(failure.message().find("full"), std::string::npos) << failure.message();
  EXPECT_EQ("ok", IntegrityCheck(path));
  auto reopened = OpenStore(path);
  ASSERT_NE(nullptr, reopened);
  auto members = reopened->Members();
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  ASSERT_EQ(static_cast<int>(members->size()), written);
  for (const MemberRecord& m : *members) {
    EXPECT_EQ(m.name, std::string(2048, 'a' + m.rank % 26)) << "rank " << m.rank;
    EXPECT_EQ(m.port, 1000 + m.rank);
  }
}

TEST(JobStore, ANewJobStartsJoiningAtGenerationZero) {
  ScratchDir dir;
  auto store = OpenStore(dir / "state.db");
  ASSERT_NE(nullptr, store);
  auto job = store->OpenJob("job-a", "mode = \"sync\"\n", 3);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ("job-a", job->job_id);
  EXPECT_EQ("mode = \"sync\"\n", job->config_toml);
  EXPECT_EQ(3, job->world);
  EXPECT_EQ(JobPhase::kJoining, job->phase);
  EXPECT_EQ(0u, job->generation);
  EXPECT_EQ("", job->failure);
  EXPECT_FALSE(job->resumed);
  auto members = store->Members();
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  EXPECT_TRUE(members->empty());
}

// Joined member `rank` on the `host`-th test host (host-a/11 at 10.0.0.1:40001, ...).
MemberRecord Joined(int rank, int host) {
  const char letter = static_cast<char>('a' + host);
  return {rank, std::string("host-") + letter + "/" + std::to_string(11 * (host + 1)), "10.0.0." + std::to_string(host + 1),
          static_cast<uint16_t>(40001 + host), MemberState::kJoined, 5 + host};
}

// Every membership change is a row: a restarted coordinator reads back each
// generation with its members, oldest first; writing a number again (a
// coordinator restarted mid-change) replaces that generation's members.
TEST(JobStore, GenerationsAreRowsThatAReopenedFileReadsBack) {
  ScratchDir dir;
  const std::string path = dir / "state.db";
  const MemberRecord a = Joined(0, 0), b = Joined(1, 1), c = Joined(2, 2);
  const GenerationRecord first{1, 0, "all 3 workers joined", {a, b, c}};
  const GenerationRecord second{2, 118, "rank 1 lost: silent for 2000 ms", {a, c}};
  {
    auto store = OpenStore(path);
    ASSERT_NE(nullptr, store);
    ASSERT_TRUE(store->OpenJob("job-a", "cfg = 1\n", 3).ok());
    ASSERT_OK(store->PutGeneration(first));
    ASSERT_OK(store->PutGeneration({2, 117, "draft", {a, b, c}}));
    ASSERT_OK(store->PutGeneration(second));  // same number: replaces the draft and its members
  }
  auto store = OpenStore(path);
  ASSERT_NE(nullptr, store);
  ASSERT_OK_AND_ASSIGN(auto generations, store->Generations());
  EXPECT_EQ((std::vector<GenerationRecord>{first, second}), generations);
}

// The stable generation and its members come back with the job; a number
// that is not one of the job's generations is damage, named.
TEST(JobStore, TheStableGenerationComesBackWithTheJobAndABadOneIsNamed) {
  ScratchDir dir;
  const std::string path = dir / "state.db";
  const MemberRecord a = Joined(0, 0), b = Joined(1, 1), c = Joined(3, 2);
  {
    auto store = OpenStore(path);
    ASSERT_NE(nullptr, store);
    ASSERT_OK_AND_ASSIGN(JobRecord fresh, store->OpenJob("job-a", "cfg = 1\n", 2));
    EXPECT_EQ(0u, fresh.stable_generation);
    ASSERT_OK(store->PutGeneration({1, 0, "all 2 workers joined", {a, b}}));
    ASSERT_OK(store->PutGeneration({2, 50, "rank 3 joined", {a, b, c}}));
    ASSERT_OK(store->SetJobState(JobPhase::kRunning, "", 2));
    ASSERT_OK(store->SetStableGeneration(1));
  }
  {
    auto store = OpenStore(path);
    ASSERT_NE(nullptr, store);
    ASSERT_OK_AND_ASSIGN(JobRecord resumed, store->OpenJob("job-a", "cfg = 1\n", 2));
    EXPECT_TRUE(resumed.resumed);
    EXPECT_EQ(1u, resumed.stable_generation);
    EXPECT_EQ((std::set<int>{0, 1}), resumed.stable_members);
    ASSERT_OK(store->SetStableGeneration(2));  // replaces it
  }
  {
    auto store = OpenStore(path);
    ASSERT_NE(nullptr, store);
    ASSERT_OK_AND_ASSIGN(JobRecord resumed, store->OpenJob("job-a", "cfg = 1\n", 2));
    EXPECT_EQ(2u, resumed.stable_generation);
    EXPECT_EQ((std::set<int>{0, 1, 3}), resumed.stable_members);
  }
  RawSql(path, "UPDATE stable_generation SET number = 7");
  auto store = OpenStore(path);
  ASSERT_NE(nullptr, store);
  auto damaged = store->OpenJob("job-a", "cfg = 1\n", 2);
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(StatusCode::kDataLoss, damaged.status().code());
  EXPECT_NE(std::string::npos, damaged.status().message().find("stable generation 7 is not one of generations 1..2"))
      << damaged.status().ToString();
}

// A state file written before generations existed gets the tables on open;
// a damaged generation row is named, not trusted.
TEST(JobStore, GenerationTablesAreAddedToOlderFilesAndDamagedRowsAreNamed) {
  ScratchDir dir;
  const std::string path = dir / "state.db";
  RawSql(path,
         "CREATE TABLE job (id INTEGER PRIMARY KEY CHECK (id = 1), job_id TEXT NOT NULL, config_toml TEXT NOT NULL, "
         "world INTEGER NOT NULL, state TEXT NOT NULL, generation INTEGER NOT NULL, failure TEXT NOT NULL DEFAULT '');"
         "CREATE TABLE member (rank INTEGER PRIMARY KEY, name TEXT NOT NULL, host TEXT NOT NULL, port INTEGER NOT NULL, "
         "state TEXT NOT NULL, lease_until_ms INTEGER NOT NULL);"
         "PRAGMA application_id = 1414420547;");  // stamped by a tenax without generations
  {
    auto store = OpenStore(path);
    ASSERT_NE(nullptr, store);
    ASSERT_OK_AND_ASSIGN(auto none, store->Generations());
    EXPECT_TRUE(none.empty());
    ASSERT_OK(store->PutGeneration({1, 0, "all 1 workers joined", {{0, "w", "h", 1, MemberState::kJoined, 2}}}));
  }
  RawSql(path, "UPDATE generation_member SET state = 'zombie' WHERE generation = 1");
  auto store = OpenStore(path);
  ASSERT_NE(nullptr, store);
  auto damaged = store->Generations();
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(StatusCode::kDataLoss, damaged.status().code());
  EXPECT_NE(std::string::npos, damaged.status().message().find("generation 1, member rank 0 holds state 'zombie'"))
      << damaged.status().ToString();
}

TEST(JobStore, AReopenedFileResumesTheJobWithItsMembersRanksAndGeneration) {
  ScratchDir dir;
  const std::string path = dir / "state.db";
  const MemberRecord a{0, "host-a/11", "10.0.0.1", 40001, MemberState::kDone, 1'700'000'000'123};
  MemberRecord b{2, "host-b/22", "10.0.0.2", 65535, MemberState::kJoined, 7};
  const MemberRecord gone{1, "host-c/33", "10.0.0.3", 40003, MemberState::kJoined, 9};
  {
    auto store = OpenStore(path);
    ASSERT_NE(nullptr, store);
    ASSERT_TRUE(store->OpenJob("job-a", "cfg = 1\n", 3).ok());
    for (const auto& m : {a, b, gone}) ASSERT_TRUE(store->PutMember(m).ok());
    ASSERT_TRUE(store->RemoveMember(1).ok());
    b.state = MemberState::kFailed;  // replaced by rank
    ASSERT_TRUE(store->PutMember(b).ok());
    ASSERT_TRUE(store->RenewLeases({2}, 1'800'000'000'000).ok());
    b.lease_until_ms = 1'800'000'000'000;
    ASSERT_TRUE(store->SetJobState(JobPhase::kFailed, "rank 2 on 10.0.0.2 failed: boom", 4).ok());
  }  // closed, as a killed coordinator's file would be
  auto store = OpenStore(path);
  ASSERT_NE(nullptr, store);
  auto job = store->OpenJob("job-a", "the job file may have changed", 3);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_TRUE(job->resumed);
  EXPECT_EQ("job-a", job->job_id);
  EXPECT_EQ("cfg = 1\n", job->config_toml) << "the stored configuration is authoritative";
  EXPECT_EQ(3, job->world);
  EXPECT_EQ(JobPhase::kFailed, job->phase);
  EXPECT_EQ(4u, job->generation);
  EXPECT_EQ("rank 2 on 10.0.0.2 failed: boom", job->failure);
  auto members = store->Members();
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  EXPECT_EQ((std::vector<MemberRecord>{a, b}), *members);
}

TEST(JobStore, AFileOfAnotherJobOrWorldIsRefused) {
  ScratchDir dir;
  const std::string path = dir / "state.db";
  {
    auto store = OpenStore(path);
    ASSERT_NE(nullptr, store);
    ASSERT_TRUE(store->OpenJob("job-a", "", 2).ok());
  }
  auto store = OpenStore(path);
  ASSERT_NE(nullptr, store);
  auto other = store->OpenJob("job-b", "", 2);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(StatusCode::kFailedPrecondition, other.status().code());
  EXPECT_EQ("state file " + path + " belongs to job 'job-a', not 'job-b' (use another --state file)",
            other.status().message());
  auto bigger = store->OpenJob("job-a", "", 3);
  ASSERT_FALSE(bigger.ok());
  EXPECT_EQ("state file " + path + ": job 'job-a' was started with 2 workers, the job file now asks for 3",
            bigger.status().message());
}

TEST(JobStore, AFileThatIsNotADatabaseIsRefusedBySQLitesWords) {
  ScratchDir dir;
  const std::string path = dir / "state.db";
  std::vector<uint8_t> junk(4096);
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<uint8_t>(i * 131 + 7);
  tenax::testing::WriteBytes(path, junk);
  auto store = JobStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(StatusCode::kIoError, store.status().code());
  EXPECT_EQ("state file " + path + ": file is not a database", store.status().message());
  EXPECT_EQ(junk, tenax::testing::ReadBytes(path)) << "left as it was";
}

TEST(JobStore, AnotherProgramsDatabaseIsRefusedAndLeftAlone) {
  ScratchDir dir;
  const std::string path = dir / "other.db";
  RawSql(path, "CREATE TABLE job (id INTEGER, title TEXT); INSERT INTO job VALUES (1, 'payroll');");
  auto store = JobStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(StatusCode::kFailedPrecondition, store.status().code());
  EXPECT_EQ("state file " + path +
                " is not a tenax coordinator state file (it holds tables job); use another "
                "--state file",
            store.status().message());
  // Not written into: still only its own table.
  RawSql(path, "SELECT title FROM job; CREATE TABLE check_no_member (x); DROP TABLE check_no_member;");
  sqlite3* db = nullptr;
  ASSERT_EQ(SQLITE_OK, sqlite3_open(path.c_str(), &db));
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(SQLITE_OK, sqlite3_prepare_v2(db, "SELECT group_concat(name) FROM sqlite_master", -1, &q, nullptr));
  ASSERT_EQ(SQLITE_ROW, sqlite3_step(q));
  EXPECT_EQ("job", std::string(reinterpret_cast<const char*>(sqlite3_column_text(q, 0))));
  sqlite3_finalize(q);
  sqlite3_close(db);

  // Another program that stamps its files is refused by its stamp.
  const std::string stamped = dir / "stamped.db";
  RawSql(stamped, "PRAGMA application_id = 42;");
  store = JobStore::Open(stamped);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ("state file " + stamped +
                " belongs to another program (SQLite application id 42); use another "
                "--state file",
            store.status().message());
}

TEST(JobStore, AStateFileFromBeforeTheStampIsStillResumed) {
  ScratchDir dir;
  const std::string path = dir / "old.db";
  // The schema of state files written before they carried an application id.
  RawSql(path, R"sql(
    CREATE TABLE job (id INTEGER PRIMARY KEY CHECK (id = 1), job_id TEXT NOT NULL, config_toml TEXT NOT NULL,
                      world INTEGER NOT NULL, state TEXT NOT NULL, generation INTEGER NOT NULL,
                      failure TEXT NOT NULL DEFAULT '');
    CREATE TABLE member (rank INTEGER PRIMARY KEY, name TEXT NOT NULL, host TEXT NOT NULL, port INTEGER NOT NULL,
                         state TEXT NOT NULL, lease_until_ms INTEGER NOT NULL);
    INSERT INTO job VALUES (1, 'old-job', 'c', 2, 'running', 1, '');
    INSERT INTO member VALUES (1, 'w1', 'h1', 1234, 'joined', 99);
  )sql");
  auto store = OpenStore(path);
  ASSERT_NE(nullptr, store);
  auto job = store->OpenJob("old-job", "", 2);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(JobPhase::kRunning, job->phase);
  EXPECT_EQ(1u, job->generation);
  auto members = store->Members();
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  EXPECT_EQ((std::vector<MemberRecord>{{1, "w1", "h1", 1234, MemberState::kJoined, 99}}), *members);
}

TEST(JobStore, ValuesTenaxNeverWritesAreReportedAsDamage) {
  ScratchDir dir;
  const std::string path = dir / "state.db";
  {
    auto store = OpenStore(path);
    ASSERT_NE(nullptr, store);
    ASSERT_TRUE(store->OpenJob("job-a", "", 2).ok());
    ASSERT_TRUE(store->PutMember({0, "w0", "h0", 1, MemberState::kJoined, 0}).ok());
  }
  RawSql(path, "UPDATE member SET state = 'dancing' WHERE rank = 0;");
  {
    auto store = OpenStore(path);
    ASSERT_NE(nullptr, store);
    auto members = store->Members();
    ASSERT_FALSE(members.ok());
    EXPECT_EQ(StatusCode::kDataLoss, members.status().code());
    EXPECT_EQ("state file " + path +
                  ": member rank 0 holds state 'dancing' and port 1, which tenax never writes "
                  "(damaged file?)",
              members.status().message());
  }
  RawSql(path, "UPDATE job SET state = 'paused';");
  auto store = OpenStore(path);
  ASSERT_NE(nullptr, store);
  auto job = store->OpenJob("job-a", "", 2);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(StatusCode::kDataLoss, job.status().code());
  EXPECT_EQ("state file " + path +
                ": the job row holds state 'paused', 2 workers and generation 0, which tenax "
                "never writes (damaged file?)",
            job.status().message());
}

TEST(JobStore, AnUnopenablePathNamesTheFile) {
  ScratchDir dir;
  const std::string path = dir / "no-such-dir/state.db";
  auto store = JobStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(StatusCode::kIoError, store.status().code());
  EXPECT_NE(std::string::npos, store.status().message().find("state file " + path + ": cannot open"))
      << store.status().message();
}

}  // namespace

// A value flipped on disk in a row that drives decisions (a member's name)
// passes SQLite's integrity check, but not the row's checksum: the file is
// refused at open, naming the table and the row. A program without the
// checksum function cannot write those rows at all.
TEST(JobStore, AValueFlippedOnDiskIsCaughtByItsRowChecksumAndNamed) {
  ScratchDir dir;
  const std::string path = dir / "state.db";
  {
    auto store = OpenStore(path);
    ASSERT_NE(nullptr, store);
    ASSERT_TRUE(store->OpenJob("job-a", "", 2).ok());
    ASSERT_OK(store->PutMember({0, "w0", "h0", 1, MemberState::kJoined, 0}));
    ASSERT_OK(store->PutMember({1, "worker-QQQQ", "h1", 2, MemberState::kJoined, 0}));
  }
  {  // Unknown function: another program cannot write the row.
    sqlite3* db = nullptr;
    ASSERT_EQ(SQLITE_OK, sqlite3_open(path.c_str(), &db));
    char* err = nullptr;
    EXPECT_NE(SQLITE_OK, sqlite3_exec(db, "UPDATE member SET port = 9 WHERE rank = 1", nullptr, nullptr, &err));
    EXPECT_NE(nullptr, std::strstr(err ? err : "", "tenax_row_crc")) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
  }
  ASSERT_GE(tenax::testing::FlipLastByteOf(path, "worker-QQQQ"), 1) << "the name is in the file";
  EXPECT_EQ("ok", IntegrityCheck(path)) << "still a valid SQLite file...";
  // ...that tenax no longer trusts.
  auto reopened = JobStore::Open(path);
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(StatusCode::kDataLoss, reopened.status().code());
  EXPECT_NE(std::string::npos, reopened.status().message().find("state file " + path + ": table member, rank 1"))
      << reopened.status().ToString();
  EXPECT_NE(std::string::npos, reopened.status().message().find("do not match the row's checksum"))
      << reopened.status().ToString();
}

}  // namespace tenax::coord

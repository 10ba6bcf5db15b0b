// `tenax storage` data nodes as real processes on loopback: ingest, reads,
// degraded reads after a SIGKILL and a wiped directory, recovery over the
// transport with every byte counted, a restart that verifies the disk and
// quarantines a flipped chunk, and a client that breaks the protocol.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "tenax/net/node.h"
#include "tenax/store/net_chunk_store.h"
#include "tenax/store/recovery.h"
#include "tenax/store/catalog.h"
#include "tenax/store/recovery_service.h"
#include "tenax/store/storage_codec.h"
#include "tenax/data/fashion_mnist.h"
#include "testing.h"

namespace tenax::store {
namespace {

using namespace std::chrono_literals;
using testing::Child;
constexpr const char* kSecret = "storage-test-secret-0123456789";

class StorageClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TENAX_SECRET", kSecret, 1);
    auto data = LoadFashionMnist(kDefaultFashionMnistDir, Split::kTest);
    ASSERT_TRUE(data.ok()) << data.status().message();
    const LabeledImages first = TakeFirst(std::move(*data), 3000);
    labels_ = first.labels;
    records_ = testing::ImageLabelRecords(first.pixels, first.labels, 784);
    layout_.records = 3000;
    layout_.record_bytes = 785;
    layout_.chunk_bytes = 785 * 50;
    net::NodeOptions o;
    o.name = "test-client";
    o.secret = kSecret;
    // 4 s, as the cluster tests use: CI once saw two of these tests, in
    // parallel, each lose a healthy data node to a 2 s timeout at the same
    // instant (the whole loaded 2-core machine stalled); nothing here
    // relies on the timeout to find a node (kills reset the connection).
    o.peer_timeout = 4000ms;
    auto node = net::Node::Create(o);
    ASSERT_TRUE(node.ok()) << node.status().message();
    client_ = std::move(*node);
    for (int i = 0; i < 6; ++i) {
      nodes_.push_back({"node-" + std::to_string(i), ""});
      ASSERT_NO_FATAL_FAILURE(Start(i));
    }
  }

  std::string Dir(int i) { return dir_ / ("node-" + std::to_string(i)); }

  // Starts data node i on its directory and connects a store to it.
  void Start(int i) {
    children_.resize(6);
    stores_.resize(6);
    children_[static_cast<size_t>(i)] = std::make_unique<Child>(std::vector<std::string>{
        testing::TenaxBinary(), "storage", "--dir", Dir(i), "--name", "node-" + std::to_string(i)});
    Child& c = *children_[static_cast<size_t>(i)];
    ASSERT_TRUE(c.WaitForStderrLine("listening on", 60s)) << c.stderr_text();
    ASSERT_GT(Port(i), 0) << c.stderr_text();
    auto store = NetChunkStore::Connect(client_.get(), "node-" + std::to_string(i), "127.0.0.1", Port(i), 1 << 20, 30000ms);
    ASSERT_TRUE(store.ok()) << store.status().message();
    (*store)->set_request_timeout(5000ms);
    stores_[static_cast<size_t>(i)] = std::move(*store);
  }

  // The port data node i said it listens on (0 if it did not).
  uint16_t Port(int i) {
    std::smatch m;
    const std::string text = children_[static_cast<size_t>(i)]->stderr_text();
    if (!std::regex_search(text, m, std::regex("listening on 127\\.0\\.0\\.1:([0-9]+)"))) return 0;
    return static_cast<uint16_t>(std::stoi(m[1]));
  }

  void Kill(int i) {
    children_[static_cast<size_t>(i)]->Signal(SIGKILL);
    children_[static_cast<size_t>(i)]->Wait(30s);
  }

  std::vector<ChunkStore*> Stores() {
    std::vector<ChunkStore*> out;
    for (auto& s : stores_) out.push_back(s.get());
    return out;
  }
  uint64_t BytesRead() {
    uint64_t n = 0;
    for (auto& s : stores_) n += s ? s->bytes_read() : 0;
    return n;
  }

  Result<DatasetManifest> Put() {
    return PutDataset("fmnist", records_, layout_, 10, [this](uint64_t r) { return int{labels_[r]}; }, nodes_, Stores());
  }

  testing::ScratchDir dir_;
  std::vector<uint8_t> records_, labels_;
  LayoutParams layout_;
  std::vector<DataNodeInfo> nodes_;
  std::unique_ptr<net::Node> client_;
  std::vector<std::unique_ptr<Child>> children_;
  std::vector<std::unique_ptr<NetChunkStore>> stores_;
};

// Data node 5's disk is a 160 KiB tmpfs (mounted by the test; root only):
// it fills after a few chunks. Its write fails with ENOSPC, the client names
// the node and the disk's error, and the node leaves no torn chunk: every
// file on the full disk is a whole chunk whose CRC checks, and no temporary
// file is left. With 5 nodes left for stripes of 6 the ingest stops (nothing
// in the catalog); accepting the reduced durability, it completes on the
// others and every record reads back.
class StorageDiskFullTest : public StorageClusterTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
    std::filesystem::create_directories(Dir(5));
    ASSERT_EQ(::mount("tmpfs", Dir(5).c_str(), "tmpfs", 0, "size=160k"), 0) << std::strerror(errno);
    mounted_ = true;
    StorageClusterTest::SetUp();
  }
  ~StorageDiskFullTest() override {
    if (mounted_) ::umount2(Dir(5).c_str(), MNT_DETACH);
  }
  bool mounted_ = false;
};

TEST_F(StorageDiskFullTest, AFullDiskIsNamedLeavesNoTornChunkAndTheIngestGoesOnlyWhereAllowed) {
  auto refused = Put();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status().message();
  EXPECT_NE(refused.status().message().find("node-5: "), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("No space left on device"), std::string::npos)
      << refused.status().message();
  int whole_chunks = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(Dir(5))) {
    if (!entry.is_regular_file()) continue;
    const std::string name = std::filesystem::relative(entry.path(), Dir(5)).string();  // "fmnist/s...c0.chunk"
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << "a torn write was left: " << entry.path();
    if (name.rfind("fmnist/", 0) != 0) continue;  // the node's own files
    // The file names its chunk: read it back expecting exactly that id.
    bool matched = false;
    for (uint64_t s = 0; s < 15 && !matched; ++s) {
      for (uint32_t i = 0; i < 6 && !matched; ++i) {
        const ChunkId id{"fmnist", s, i};
        if (id.FileName() != name) continue;
        matched = true;
        auto chunk = ReadChunkFile(entry.path().string(), id);
        EXPECT_TRUE(chunk.ok()) << entry.path() << ": " << chunk.status().message();
        whole_chunks += chunk.ok() ? 1 : 0;
      }
    }
    EXPECT_TRUE(matched) << "an unexpected file: " << entry.path();
  }
  EXPECT_GT(whole_chunks, 0) << "the disk took no chunk before it filled";
  EXPECT_LT(whole_chunks, 15) << "the disk did not fill";

  std::vector<int> failed;
  auto m = PutDataset("fmnist", records_, layout_, 10, [this](uint64_t r) { return int{labels_[r]}; }, nodes_, Stores(),
                      &failed, /*allow_reduced_durability=*/true);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(failed, std::vector<int>{5});
  auto all = ReadRecords(*m, Stores(), 0, 3000, nullptr);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_TRUE(*all == records_);
}

TEST_F(StorageClusterTest, IngestReadKillWipeReadDegradedRecoverAndEveryByteIsCounted) {
  auto m = Put();
  ASSERT_TRUE(m.ok()) << m.status().message();
  uint64_t written = 0, data_bytes = 0;
  for (auto& s : stores_) written += s->bytes_written();
  for (const auto& stripe : m->stripes) {
    for (const StoredChunk& c : stripe) data_bytes += c.index < 4 ? c.payload_bytes : 0;
  }
  EXPECT_EQ(written, data_bytes * 6 / 4);  // 15 full stripes: parity is half the data
  for (int i = 0; i < 6; ++i) {
    auto st = stores_[static_cast<size_t>(i)]->QueryStatus();
    ASSERT_TRUE(st.ok()) << st.status().message();
    EXPECT_EQ(st->chunks, 15u) << "node " << i;  // one chunk of every stripe
  }
  ReadStats stats;
  auto all = ReadRecords(*m, Stores(), 0, 3000, &stats);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_TRUE(*all == records_);
  EXPECT_EQ(BytesRead(), data_bytes);  // counted at the transport: exactly the data chunks

  // A dead machine with a dead disk.
  Kill(2);
  std::filesystem::remove_all(Dir(2));
  int on_2 = 0;
  for (const auto& stripe : m->stripes) on_2 += stripe[0].node == 2 || stripe[1].node == 2 || stripe[2].node == 2 || stripe[3].node == 2;
  ReadStats degraded;
  auto again = ReadRecords(*m, Stores(), 0, 3000, &degraded);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(*again == records_);
  EXPECT_EQ(degraded.degraded_chunks, static_cast<uint64_t>(on_2));

  // Full recovery onto the 5 live nodes, over the transport.
  std::vector<bool> alive(6, true);
  alive[2] = false;
  const uint64_t before = BytesRead();
  auto report = RecoverChunks(*m, Stores(), nodes_, alive, FindLostChunks(*m, Stores(), alive, false), {"full", {}, false});
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->chunks_rebuilt, 15u);
  EXPECT_EQ(BytesRead() - before, report->bytes_read);  // what the plan read is what crossed the network
  ReadStats after;
  auto back = ReadRecords(*m, Stores(), 0, 3000, &after);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == records_);
  EXPECT_EQ(after.degraded_chunks, 0u);
}

TEST_F(StorageClusterTest, ARestartedNodeVerifiesItsDiskQuarantinesABadChunkAndServesTheRest) {
  auto m = Put();
  ASSERT_TRUE(m.ok()) << m.status().message();
  Kill(4);
  // Flip a bit of one of node 4's data chunks while it is down.
  uint64_t stripe = 0;
  uint32_t index = 0;
  for (uint64_t s = 0; s < m->stripes.size() && index == 0; ++s) {
    for (const StoredChunk& c : m->stripes[s]) {
      if (c.node == 4 && c.index < 4) {
        stripe = s;
        index = c.index + 100;  // found (index + 100 marks it)
        break;
      }
    }
  }
  ASSERT_GE(index, 100u);
  index -= 100;
  const std::string path = Dir(4) + "/" + ChunkId{"fmnist", stripe, index}.FileName();
  auto bytes = testing::ReadBytes(path);
  bytes[bytes.size() / 2] ^= 0x01;
  testing::WriteBytes(path, bytes);
  ASSERT_NO_FATAL_FAILURE(Start(4));
  EXPECT_NE(children_[4]->stderr_text().find("14 chunks"), std::string::npos) << children_[4]->stderr_text();
  EXPECT_NE(children_[4]->stderr_text().find("1 quarantined"), std::string::npos) << children_[4]->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(Dir(4) + "/quarantine"));
  auto st = stores_[4]->QueryStatus();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->chunks, 14u);
  EXPECT_EQ(st->bad_chunks, 1u);
  ReadStats stats;
  auto all = ReadRecords(*m, Stores(), 0, 3000, &stats);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_TRUE(*all == records_);
  EXPECT_EQ(stats.degraded_chunks, 1u);
}

// A client keeps its NetChunkStore when a connection goes away (a node
// that timed out an idle client, as a test loader sees after an epoch):
// the next call connects again and reads the chunk. A node that is gone
// fails the call at once with its name, and within the back-off the next
// call does not try to connect again.
TEST_F(StorageClusterTest, AStoreConnectsAgainAfterALostConnectionAndBacksOffFromADeadNode) {
  auto m = Put();
  ASSERT_TRUE(m.ok()) << m.status().message();
  const StoredChunk& c = m->stripes[3][0];
  const ChunkId id{"fmnist", 3, c.index};
  NetChunkStore& store = *stores_[c.node];
  auto before = store.Get(id);
  ASSERT_TRUE(before.ok()) << before.status().message();

  client_->Disconnect(store.peer(), Deadline::After(5s));
  auto again = store.Get(id);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->payload == before->payload);
  EXPECT_EQ(store.reconnects(), 1u);

  Kill(static_cast<int>(c.node));
  const std::string name = "node-" + std::to_string(c.node);
  auto lost = store.Get(id);
  ASSERT_FALSE(lost.ok());
  EXPECT_NE(lost.status().message().find(name), std::string::npos) << lost.status().message();
  auto backing_off = store.Get(id);
  ASSERT_FALSE(backing_off.ok());
  EXPECT_EQ(backing_off.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(backing_off.status().message().find(name + " (127.0.0.1:" + std::to_string(Port(static_cast<int>(c.node))) +
                                                "): not reachable"),
            std::string::npos)
      << backing_off.status().message();
  EXPECT_EQ(store.reconnects(), 1u);
}

TEST_F(StorageClusterTest, AClientThatBreaksTheProtocolIsDroppedAndOthersAreStillServed) {
  auto m = Put();
  ASSERT_TRUE(m.ok()) << m.status().message();
  // A second client sends garbage as a chunk request to node 0.
  net::NodeOptions o;
  o.name = "rogue";
  o.secret = kSecret;
  auto rogue = net::Node::Create(o);
  ASSERT_TRUE(rogue.ok());
  auto peer = (*rogue)->Connect("127.0.0.1", Port(0), Deadline::After(10s));
  ASSERT_TRUE(peer.ok()) << peer.status().message();
  ASSERT_TRUE((*rogue)->SendControl(*peer, kChunkRequestKind, std::string("\xff\xff\xff garbage"), Deadline::After(5s)).ok());
  EXPECT_TRUE(children_[0]->WaitForStderrLine("dropping rogue", 30s)) << children_[0]->stderr_text();
  ReadStats stats;
  auto all = ReadRecords(*m, Stores(), 0, 3000, &stats);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_TRUE(*all == records_);
  EXPECT_EQ(stats.degraded_chunks, 0u);
}

// A data node killed during ingest (after the client connected to it)
// leaves 5 live nodes for stripes of k+m = 6: the ingest refuses, naming the
// chunk and the node it would share, and stores nothing. With the reduced
// durability accepted, its chunks go to the other nodes and the ingest
// completes; every byte reads back without a degraded read, and the stripes
// that share a node are counted. With no node left the ingest says exactly
// what was not stored.
TEST_F(StorageClusterTest, ANodeKilledDuringIngestStopsItUnlessReducedDurabilityIsAccepted) {
  Kill(3);
  std::vector<int> refused_failed;
  auto refused = PutDataset("fmnist", records_, layout_, 10, [this](uint64_t r) { return int{labels_[r]}; }, nodes_,
                            Stores(), &refused_failed);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("fmnist was not stored: fewer than k+m = 6 data nodes are live"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("--allow-reduced-durability"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused_failed, std::vector<int>{3});
  std::vector<int> failed;
  auto m = PutDataset("fmnist", records_, layout_, 10, [this](uint64_t r) { return int{labels_[r]}; }, nodes_, Stores(),
                      &failed, /*allow_reduced_durability=*/true);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(failed, std::vector<int>{3});
  for (const auto& stripe : m->stripes) {
    for (const StoredChunk& c : stripe) EXPECT_NE(c.node, 3);
  }
  ReadStats stats;
  auto all = ReadRecords(*m, Stores(), 0, 3000, &stats);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_TRUE(*all == records_);
  EXPECT_EQ(stats.degraded_chunks, 0u);
  // Every stripe had 6 chunks for 5 nodes.
  EXPECT_EQ(StripesSharingANode(*m), m->stripes.size());

  for (int i : {0, 1, 2, 4, 5}) Kill(i);
  auto none = PutDataset("fmnist2", records_, layout_, 10, [this](uint64_t r) { return int{labels_[r]}; }, nodes_,
                         Stores(), nullptr, /*allow_reduced_durability=*/true);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("fmnist2 was not stored: no live data node is left for fmnist2 stripe 0 chunk"),
            std::string::npos)
      << none.status().message();
  EXPECT_NE(none.status().message().find("stripes 0..14 are not written"), std::string::npos) << none.status().message();
}

// The `tenax store` commands against `tenax storage` processes: put over
// the transport, a SIGKILLed node seen as failed, recovery that moves
// bytes over the network (counted), and every record back.
TEST_F(StorageClusterTest, StoreCommandsWorkAgainstStorageProcesses) {
  const std::string catalog = dir_ / "store.db";
  std::string last_err;
  auto store = [&](std::vector<std::string> args, int expected_exit = 0) {
    std::vector<std::string> argv = {testing::TenaxBinary(), "store"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--catalog", catalog, "--json"});
    testing::ProcessResult r = testing::RunProcess(argv);
    last_err = r.err;
    EXPECT_EQ(r.exit_code, expected_exit) << r.err << r.out;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
    return j.is_discarded() ? nlohmann::json::object() : j;
  };
  std::vector<std::string> put = {"put", "--split", "test", "--dataset", "fmnist", "--chunk-bytes",
                                  std::to_string(785 * 500)};
  for (int i = 0; i < 6; ++i) put.insert(put.end(), {"--node", "127.0.0.1:" + std::to_string(Port(i))});
  auto p = store(put);
  EXPECT_EQ(p["stripes"], 5);
  EXPECT_EQ(p["transport_bytes"]["written"], p["bytes_written"]);  // every chunk crossed the transport
  Kill(3);
  auto st = store({"status"});
  EXPECT_EQ(st["nodes"][3]["state"], "failed");
  EXPECT_NE(last_err.find("data node node-3 (storage://127.0.0.1:" + std::to_string(Port(3)) + "): marked failed: "),
            std::string::npos)
      << last_err;
  EXPECT_EQ(st["datasets"][0]["lost_chunks"], 5);
  auto rec = store({"recover", "--policy", "full"});
  const auto& r = rec["results"][0];
  EXPECT_EQ(r["chunks_rebuilt"], 5);
  EXPECT_EQ(rec["transport_bytes"]["read"], r["bytes_read"]);
  EXPECT_EQ(rec["transport_bytes"]["written"], r["bytes_written"]);
  EXPECT_EQ(store({"status"})["datasets"][0]["lost_chunks"], 0);
  const std::string out = dir_ / "records.bin";
  auto got = store({"get", "--dataset", "fmnist", "--out", out});
  EXPECT_EQ(got["degraded_chunks"], 0);
  auto data = LoadFashionMnist(kDefaultFashionMnistDir, Split::kTest);
  ASSERT_TRUE(data.ok());
  EXPECT_TRUE(testing::ReadBytes(out) == testing::ImageLabelRecords(data->pixels, data->labels, 784));
}

// The resident recovery service (`tenax store serve`) against real data
// nodes: a request for a dataset it does not have is refused with the names
// it has; two requests for the same recovery, in flight together, run it
// once (one report, one recovery id, one of them joined); every record
// reads back byte for byte without a degraded read; a later request finds
// nothing lost. The service's writes are paced (0.005 Gbit/s: about 3 s
// for the five lost chunks) so the second request arrives while the first
// runs, even when a loaded machine stalls one asker's thread for seconds
// (0.8 s of pacing, as first written, left too narrow a window).
TEST_F(StorageClusterTest, TheRecoveryServiceRefusesAnUnknownDatasetAndRunsTwoRequestsForOneRecoveryOnce) {
  const std::string catalog = dir_ / "store.db";
  std::vector<std::string> put = {testing::TenaxBinary(), "store", "put", "--catalog", catalog, "--split", "test",
                                  "--dataset", "fmnist", "--chunk-bytes", std::to_string(785 * 500), "--json"};
  for (int i = 0; i < 6; ++i) put.insert(put.end(), {"--node", "127.0.0.1:" + std::to_string(Port(i))});
  testing::ProcessResult p = testing::RunProcess(put);
  ASSERT_EQ(p.exit_code, 0) << p.err;

  // This test talks to the nodes only through the service and the CLI, so
  // the fixture's own connections go: left open and undriven for the
  // test's 5-12 s they made the nodes miss the service's connects or one of
  // its puts on a loaded machine (3 of 7 runs at load 8; none of 5 without
  // them). A data node that one silent client slows for the others is a
  // weakness of its own (noted in docs/store.md, not fixed here).
  stores_.clear();
  client_.reset();
  Child service({testing::TenaxBinary(), "store", "serve", "--catalog", catalog, "--link-gbps", "0.005"});
  ASSERT_TRUE(service.WaitForStderrLine("listening on", 60s)) << service.stderr_text();
  std::smatch m;
  const std::string ready = service.stderr_text();
  ASSERT_TRUE(std::regex_search(ready, m, std::regex("6 data nodes connected; listening on (127\\.0\\.0\\.1:[0-9]+)")))
      << ready;
  const std::string address = m[1];

  Kill(3);
  std::filesystem::remove_all(Dir(3));

  auto connect = [&] { return RecoveryServiceClient::Connect(address, kSecret, 10000ms); };
  {
    auto client = connect();
    ASSERT_TRUE(client.ok()) << client.status().message();
    auto unknown = (*client)->Recover({"nope", {"full", {}, false}, {}}, Deadline::After(30s));
    ASSERT_FALSE(unknown.ok());
    EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
    EXPECT_NE(unknown.status().message().find("no dataset 'nope'"), std::string::npos) << unknown.status().message();
    EXPECT_NE(unknown.status().message().find("(it has: fmnist)"), std::string::npos) << unknown.status().message();
  }

  // A claim on the dataset held by a live process refuses the request,
  // naming the holder; one left by a process of this machine that died is
  // taken over (the two requests below then run the recovery).
  {
    auto claims = StoreCatalog::Open(catalog);
    ASSERT_TRUE(claims.ok()) << claims.status().message();
    char host[256] = {0};
    ::gethostname(host, sizeof(host) - 1);
    const std::string live = "test (pid " + std::to_string(::getpid()) + " on " + host + ")";
    auto held = (*claims)->ClaimRecovery("fmnist", live, 3600);
    ASSERT_TRUE(held.ok() && *held == live);
    auto client = connect();
    ASSERT_TRUE(client.ok()) << client.status().message();
    auto refused = (*client)->Recover({"fmnist", {"full", {}, false}, {}}, Deadline::After(60s));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(refused.status().message().find("already running in " + live), std::string::npos)
        << refused.status().message();
    ASSERT_TRUE((*claims)->ReleaseRecovery("fmnist", live).ok());
    const pid_t gone = ::fork();
    if (gone == 0) ::_exit(0);
    ASSERT_GT(gone, 0);
    ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
    const std::string dead = "recovery-service (pid " + std::to_string(gone) + " on " + host + ")";
    auto left = (*claims)->ClaimRecovery("fmnist", dead, 3600);
    ASSERT_TRUE(left.ok() && *left == dead);
  }

  // Two requesters at once.
  std::vector<Result<RecoveryAnswer>> answers(2, Result<RecoveryAnswer>(Internal("not asked")));
  std::vector<std::thread> askers;
  for (size_t i = 0; i < 2; ++i) {
    askers.emplace_back([&, i] {
      auto client = connect();
      if (!client.ok()) {
        answers[i] = client.status();
        return;
      }
      answers[i] = (*client)->Recover({"fmnist", {"full", {}, false}, {}}, Deadline::After(120s));
    });
  }
  for (auto& t : askers) t.join();
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(answers[i].ok()) << i << ": " << answers[i].status().message() << "\n" << service.stderr_text();
  }
  const RecoveryAnswer &a = *answers[0], &b = *answers[1];
  EXPECT_EQ(a.recovery_id, 2u);  // recovery 1 was refused by the live claim
  EXPECT_EQ(b.recovery_id, 2u);
  EXPECT_NE(a.joined, b.joined) << "exactly one request started the recovery";
  EXPECT_EQ(a.report, b.report);
  ASSERT_EQ(a.report["results"].size(), 1u);
  const nlohmann::json& r = a.report["results"][0];
  EXPECT_EQ(r["dataset"], "fmnist");
  EXPECT_EQ(r["lost_chunks"], 5);  // one chunk of each of the 5 stripes was on node 3
  EXPECT_EQ(r["chunks_rebuilt"], 5);
  EXPECT_EQ(a.report["transport_bytes"]["written"], r["bytes_written"]);  // what it rebuilt crossed the network once
  EXPECT_EQ(a.report["transport_bytes"]["read"], r["bytes_read"]);
  EXPECT_EQ(r["bytes_read"].get<uint64_t>(), 4 * r["bytes_written"].get<uint64_t>());  // k = 4 survivors per chunk

  // Every record is back where the catalog says, read without decoding.
  const std::string out = dir_ / "records.bin";
  testing::ProcessResult got = testing::RunProcess(
      {testing::TenaxBinary(), "store", "get", "--catalog", catalog, "--dataset", "fmnist", "--out", out, "--json"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  auto gj = nlohmann::json::parse(got.out, nullptr, false);
  ASSERT_TRUE(gj.is_object()) << got.out;
  EXPECT_EQ(gj["degraded_chunks"], 0);
  auto data = LoadFashionMnist(kDefaultFashionMnistDir, Split::kTest);
  ASSERT_TRUE(data.ok());
  EXPECT_TRUE(testing::ReadBytes(out) == testing::ImageLabelRecords(data->pixels, data->labels, 784));

  // The next request is a recovery of its own, and finds nothing lost.
  auto client = connect();
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto again = (*client)->Recover({"fmnist", {"full", {}, false}, {}}, Deadline::After(60s));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->recovery_id, 3u);
  EXPECT_FALSE(again->joined);
  EXPECT_EQ(again->report["results"][0]["lost_chunks"], 0);
  EXPECT_EQ(again->report["transport_bytes"]["written"], 0);

  service.Signal(SIGTERM);
  EXPECT_EQ(service.Wait(30s), 0) << service.stderr_text();
  EXPECT_NE(service.stderr_text().find("which no longer runs: taking it over"), std::string::npos)
      << service.stderr_text();
  EXPECT_NE(service.stderr_text().find("recovery 2 of fmnist done in"), std::string::npos) << service.stderr_text();
  EXPECT_NE(service.stderr_text().find("for 2 requester(s)"), std::string::npos) << service.stderr_text();
}

}  // namespace
}  // namespace tenax::store

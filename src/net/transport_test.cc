// One transport test suite, run against UCX's shared-memory path and against
// forced TCP (our stand-in for a cross-host link). Peers are real processes
// (tests/net_test_peer.cc) on loopback.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <ctime>
#include <random>
#include <regex>

#include <unistd.h>

#include "net_test_protocol.h"
#include "raw_ucx_client.h"
#include "tenax/net/auth.h"
#include "tenax/core/files.h"
#include "tenax/net/control_codec.h"
#include "tenax/net/link_faults.h"
#include "tenax/net/node.h"
#include "testing.h"

namespace tenax::net {
namespace {

using namespace std::chrono_literals;
using testing::Child;

constexpr const char* kSecret = "transport-test-secret-0123456789";

struct TransportParam {
  const char* name;
  const char* transports;
  int tcp_streams = 1;  // both sides (NodeOptions::tcp_streams)
};

class TransportTest : public ::testing::TestWithParam<TransportParam> {
 protected:
  NodeOptions Options(const std::string& secret = kSecret) {
    NodeOptions o;
    o.name = "test-client";
    o.secret = secret;
    o.transports = GetParam().transports;
    o.tcp_streams = GetParam().tcp_streams;
    o.net_devices = "lo";
    o.peer_timeout = std::chrono::milliseconds(2000);
    return o;
  }

  // Starts a peer process and returns its port (0, with a test failure
  // recorded, when it did not start).
  uint16_t StartPeer(std::unique_ptr<Child>& child, const std::string& secret = kSecret) {
    child = std::make_unique<Child>(std::vector<std::string>{TENAX_NET_TEST_PEER, secret, GetParam().transports,
                                                             std::to_string(GetParam().tcp_streams)});
    if (!child->WaitForStderrLine("PORT ")) {
      ADD_FAILURE() << "the peer process did not start: " << child->stderr_text();
      return 0;
    }
    const std::string& err = child->stderr_text();
    const unsigned long port = std::strtoul(err.c_str() + err.rfind("PORT ") + 5, nullptr, 10);
    if (port == 0 || port > 65535) ADD_FAILURE() << "the peer process printed no port: " << err;
    return port > 65535 ? 0 : static_cast<uint16_t>(port);
  }

  // A node, or null (with a test failure recorded).
  std::unique_ptr<Node> MakeNode(const std::string& secret = kSecret) { return MakeNodeWith(Options(secret)); }

  // The peer at `port` still serves a fresh, honest node (after a misbehaving one).
  void ExpectServesAnHonestPeer(uint16_t port) {
    auto node = MakeNode();
    ASSERT_TRUE(node);
    auto peer = node->Connect("127.0.0.1", port, Deadline::After(20s));
    ASSERT_TRUE(peer.ok()) << peer.status().ToString();
    ASSERT_OK_AND_ASSIGN(RemoteRegion remote, RemoteAlloc(*node, *peer, 4096));
    ExpectPeerServesPattern(*node, *peer, remote);
  }
  std::unique_ptr<Node> MakeNodeWith(const NodeOptions& options) {
    auto node = Node::Create(options);
    if (!node.ok()) {
      ADD_FAILURE() << node.status().ToString();
      return nullptr;
    }
    return std::move(*node);
  }

  // A fresh peer process and a node connected to it. Members are destroyed
  // in reverse order: the node closes before the peer process is reaped.
  struct Session {
    std::unique_ptr<Child> child;
    std::unique_ptr<Node> node;
    PeerId peer = 0;
    Status status;
  };
  Session ConnectToNewPeer() { return ConnectToNewPeer(Options()); }
  Session ConnectToNewPeer(const NodeOptions& options) {
    Session s;
    uint16_t port = StartPeer(s.child);
    s.node = MakeNodeWith(options);
    if (port == 0 || !s.node) {
      s.status = Internal("no peer process or no node");
      return s;
    }
    auto peer = s.node->Connect("127.0.0.1", port, Deadline::After(20s));
    s.status = peer.status();
    if (peer.ok()) s.peer = *peer;
    return s;
  }

  // Asks the peer for a region of `size` bytes (filled with Pattern) and
  // imports it.
  Result<RemoteRegion> RemoteAlloc(Node& node, PeerId peer, size_t size) {
    TENAX_RETURN_IF_ERROR(node.SendControl(peer, testproto::kAlloc, std::to_string(size), Deadline::After(10s)));
    TENAX_ASSIGN_OR_RETURN(ControlMessage reply, node.ReceiveControl(Deadline::After(30s), peer));
    if (reply.kind != testproto::kRegion) return ProtocolError("reply of kind " + std::to_string(reply.kind));
    TENAX_ASSIGN_OR_RETURN(DecodedRegion d, DecodeRegion(reply.payload, "peer"));
    return node.Import(peer, RegionDescriptor{d.address, d.length, d.rkey});
  }

  // The hash of bytes [off, off + len) of the peer's last region, as the peer
  // computes it.
  Result<std::string> RemoteHash(Node& node, PeerId peer, size_t off, size_t len) {
    TENAX_RETURN_IF_ERROR(node.SendControl(peer, testproto::kHash, std::to_string(off) + " " + std::to_string(len),
                                           Deadline::After(10s)));
    TENAX_ASSIGN_OR_RETURN(ControlMessage reply, node.ReceiveControl(Deadline::After(30s), peer));
    if (reply.kind != testproto::kHashReply) return ProtocolError("reply of kind " + std::to_string(reply.kind));
    return reply.payload;
  }

  // Asks the peer to read all of our `region` (shared with it) with a Get;
  // returns the bytes it read.
  Result<std::string> PeerReads(Node& node, PeerId peer, const RegionDescriptor& d) {
    TENAX_RETURN_IF_ERROR(
        node.SendControl(peer, testproto::kRead, EncodeRegion(d.address, d.length, d.rkey), Deadline::After(10s)));
    TENAX_ASSIGN_OR_RETURN(ControlMessage reply,
                           node.ReceiveControl(Deadline::After(30s), peer, testproto::kReadReply));
    return reply.payload;
  }

  // The peer is unharmed: the region it allocated (Pattern) holds exactly
  // the pattern, by its own hash and by our Get of every byte.
  void ExpectPeerServesPattern(Node& node, PeerId peer, const RemoteRegion& remote) {
    std::vector<uint8_t> expected(remote.size());
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = testproto::Pattern(i);
    auto hash = RemoteHash(node, peer, 0, expected.size());
    ASSERT_TRUE(hash.ok()) << hash.status().ToString();
    EXPECT_EQ(*hash, testproto::HashHex(expected.data(), expected.size()));
    std::vector<uint8_t> got(remote.size(), 0);
    Op get = node.Get(got.data(), got.size(), remote, 0);
    ASSERT_TRUE(node.Wait(get, Deadline::After(10s)).ok());
    EXPECT_EQ(got, expected);
  }
};

// Fails the test (instead of aborting on a dereference) when `rexpr` fails.
#define ASSERT_RESULT(lhs, rexpr)                                               \
  auto TENAX_CONCAT(result_, __LINE__) = (rexpr);                               \
  ASSERT_TRUE(TENAX_CONCAT(result_, __LINE__).ok())                             \
      << #rexpr << ": " << TENAX_CONCAT(result_, __LINE__).status().ToString(); \
  lhs = std::move(*TENAX_CONCAT(result_, __LINE__))

TEST_P(TransportTest, PutAndGetRandomSizesAndOffsets) {
  Session session = ConnectToNewPeer();
  ASSERT_TRUE(session.status.ok()) << session.status.ToString();
  auto& node = session.node;
  const PeerId* peer = &session.peer;
  constexpr size_t kRegion = 4 << 20;
  ASSERT_RESULT(RemoteRegion remote, RemoteAlloc(*node, *peer, kRegion));
  ASSERT_EQ(remote.size(), kRegion);

  // Reads of untouched memory see the peer's pattern.
  std::vector<uint8_t> got(1000);
  Op first_get = node->Get(got.data(), got.size(), remote, 12345);
  ASSERT_TRUE(node->Wait(first_get, Deadline::After(10s)).ok());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], testproto::Pattern(12345 + i)) << i;

  auto local = node->Allocate(kRegion);
  ASSERT_TRUE(local.ok());
  std::mt19937_64 rng(7);
  for (int round = 0; round < 40; ++round) {
    size_t size = 1 + rng() % (round % 4 == 0 ? kRegion / 2 : 9000);
    size_t off = rng() % (kRegion - size + 1);
    for (size_t i = 0; i < size; ++i) local->data()[i] = static_cast<uint8_t>(rng());
    Op put = node->Put(local->data(), size, remote, off);
    ASSERT_TRUE(node->Wait(put, Deadline::After(20s)).ok()) << "round " << round;
    ASSERT_TRUE(node->Flush(*peer, Deadline::After(20s)).ok());
    // The bytes are at the peer (its own hash), and a Get returns them.
    ASSERT_RESULT(std::string hash, RemoteHash(*node, *peer, off, size));
    ASSERT_EQ(hash, testproto::HashHex(local->data(), size)) << "round " << round;
    std::vector<uint8_t> back(size);
    Op get = node->Get(back.data(), size, remote, off);
    ASSERT_TRUE(node->Wait(get, Deadline::After(20s)).ok());
    ASSERT_EQ(0, std::memcmp(back.data(), local->data(), size)) << "round " << round;
  }
}

TEST_P(TransportTest, OutOfBoundsAccessIsRefusedLocally) {
  Session session = ConnectToNewPeer();
  ASSERT_TRUE(session.status.ok()) << session.status.ToString();
  auto& node = session.node;
  const PeerId* peer = &session.peer;
  ASSERT_RESULT(RemoteRegion remote, RemoteAlloc(*node, *peer, 4096));
  uint8_t buf[64] = {};
  Op op = node->Put(buf, 64, remote, 4096 - 32);
  EXPECT_EQ(node->Wait(op, Deadline::After(1s)).code(), StatusCode::kInvalidArgument);
  Op op2 = node->Get(buf, 8, remote, ~size_t{0} - 4);
  EXPECT_EQ(node->Wait(op2, Deadline::After(1s)).code(), StatusCode::kInvalidArgument);
  // The peer is unharmed: not one of its bytes changed (the zeros above never left).
  ExpectPeerServesPattern(*node, *peer, remote);
}

TEST_P(TransportTest, ManyOutstandingOperations) {
  Session session = ConnectToNewPeer();
  ASSERT_TRUE(session.status.ok()) << session.status.ToString();
  auto& node = session.node;
  const PeerId* peer = &session.peer;
  constexpr size_t kChunk = 4096, kCount = 512;
  ASSERT_RESULT(RemoteRegion remote, RemoteAlloc(*node, *peer, kChunk * kCount));
  auto local = node->Allocate(kChunk * kCount);
  ASSERT_TRUE(local.ok());
  for (size_t i = 0; i < local->size(); ++i) local->data()[i] = static_cast<uint8_t>(i * 13 + i / 4096);
  std::vector<Op> ops;
  for (size_t c = 0; c < kCount; ++c) ops.push_back(node->Put(local->data() + c * kChunk, kChunk, remote, c * kChunk));
  ASSERT_TRUE(node->WaitAll(ops, Deadline::After(30s)).ok());
  ASSERT_TRUE(node->Flush(*peer, Deadline::After(30s)).ok());
  std::vector<uint8_t> back(kChunk * kCount);
  std::vector<Op> gets;
  for (size_t c = 0; c < kCount; ++c) gets.push_back(node->Get(back.data() + c * kChunk, kChunk, remote, c * kChunk));
  ASSERT_TRUE(node->WaitAll(gets, Deadline::After(30s)).ok());
  EXPECT_EQ(0, std::memcmp(back.data(), local->data(), back.size()));
}

TEST_P(TransportTest, ConcurrentPeers) {
  constexpr int kPeers = 3;
  std::unique_ptr<Child> children[kPeers];
  std::vector<uint16_t> ports;
  for (auto& c : children) ports.push_back(StartPeer(c));
  auto node = MakeNode();
  ASSERT_TRUE(node);
  std::vector<PeerId> peers;
  std::vector<RemoteRegion> remotes;
  for (uint16_t port : ports) {
    ASSERT_NE(port, 0);
    auto p = node->Connect("127.0.0.1", port, Deadline::After(20s));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    peers.push_back(*p);
    ASSERT_RESULT(RemoteRegion remote, RemoteAlloc(*node, *p, 1 << 20));
    remotes.push_back(std::move(remote));
  }
  std::vector<std::vector<uint8_t>> data(kPeers, std::vector<uint8_t>(1 << 20));
  std::vector<Op> ops;
  for (int k = 0; k < kPeers; ++k) {
    for (size_t i = 0; i < data[k].size(); ++i) data[k][i] = static_cast<uint8_t>(i * (k + 3));
    for (size_t off = 0; off < data[k].size(); off += 65536) {
      ops.push_back(node->Put(data[k].data() + off, 65536, remotes[k], off));  // interleaved across peers
    }
  }
  ASSERT_TRUE(node->WaitAll(ops, Deadline::After(30s)).ok());
  for (int k = 0; k < kPeers; ++k) {
    ASSERT_TRUE(node->Flush(peers[k], Deadline::After(20s)).ok());
    ASSERT_RESULT(std::string hash, RemoteHash(*node, peers[k], 0, data[k].size()));
    EXPECT_EQ(hash, testproto::HashHex(data[k].data(), data[k].size()));
  }
}

TEST_P(TransportTest, ControlMessagesRoundTripAndAreBounded) {
  Session session = ConnectToNewPeer();
  ASSERT_TRUE(session.status.ok()) << session.status.ToString();
  auto& node = session.node;
  const PeerId* peer = &session.peer;
  for (size_t size : {size_t{0}, size_t{1}, size_t{1000}, size_t{100000}, size_t{900000}}) {
    std::string payload(size, '\0');
    for (size_t i = 0; i < size; ++i) payload[i] = static_cast<char>(i * 7);
    ASSERT_TRUE(node->SendControl(*peer, testproto::kEcho, payload, Deadline::After(10s)).ok()) << size;
    auto reply = node->ReceiveControl(Deadline::After(20s), *peer);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->kind, testproto::kEchoReply);
    EXPECT_EQ(reply->payload, payload) << size;
  }
  // Larger than the limit: refused before sending.
  EXPECT_EQ(node->SendControl(*peer, testproto::kEcho, std::string(2 << 20, 'x'), Deadline::After(1s)).code(),
            StatusCode::kInvalidArgument);
  // A kind outside the registry (message_kinds.h): refused before sending.
  const Status unregistered = node->SendControl(*peer, 0x5000, "stray", Deadline::After(1s));
  EXPECT_EQ(unregistered.code(), StatusCode::kInvalidArgument) << unregistered.ToString();
  EXPECT_NE(unregistered.message().find("0x5000"), std::string::npos) << unregistered.ToString();
  // Neither refusal reached the peer: the next message it answers is ours.
  ASSERT_TRUE(node->SendControl(*peer, testproto::kEcho, "after", Deadline::After(10s)).ok());
  ASSERT_RESULT(ControlMessage reply, node->ReceiveControl(Deadline::After(20s), *peer));
  EXPECT_EQ(reply.kind, testproto::kEchoReply);
  EXPECT_EQ(reply.payload, "after");
}

// The CPU time this thread has used.
double ThreadCpuSeconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// A wait with nothing to receive leaves the core to others: idle for over
// 50 ms it sleeps per look (NodeOptions::sleep_when_idle) instead of
// spinning (a warm spare waits like this for a whole run, beside training
// members). A message that then comes is still received, intact.
TEST_P(TransportTest, ALongIdleWaitSleepsAndStillReceivesWhatComes) {
  Session session = ConnectToNewPeer();
  ASSERT_TRUE(session.status.ok()) << session.status.ToString();
  auto& node = session.node;
  const auto start = SteadyClock::now();
  const double cpu0 = ThreadCpuSeconds();
  auto none = node->ReceiveControl(Deadline::After(1500ms), session.peer, testproto::kEchoReply);
  const double cpu = ThreadCpuSeconds() - cpu0;
  const double wall = std::chrono::duration<double>(SteadyClock::now() - start).count();
  EXPECT_EQ(StatusCode::kDeadlineExceeded, none.status().code()) << none.status().ToString();
  EXPECT_GE(wall, 1.4);
  // Spinning took the whole wait (about 1.5 s of CPU on an idle core); the
  // sleeping wait spins only 50 ms after each heartbeat (every 200 ms).
  EXPECT_LT(cpu, 0.5 * wall) << "the idle wait used " << cpu << " s of CPU in " << wall << " s";
  ASSERT_TRUE(node->SendControl(session.peer, testproto::kEcho, "after the wait", Deadline::After(10s)).ok());
  ASSERT_RESULT(ControlMessage reply, node->ReceiveControl(Deadline::After(20s), session.peer));
  EXPECT_EQ(reply.kind, testproto::kEchoReply);
  EXPECT_EQ(reply.payload, "after the wait");
}

// A dropped region stays registered (the graveyard) only while a peer that
// was given its key lives, whoever else is connected.
TEST_P(TransportTest, DroppedRegionStaysRegisteredOnlyForPeersGivenItsKey) {
  std::unique_ptr<Child> holder_process, other_process;
  const uint16_t holder_port = StartPeer(holder_process), other_port = StartPeer(other_process);
  ASSERT_NE(holder_port, 0);
  ASSERT_NE(other_port, 0);
  auto node = MakeNode();
  ASSERT_TRUE(node);
  ASSERT_RESULT(const PeerId holder, node->Connect("127.0.0.1", holder_port, Deadline::After(20s)));
  ASSERT_RESULT(const PeerId other, node->Connect("127.0.0.1", other_port, Deadline::After(20s)));
  ASSERT_EQ(node->RegisteredRegions(), 0u);

  {
    ASSERT_RESULT(MemoryRegion never_shared, node->Allocate(4096));
    EXPECT_EQ(node->RegisteredRegions(), 1u);
  }
  // Nobody was given its key: unregistered at once, although two peers are connected.
  EXPECT_EQ(node->RegisteredRegions(), 0u);

  constexpr size_t kSize = 64 << 10;
  ASSERT_RESULT(MemoryRegion shared, node->Allocate(kSize));
  for (size_t i = 0; i < kSize; ++i) shared.data()[i] = static_cast<uint8_t>(i * 7 + 3);
  const std::string expected(reinterpret_cast<const char*>(shared.data()), kSize);
  ASSERT_RESULT(const RegionDescriptor key, node->Share(shared, holder));
  ASSERT_RESULT(const std::string before_drop, PeerReads(*node, holder, key));
  EXPECT_EQ(before_drop, expected);
  { MemoryRegion dropped = std::move(shared); }
  // Kept for the peer holding the key, which still reads the same bytes.
  EXPECT_EQ(node->RegisteredRegions(), 1u);
  ASSERT_RESULT(const std::string after_drop, PeerReads(*node, holder, key));
  EXPECT_EQ(after_drop, expected);

  node->Disconnect(holder, Deadline::After(10s));
  // Unregistered with its holder gone (once its data endpoint has closed: a
  // put it sent may land until then), although the other peer is still
  // connected.
  const Deadline closed = Deadline::After(10s);
  while (node->RegisteredRegions() != 0 && !closed.Expired()) node->Progress();
  EXPECT_EQ(node->RegisteredRegions(), 0u);
  EXPECT_TRUE(node->PeerStatus(other).ok());
  // A key is only handed to a usable peer.
  ASSERT_RESULT(MemoryRegion late, node->Allocate(64));
  EXPECT_EQ(node->Share(late, holder).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(node->Share(MemoryRegion{}, other).status().code(), StatusCode::kInvalidArgument);
}

// The control messages nobody reads are bounded per peer: up to the bound
// they wait for their reader; a real peer process that floods past it is lost
// with a ProtocolError naming it, and the node keeps serving its other peers.
TEST_P(TransportTest, APeerFloodingUnreadControlMessagesIsLost) {
  constexpr size_t kBound = 64;
  std::unique_ptr<Child> flooder_process, bystander_process;
  const uint16_t flooder_port = StartPeer(flooder_process), bystander_port = StartPeer(bystander_process);
  ASSERT_NE(flooder_port, 0);
  ASSERT_NE(bystander_port, 0);
  NodeOptions options = Options();
  options.max_unread_control_messages = kBound;
  auto node = MakeNodeWith(options);
  ASSERT_TRUE(node);
  ASSERT_RESULT(const PeerId flooder, node->Connect("127.0.0.1", flooder_port, Deadline::After(20s)));
  ASSERT_RESULT(const PeerId bystander, node->Connect("127.0.0.1", bystander_port, Deadline::After(20s)));

  // 63 items and the "done" behind them: exactly kBound unread, all kept in order.
  ASSERT_TRUE(node->SendControl(flooder, testproto::kFlood, "63 100", Deadline::After(10s)).ok());
  ASSERT_RESULT(const ControlMessage done, node->ReceiveControl(Deadline::After(30s), flooder, testproto::kFloodDone));
  EXPECT_EQ(done.payload, "63");
  ASSERT_TRUE(node->PeerStatus(flooder).ok()) << node->PeerStatus(flooder).ToString();
  for (size_t i = 0; i < 63; ++i) {
    ASSERT_RESULT(const ControlMessage item, node->ReceiveControl(Deadline::After(1s), flooder, testproto::kFloodItem));
    EXPECT_EQ(item.payload.substr(0, 8), testproto::FloodIndex(i));
    EXPECT_EQ(item.payload.size(), 100u);
  }

  // Past the bound: the flooder is lost, named, and its unread messages are gone.
  ASSERT_TRUE(node->SendControl(flooder, testproto::kFlood, "1000 100", Deadline::After(10s)).ok());
  const Deadline deadline = Deadline::After(30s);
  while (node->PeerStatus(flooder).ok() && !deadline.Expired()) node->Progress();
  const Status lost = node->PeerStatus(flooder);
  EXPECT_EQ(lost.code(), StatusCode::kProtocolError) << lost.ToString();
  EXPECT_NE(lost.message().find("flooded"), std::string::npos) << lost.ToString();
  EXPECT_NE(lost.message().find("127.0.0.1:" + std::to_string(flooder_port) + " (test-peer)"), std::string::npos)
      << lost.ToString();
  EXPECT_NE(lost.message().find(std::to_string(kBound) + " messages"), std::string::npos) << lost.ToString();
  EXPECT_EQ(node->ReceiveControl(Deadline::After(1s), flooder).status().code(), StatusCode::kProtocolError);

  // The other peer is served as before.
  const std::string payload(5000, 'b');
  ASSERT_TRUE(node->SendControl(bystander, testproto::kEcho, payload, Deadline::After(10s)).ok());
  ASSERT_RESULT(const ControlMessage echo, node->ReceiveControl(Deadline::After(20s), bystander));
  EXPECT_EQ(echo.kind, testproto::kEchoReply);
  EXPECT_EQ(echo.payload, payload);
}

TEST_P(TransportTest, WrongSecretIsRefusedAndTheServerKeepsServing) {
  std::unique_ptr<Child> child;
  uint16_t port = StartPeer(child);
  ASSERT_NE(port, 0);
  auto intruder = MakeNode("not-the-cluster-secret-at-all!!");
  ASSERT_TRUE(intruder);
  auto bad = intruder->Connect("127.0.0.1", port, Deadline::After(20s));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kRefused) << bad.status().ToString();

  ExpectServesAnHonestPeer(port);
}

TEST_P(TransportTest, ConnectingToNothingFailsWithinTheDeadline) {
  auto node = MakeNode();
  ASSERT_TRUE(node);
  auto start = SteadyClock::now();
  // Port 1 on loopback: nobody listens there.
  auto peer = node->Connect("127.0.0.1", 1, Deadline::After(3s));
  ASSERT_FALSE(peer.ok());
  EXPECT_TRUE(peer.status().code() == StatusCode::kUnavailable || peer.status().code() == StatusCode::kPeerLost ||
              peer.status().code() == StatusCode::kDeadlineExceeded)
      << peer.status().ToString();
  EXPECT_LT(SteadyClock::now() - start, 5s);
}

TEST_P(TransportTest, PeerKilledMidTransferGivesATypedErrorWithinTheDeadline) {
  Session session = ConnectToNewPeer();
  ASSERT_TRUE(session.status.ok()) << session.status.ToString();
  auto& node = session.node;
  const PeerId* peer = &session.peer;
  constexpr size_t kSize = 16 << 20;
  ASSERT_RESULT(RemoteRegion remote, RemoteAlloc(*node, *peer, kSize));
  auto local = node->Allocate(kSize);
  ASSERT_TRUE(local.ok());
  Op first = node->Put(local->data(), kSize, remote, 0);
  ASSERT_TRUE(node->Wait(first, Deadline::After(20s)).ok());

  session.child->Signal(SIGKILL);
  EXPECT_EQ(session.child->Wait(), 128 + SIGKILL);
  const auto deadline = Deadline::After(15s);
  const auto start = SteadyClock::now();
  Status st;
  // Keep transferring until the loss surfaces. Over TCP the next operation
  // fails; over shared memory, writes into the dead peer's mapping still
  // "succeed", and the missing heartbeats (peer_timeout 2 s here) report it.
  // Either way it must be a typed error well before the deadline, never a hang.
  while (st.ok() && !deadline.Expired()) {
    Op op = node->Put(local->data(), kSize, remote, 0);
    st = node->Wait(op, deadline);
    if (st.ok()) st = node->Flush(*peer, deadline);
    if (st.ok()) st = node->PeerStatus(*peer);
  }
  EXPECT_EQ(st.code(), StatusCode::kPeerLost) << st.ToString();
  EXPECT_LT(SteadyClock::now() - start, 10s);
  EXPECT_FALSE(node->PeerStatus(*peer).ok());
  // Later operations fail at once with the same typed error.
  Op after = node->Put(local->data(), 64, remote, 0);
  EXPECT_EQ(node->Wait(after, Deadline::After(1s)).code(), StatusCode::kPeerLost);
}

// The emulation seam for the zone experiments: delay holds completions back,
// loss re-sends real bytes, and the data still arrives intact.
TEST_P(TransportTest, EmulatedDelayAndLossKeepDataIntact) {
  Session session = ConnectToNewPeer();
  ASSERT_TRUE(session.status.ok()) << session.status.ToString();
  auto& node = session.node;
  const PeerId* peer = &session.peer;
  ASSERT_RESULT(RemoteRegion remote, RemoteAlloc(*node, *peer, 1 << 20));
  std::vector<uint8_t> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 5 + 1);

  LinkShape shape;
  shape.delay = std::chrono::microseconds(30000);
  node->SetLinkShape(*peer, shape);
  auto start = SteadyClock::now();
  Op slow = node->Put(data.data(), 4096, remote, 0);
  ASSERT_TRUE(node->Wait(slow, Deadline::After(10s)).ok());
  EXPECT_GE(SteadyClock::now() - start, 30ms);

  shape = LinkShape{};
  shape.loss = 0.5;
  shape.retransmit_timeout = std::chrono::microseconds(100);
  shape.bandwidth_bytes_per_second = 200e6;  // 1 MiB takes ~5 ms per transmission
  node->SetLinkShape(*peer, shape);
  std::vector<Op> ops;
  for (size_t off = 0; off < data.size(); off += 65536) ops.push_back(node->Put(data.data() + off, 65536, remote, off));
  ASSERT_TRUE(node->WaitAll(ops, Deadline::After(20s)).ok());
  ASSERT_TRUE(node->Flush(*peer, Deadline::After(20s)).ok());
  node->SetLinkShape(*peer, LinkShape{});
  ASSERT_RESULT(std::string hash, RemoteHash(*node, *peer, 0, data.size()));
  EXPECT_EQ(hash, testproto::HashHex(data.data(), data.size()));
}

// Link faults at the transport seam (link_faults.h): this node (host h1)
// and the peer process (host h2, one zone) follow one file. While the link
// drops everything, a control message and its reply, a put and a flush all
// wait for the window's end, then arrive intact and in order; a window
// longer than the peer timeout loses the peer, as a real partition would.
// A slowed link takes its nominal bandwidth divided by the factor.
class LinkFaultTest : public TransportTest {
 protected:
  void SetUp() override {
    EmulatedLinks links;
    links.zone_of = {{"h1", "z"}, {"h2", "z"}};
    links.same_zone_rate = 200e6;  // nominal 200 MB/s, carried by nobody: the link is ideal until slowed
    links_ = std::make_shared<const EmulatedLinks>(links);
    ASSERT_OK(WriteFileAtomic(dir_ / "links.json", links.ToJson()));
    ASSERT_OK(WriteFileAtomic(dir_ / "faults.json", LinkFaultBook{}.ToJson()));
  }
  // A session with a peer process on host h2 (both follow faults.json).
  Session Connect(std::chrono::milliseconds peer_timeout) {
    Session s;
    s.child = std::make_unique<Child>(std::vector<std::string>{
        "/usr/bin/env", "TENAX_EMULATED_HOST=h2", "TENAX_EMULATED_LINKS=" + dir_ / "links.json",
        "TENAX_LINK_FAULTS=" + dir_ / "faults.json", TENAX_NET_TEST_PEER, kSecret, GetParam().transports,
        std::to_string(GetParam().tcp_streams)});
    uint16_t port = 0;
    if (s.child->WaitForStderrLine("PORT ")) {
      const std::string& err = s.child->stderr_text();
      port = static_cast<uint16_t>(std::strtoul(err.c_str() + err.rfind("PORT ") + 5, nullptr, 10));
    }
    NodeOptions o = Options();
    o.emulated_host = "h1";
    o.emulated_links = links_;
    o.link_faults_file = dir_ / "faults.json";
    o.peer_timeout = peer_timeout;
    s.node = MakeNodeWith(o);
    if (port == 0 || !s.node) {
      s.status = Internal("no peer process or no node: " + s.child->stderr_text());
      return s;
    }
    auto peer = s.node->Connect("127.0.0.1", port, Deadline::After(20s));
    s.status = peer.status();
    if (peer.ok()) s.peer = *peer;
    return s;
  }
  // Writes one fault on h1-h2 over [from_ms, until_ms).
  void Fault(LinkFaultKind kind, int64_t from_ms, int64_t until_ms, double factor = 10) {
    LinkFaultBook book;
    book.faults.push_back({"h1", "h2", kind, factor, from_ms, until_ms});
    ASSERT_OK(WriteFileAtomic(dir_ / "faults.json", book.ToJson()));
  }
  // Drives the node until wall time `ms` (the fault's own clock).
  static void ProgressUntil(Node& node, int64_t ms) {
    while (WallMillis() < ms) node.Progress();
  }

  testing::ScratchDir dir_;
  std::shared_ptr<const EmulatedLinks> links_;
};

TEST_P(LinkFaultTest, ADroppedLinkHoldsEverythingUntilItsWindowEndsThenDeliversIntact) {
  Session session = Connect(5000ms);
  ASSERT_TRUE(session.status.ok()) << session.status.ToString();
  Node& node = *session.node;
  const PeerId peer = session.peer;
  constexpr size_t kHalf = 1 << 20;
  ASSERT_RESULT(RemoteRegion remote, RemoteAlloc(node, peer, 2 * kHalf));
  std::vector<uint8_t> data(kHalf);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  std::vector<uint8_t> pattern(kHalf);  // what the peer's second half holds
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = testproto::Pattern(kHalf + i);

  // The window opens 300 ms from now (both sides have read the file by
  // then) and lasts 1.2 s, below the 5 s peer timeout.
  const int64_t from = WallMillis() + 300, until = from + 1200;
  Fault(LinkFaultKind::kDrop, from, until);
  ProgressUntil(node, from + 100);
  // Inside the window: a put into the first half, and a message asking the
  // peer for the hash of the second half. Both wait for the link to come
  // back. (A message and a put take different connections: their relative
  // order is not promised, with or without a fault; a Flush orders them.)
  Op put = node.Put(data.data(), data.size(), remote, 0);
  ASSERT_OK(node.SendControl(peer, testproto::kHash, std::to_string(kHalf) + " " + std::to_string(kHalf),
                             Deadline::After(10s)));
  ASSERT_LT(WallMillis(), until) << "the machine was too slow to ask inside the window";
  ASSERT_OK(node.Wait(put, Deadline::After(20s)));
  // (The node converts the window's end to its steady clock: 5 ms of slack.)
  EXPECT_GE(WallMillis(), until - 5) << "a put on a dropped link completed before the link came back";
  ASSERT_RESULT(ControlMessage reply, node.ReceiveControl(Deadline::After(20s), peer));
  EXPECT_GE(WallMillis(), until - 5) << "an answer came through a dropped link";
  ASSERT_EQ(reply.kind, testproto::kHashReply);
  EXPECT_EQ(reply.payload, testproto::HashHex(pattern.data(), pattern.size()));
  // The put arrived whole once the link was back.
  ASSERT_OK(node.Flush(peer, Deadline::After(20s)));
  ASSERT_RESULT(std::string hash, RemoteHash(node, peer, 0, kHalf));
  EXPECT_EQ(hash, testproto::HashHex(data.data(), data.size()));
  ASSERT_OK(node.PeerStatus(peer));

  // A drop longer than the peer timeout is a partition: the peer is lost.
  const int64_t from2 = WallMillis() + 300;
  Fault(LinkFaultKind::kDrop, from2, from2 + 60000);
  ProgressUntil(node, from2 + 100);
  ASSERT_OK(node.SendControl(peer, testproto::kHash, "0 16", Deadline::After(1s)));
  auto through = node.ReceiveControl(Deadline::After(15s), peer);
  ASSERT_FALSE(through.ok()) << "a message arrived through a partition";
  EXPECT_EQ(node.PeerStatus(peer).code(), StatusCode::kPeerLost) << node.PeerStatus(peer).ToString();
  EXPECT_NE(node.PeerStatus(peer).message().find("silent"), std::string::npos) << node.PeerStatus(peer).ToString();
}

TEST_P(LinkFaultTest, ASlowedLinkRunsAtItsNominalBandwidthDividedByTheFactor) {
  Session session = Connect(5000ms);
  ASSERT_TRUE(session.status.ok()) << session.status.ToString();
  Node& node = *session.node;
  const PeerId peer = session.peer;
  constexpr size_t kBytes = 4 << 20;
  ASSERT_RESULT(RemoteRegion remote, RemoteAlloc(node, peer, kBytes));
  std::vector<uint8_t> data(kBytes);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13 + 5);
  const int64_t from = WallMillis() + 300;
  Fault(LinkFaultKind::kSlow, from, from + 20000, 20);
  ProgressUntil(node, from + 100);
  // 4 MiB at 200 MB/s / 20 = 10 MB/s: at least 0.41 s. The node reads the
  // fault file every 50 ms and applies it every 20 ms of its own progress;
  // on a loaded machine (ctest -j2) that can land after from + 100 (CI saw
  // the slowdown applied 260 ms later, and a first put of 1.5 ms). So a put
  // is timed again, up to 5 s into the 20 s window, until one runs slow:
  // a link the fault never slows still fails.
  const auto slow_enough = std::chrono::milliseconds(kBytes * 1000 / 10'000'000);
  const int64_t give_up = from + 5000;
  SteadyClock::duration took{};
  while (true) {
    const auto start = SteadyClock::now();
    Op put = node.Put(data.data(), data.size(), remote, 0);
    ASSERT_OK(node.Wait(put, Deadline::After(20s)));
    took = SteadyClock::now() - start;
    if (took >= slow_enough || WallMillis() >= give_up) break;
    ProgressUntil(node, WallMillis() + 50);
  }
  EXPECT_GE(took, slow_enough) << "no put ran at the slowed rate within 5 s of the fault's start";
  ASSERT_OK(node.Flush(peer, Deadline::After(20s)));
  ASSERT_RESULT(std::string hash, RemoteHash(node, peer, 0, data.size()));
  EXPECT_EQ(hash, testproto::HashHex(data.data(), data.size()));
  // The fault over (the file emptied), the link is ideal again.
  ASSERT_OK(WriteFileAtomic(dir_ / "faults.json", LinkFaultBook{}.ToJson()));
  ProgressUntil(node, WallMillis() + 200);
  const auto again = SteadyClock::now();
  Op fast = node.Put(data.data(), data.size(), remote, 0);
  ASSERT_OK(node.Wait(fast, Deadline::After(20s)));
  EXPECT_LT(SteadyClock::now() - again, std::chrono::milliseconds(kBytes * 1000 / 10'000'000));
}

// A client that lies or sends garbage is refused and disconnected; the
// server (a real peer process) keeps serving honest peers afterwards. The
// control plane is TCP whatever the data transport, so this runs once per
// instantiation only to reuse the fixture.
TEST_P(TransportTest, LiarsAndMalformedFramesAreRefusedWhileOthersAreServed) {
  std::unique_ptr<Child> child;
  uint16_t port = StartPeer(child);
  ASSERT_NE(port, 0);
  auto frame = [](auto fill) {
    wire::Envelope env;
    fill(env);
    return EncodeEnvelope(env);
  };
  const std::string nonce(kNonceBytes, 'n');
  {  // Answers the challenge without knowing the secret.
    testing::RawUcxClient liar(port);
    ASSERT_TRUE(liar.connected());
    liar.Send(frame([&](wire::Envelope& e) {
      e.mutable_hello()->set_client_nonce(nonce);
      e.mutable_hello()->set_node_name("liar");
    }));
    auto challenge = liar.Receive(10s);
    ASSERT_TRUE(challenge.has_value());
    liar.Send(frame([&](wire::Envelope& e) {
      e.mutable_auth()->set_client_proof(std::string(kProofBytes, 'x'));
      e.mutable_auth()->set_worker_address("not-an-address");
    }));
    auto reply = liar.Receive(10s);
    ASSERT_TRUE(reply.has_value());
    auto env = DecodeEnvelope(std::vector<uint8_t>(reply->begin(), reply->end()), 1 << 20, "server");
    ASSERT_TRUE(env.ok());
    EXPECT_TRUE(env->has_refused());
    EXPECT_EQ(env->refused().reason(), "wrong cluster secret");
    EXPECT_FALSE(env->has_welcome());
    EXPECT_TRUE(liar.WaitClosed(10s));
  }
  wire::Envelope wrong_version;
  wrong_version.mutable_hello()->set_client_nonce(nonce);
  wrong_version.set_version(kWireVersion + 1);
  const std::vector<std::string> bad_frames = {
      std::string(2 << 20, 'x'),                                                                // oversized
      std::string("\x0a\xff\xff\xff", 4),                                                       // truncated protobuf
      wrong_version.SerializeAsString(),                                                        // wrong version
      frame([](wire::Envelope& e) { e.mutable_user()->set_payload("before the handshake"); }),  // unauthenticated
  };
  for (const auto& bad : bad_frames) {
    testing::RawUcxClient client(port);
    ASSERT_TRUE(client.connected());
    client.Send(bad);
    EXPECT_TRUE(client.WaitClosed(10s)) << "frame of " << bad.size() << " bytes was not refused";
  }
  // The server is still healthy for an honest peer.
  ExpectServesAnHonestPeer(port);
}

// A recorded handshake cannot be replayed. The first session answers the
// server's challenge with the right proof (the server accepts it and only
// then finds the raw client's address unusable: before that check, UCX
// aborted the server on it); the second sends the very same bytes again. The server's fresh nonce makes the recorded proof wrong,
// and the replay is refused as "wrong cluster secret".
TEST_P(TransportTest, AReplayedHandshakeIsRefused) {
  std::unique_ptr<Child> child;
  uint16_t port = StartPeer(child);
  ASSERT_NE(port, 0);
  const std::string client_nonce = RandomNonce();
  wire::Envelope hello;
  hello.mutable_hello()->set_client_nonce(client_nonce);
  hello.mutable_hello()->set_node_name("recorded");
  const std::string hello_bytes = EncodeEnvelope(hello);
  auto decode = [](const std::optional<std::string>& reply) -> std::optional<wire::Envelope> {
    if (!reply) return std::nullopt;
    auto env = DecodeEnvelope(std::vector<uint8_t>(reply->begin(), reply->end()), 1 << 20, "server");
    return env.ok() ? std::optional<wire::Envelope>(std::move(*env)) : std::nullopt;
  };
  auto refusal_of = [&](const std::optional<std::string>& reply) -> std::string {
    auto env = decode(reply);
    return env && env->has_refused() ? env->refused().reason() : "(no refusal)";
  };
  // Sends the recorded hello and returns the server's nonce ("" without a challenge).
  auto say_hello = [&](testing::RawUcxClient& client) -> std::string {
    client.Send(hello_bytes);
    auto env = decode(client.Receive(10s));
    return env && env->has_challenge() ? env->challenge().server_nonce() : "";
  };
  std::string auth_bytes;
  std::string first_server_nonce;
  {
    testing::RawUcxClient first(port);
    ASSERT_TRUE(first.connected());
    first_server_nonce = say_hello(first);
    ASSERT_FALSE(first_server_nonce.empty()) << "no challenge";
    wire::Envelope auth;
    auth.mutable_auth()->set_client_proof(ClientProof(kSecret, first_server_nonce, client_nonce));
    auth.mutable_auth()->set_worker_address("not-an-address");
    auth_bytes = EncodeEnvelope(auth);
    first.Send(auth_bytes);
    EXPECT_EQ(refusal_of(first.Receive(10s)), "unusable worker address") << "the honest proof was not accepted";
  }
  testing::RawUcxClient replay(port);
  ASSERT_TRUE(replay.connected());
  const std::string second_server_nonce = say_hello(replay);
  ASSERT_FALSE(second_server_nonce.empty()) << "no challenge";
  EXPECT_NE(second_server_nonce, first_server_nonce) << "the server reused its nonce";
  replay.Send(auth_bytes);
  EXPECT_EQ(refusal_of(replay.Receive(10s)), "wrong cluster secret");
  EXPECT_TRUE(replay.WaitClosed(10s));
  // The server lived through both and serves an honest peer.
  ExpectServesAnHonestPeer(port);
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportTest,
                         ::testing::Values(TransportParam{"shm", ""}, TransportParam{"tcp", "tcp"},
                                           TransportParam{"tcp4streams", "tcp", 4}),
                         [](const auto& info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(Transports, LinkFaultTest,
                         ::testing::Values(TransportParam{"shm", ""}, TransportParam{"tcp", "tcp"},
                                           TransportParam{"tcp4streams", "tcp", 4}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tenax::net

namespace tenax::net {
namespace {

// A peer SIGKILLed while it puts into us must cost us nothing but that
// peer. Over TCP, UCX 1.13 emulates puts with messages it answers through
// the putter's endpoint; once the dead putter's RST had arrived that answer
// failed and UCX aborted *this* process (a killed worker took its ring
// successor with it). Puts to TCP peers are now our own messages; this
// kills a putting peer at 30 different moments and checks each time that
// its puts had landed and that it is seen lost.
TEST_P(TransportTest, APeerKilledWhilePuttingIntoUsCostsUsOnlyThatPeer) {
  constexpr size_t kSize = 4 << 20;
  for (int i = 0; i < 30; ++i) {
    SCOPED_TRACE("kill " + std::to_string(i));
    Session s = ConnectToNewPeer();
    ASSERT_TRUE(s.status.ok()) << s.status.ToString();
    ASSERT_RESULT(MemoryRegion target, s.node->Allocate(kSize));
    std::memset(target.data(), 0, kSize);
    ASSERT_RESULT(const RegionDescriptor key, s.node->Share(target, s.peer));
    ASSERT_TRUE(s.node->SendControl(s.peer, testproto::kPutForever, EncodeRegion(key.address, key.length, key.rkey),
                                    Deadline::After(10s))
                    .ok());
    // Its puts land (the whole region, first and last byte)...
    const Deadline landed = Deadline::After(20s);
    while ((target.data()[0] != 'p' || target.data()[kSize - 1] != 'p') && !landed.Expired()) s.node->Progress();
    ASSERT_EQ(target.data()[0], 'p');
    ASSERT_EQ(target.data()[kSize - 1], 'p');
    // ...and go on while we wait a different while each round, then it dies.
    const auto kill_at = std::chrono::steady_clock::now() + std::chrono::microseconds(700 * i);
    while (std::chrono::steady_clock::now() < kill_at) s.node->Progress();
    s.child->Signal(SIGKILL);
    const Deadline lost = Deadline::After(20s);
    while (s.node->PeerStatus(s.peer).ok() && !lost.Expired()) s.node->Progress();
    EXPECT_FALSE(s.node->PeerStatus(s.peer).ok()) << "the killed peer was never seen lost";
  }
}

}  // namespace
}  // namespace tenax::net

namespace tenax::net {
namespace {

// Four TCP streams through a namespace whose firewall drops 1% of the TCP
// segments each way at random (nftables `numgen random`): the kernel's
// TCP retransmits them, and the streams' pieces then arrive out of order
// among themselves. A put, a Fence and a second put over the same bytes
// must leave the second put's bytes everywhere (a piece of the first
// applied late would show), and a Flush must wait for every piece.
class TcpStreamsUnderLossTest : public TransportTest {};

TEST_P(TcpStreamsUnderLossTest, APutSplitAcrossStreamsArrivesWholeAndInOrderWhileTheKernelDropsPackets) {
  if (std::string why = testing::NamespacesUnavailable(); !why.empty()) GTEST_SKIP() << why;
  const std::string id = std::to_string(::getpid() % 1000000);
  const std::string ns = "tnxloss" + id, here = "tlA" + id, there = "tlB" + id;
  const std::string subnet = "10.79." + std::to_string(::getpid() % 250) + ".";
  struct Cleanup {
    std::string ns, here;
    ~Cleanup() {
      (void)testing::RunProcess({"ip", "link", "del", here});
      (void)testing::RunProcess({"ip", "netns", "del", ns});
    }
  } cleanup{ns, here};
  const std::vector<std::vector<std::string>> setup = {
      {"ip", "netns", "add", ns},
      {"ip", "link", "add", here, "type", "veth", "peer", "name", there},
      {"ip", "link", "set", there, "netns", ns},
      {"ip", "addr", "add", subnet + "1/24", "dev", here},
      {"ip", "link", "set", here, "up"},
      {"ip", "-n", ns, "addr", "add", subnet + "2/24", "dev", there},
      {"ip", "-n", ns, "link", "set", there, "up"},
      {"ip", "-n", ns, "link", "set", "lo", "up"},
      {"ip", "netns", "exec", ns, "nft", "add", "table", "inet", "loss"},
      {"ip", "netns", "exec", ns, "nft", "add", "chain", "inet", "loss", "in", "{ type filter hook input priority 0; }"},
      {"ip", "netns", "exec", ns, "nft", "add", "chain", "inet", "loss", "out", "{ type filter hook output priority 0; }"},
      {"ip", "netns", "exec", ns, "nft", "add", "rule", "inet", "loss", "in", "meta", "l4proto", "tcp", "numgen",
       "random", "mod", "100", "<", "1", "counter", "drop"},
      {"ip", "netns", "exec", ns, "nft", "add", "rule", "inet", "loss", "out", "meta", "l4proto", "tcp", "numgen",
       "random", "mod", "100", "<", "1", "counter", "drop"},
  };
  for (const auto& argv : setup) {
    auto r = testing::RunProcess(argv);
    ASSERT_EQ(0, r.exit_code) << argv[argv.size() > 4 ? 4 : 0] << ": " << r.err;
  }
  Child child({"ip", "netns", "exec", ns, TENAX_NET_TEST_PEER, kSecret, "tcp", "4", subnet + "2", there});
  ASSERT_TRUE(child.WaitForStderrLine("PORT ")) << child.stderr_text();
  const std::string& err = child.stderr_text();
  const auto port = static_cast<uint16_t>(std::strtoul(err.c_str() + err.rfind("PORT ") + 5, nullptr, 10));
  NodeOptions o = Options();
  o.net_devices = here;
  o.peer_timeout = std::chrono::milliseconds(20000);  // retransmissions must not look like a loss
  auto node = MakeNodeWith(o);
  ASSERT_TRUE(node);
  ASSERT_RESULT(const PeerId peer, node->Connect(subnet + "2", port, Deadline::After(30s)));
  constexpr size_t kSize = 6 << 20;  // 24 pieces of 256 KiB: 6 on each stream
  ASSERT_RESULT(RemoteRegion remote, RemoteAlloc(*node, peer, kSize));
  std::vector<uint8_t> first(kSize), second(kSize);
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    for (size_t i = 0; i < kSize; ++i) {
      first[i] = static_cast<uint8_t>((i * 131 + static_cast<size_t>(round) * 17 + 3) >> 3);
      second[i] = static_cast<uint8_t>((i * 2654435761u + static_cast<size_t>(round)) >> 13);
    }
    Op a = node->Put(first.data(), kSize, remote, 0);
    // One more piece shifts the round-robin: piece j of the second put
    // then takes another stream than piece j of the first, so only the
    // barrier keeps the first from landing over the second.
    Op shift = node->Put(first.data(), 1, remote, 0);
    ASSERT_TRUE(node->Fence(peer).ok());
    Op b = node->Put(second.data(), kSize, remote, 0);
    ASSERT_TRUE(node->Flush(peer, Deadline::After(60s)).ok());
    ASSERT_TRUE(node->Wait(a, Deadline::After(60s)).ok());
    ASSERT_TRUE(node->Wait(b, Deadline::After(60s)).ok());
    ASSERT_TRUE(node->Wait(shift, Deadline::After(60s)).ok());
    ASSERT_RESULT(const std::string hash, RemoteHash(*node, peer, 0, kSize));
    EXPECT_EQ(testproto::HashHex(second.data(), kSize), hash) << "the peer does not hold the second put's bytes";
  }
  // The rule did drop packets (else this tested nothing of the kernel's).
  auto counters = testing::RunProcess({"ip", "netns", "exec", ns, "nft", "list", "table", "inet", "loss"});
  ASSERT_EQ(0, counters.exit_code) << counters.err;
  uint64_t dropped = 0;
  static const std::regex counter_re("counter packets ([0-9]+)");
  for (std::sregex_iterator it(counters.out.begin(), counters.out.end(), counter_re), end; it != end; ++it) {
    dropped += std::stoull((*it)[1]);
  }
  EXPECT_GT(dropped, 0u) << counters.out;
}

INSTANTIATE_TEST_SUITE_P(Transports, TcpStreamsUnderLossTest,
                         ::testing::Values(TransportParam{"tcp4streams", "tcp", 4}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tenax::net

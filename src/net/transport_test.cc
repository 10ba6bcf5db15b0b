// One transport test suite, run against UCX's shared-memory path and against
// forced TCP (our stand-in for a cross-host link). Peers are real processes
// (tests/net_test_peer.cc) on loopback.
#include <gtest/gtest.h>

#include <csignal>
#include <random>

#include "net_test_protocol.h"
#include "raw_ucx_client.h"
#include "tenax/net/control_codec.h"
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
};

class TransportTest : public ::testing::TestWithParam<TransportParam> {
 protected:
  NodeOptions Options(const std::string& secret = kSecret) {
    NodeOptions o;
    o.name = "test-client";
    o.secret = secret;
    o.transports = GetParam().transports;
    o.net_devices = "lo";
    o.peer_timeout = std::chrono::milliseconds(2000);
    return o;
  }

  // Starts a peer process and returns its port.
  uint16_t StartPeer(std::unique_ptr<Child>& child, const std::string& secret = kSecret) {
    child = std::make_unique<Child>(std::vector<std::string>{TENAX_NET_TEST_PEER, secret, GetParam().transports});
    EXPECT_TRUE(child->WaitForStderrLine("PORT ")) << child->stderr_text();
    const std::string& err = child->stderr_text();
    return static_cast<uint16_t>(std::stoi(err.substr(err.rfind("PORT ") + 5)));
  }

  std::unique_ptr<Node> MakeNode(const std::string& secret = kSecret) {
    auto node = Node::Create(Options(secret));
    EXPECT_TRUE(node.ok()) << node.status().ToString();
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
  Session ConnectToNewPeer() {
    Session s;
    uint16_t port = StartPeer(s.child);
    s.node = MakeNode();
    auto peer = s.node->Connect("127.0.0.1", port, Deadline::After(20s));
    s.status = peer.status();
    if (peer.ok()) s.peer = *peer;
    return s;
  }

  // Asks the peer for a region of `size` bytes and imports it.
  RemoteRegion RemoteAlloc(Node& node, PeerId peer, size_t size) {
    EXPECT_TRUE(node.SendControl(peer, testproto::kAlloc, std::to_string(size), Deadline::After(10s)).ok());
    auto reply = node.ReceiveControl(Deadline::After(30s), peer);
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->kind, testproto::kRegion);
    auto d = DecodeRegion(reply->payload, "peer");
    EXPECT_TRUE(d.ok());
    auto remote = node.Import(peer, RegionDescriptor{d->address, d->length, d->rkey});
    EXPECT_TRUE(remote.ok()) << remote.status().ToString();
    return std::move(*remote);
  }

  std::string RemoteHash(Node& node, PeerId peer, size_t off, size_t len) {
    EXPECT_TRUE(
        node.SendControl(peer, testproto::kHash, std::to_string(off) + " " + std::to_string(len), Deadline::After(10s))
            .ok());
    auto reply = node.ReceiveControl(Deadline::After(30s), peer);
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    return reply.ok() ? reply->payload : "";
  }
};

TEST_P(TransportTest, PutAndGetRandomSizesAndOffsets) {
  Session session = ConnectToNewPeer();
  ASSERT_TRUE(session.status.ok()) << session.status.ToString();
  auto& node = session.node;
  const PeerId* peer = &session.peer;
  constexpr size_t kRegion = 4 << 20;
  RemoteRegion remote = RemoteAlloc(*node, *peer, kRegion);
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
    ASSERT_EQ(RemoteHash(*node, *peer, off, size), testproto::HashHex(local->data(), size)) << "round " << round;
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
  RemoteRegion remote = RemoteAlloc(*node, *peer, 4096);
  uint8_t buf[64] = {};
  Op op = node->Put(buf, 64, remote, 4096 - 32);
  EXPECT_EQ(node->Wait(op, Deadline::After(1s)).code(), StatusCode::kInvalidArgument);
  Op op2 = node->Get(buf, 8, remote, ~size_t{0} - 4);
  EXPECT_EQ(node->Wait(op2, Deadline::After(1s)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RemoteHash(*node, *peer, 0, 4096).size(), 16u);  // peer unharmed
}

TEST_P(TransportTest, ManyOutstandingOperations) {
  Session session = ConnectToNewPeer();
  ASSERT_TRUE(session.status.ok()) << session.status.ToString();
  auto& node = session.node;
  const PeerId* peer = &session.peer;
  constexpr size_t kChunk = 4096, kCount = 512;
  RemoteRegion remote = RemoteAlloc(*node, *peer, kChunk * kCount);
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
  std::vector<PeerId> peers;
  std::vector<RemoteRegion> remotes;
  for (uint16_t port : ports) {
    auto p = node->Connect("127.0.0.1", port, Deadline::After(20s));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    peers.push_back(*p);
    remotes.push_back(RemoteAlloc(*node, *p, 1 << 20));
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
    EXPECT_EQ(RemoteHash(*node, peers[k], 0, data[k].size()), testproto::HashHex(data[k].data(), data[k].size()));
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
}

TEST_P(TransportTest, WrongSecretIsRefusedAndTheServerKeepsServing) {
  std::unique_ptr<Child> child;
  uint16_t port = StartPeer(child);
  auto intruder = MakeNode("not-the-cluster-secret-at-all!!");
  auto bad = intruder->Connect("127.0.0.1", port, Deadline::After(20s));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kRefused) << bad.status().ToString();

  auto node = MakeNode();
  auto peer = node->Connect("127.0.0.1", port, Deadline::After(20s));
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  RemoteRegion remote = RemoteAlloc(*node, *peer, 4096);
  EXPECT_EQ(RemoteHash(*node, *peer, 0, 16).size(), 16u);
}

TEST_P(TransportTest, ConnectingToNothingFailsWithinTheDeadline) {
  auto node = MakeNode();
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
  RemoteRegion remote = RemoteAlloc(*node, *peer, kSize);
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
  RemoteRegion remote = RemoteAlloc(*node, *peer, 1 << 20);
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
  EXPECT_EQ(RemoteHash(*node, *peer, 0, data.size()), testproto::HashHex(data.data(), data.size()));
}

// A client that lies or sends garbage is refused and disconnected; the
// server (a real peer process) keeps serving honest peers afterwards. The
// control plane is TCP whatever the data transport, so this runs once per
// instantiation only to reuse the fixture.
TEST_P(TransportTest, LiarsAndMalformedFramesAreRefusedWhileOthersAreServed) {
  std::unique_ptr<Child> child;
  uint16_t port = StartPeer(child);
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
  auto node = MakeNode();
  auto peer = node->Connect("127.0.0.1", port, Deadline::After(20s));
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  RemoteRegion remote = RemoteAlloc(*node, *peer, 4096);
  EXPECT_EQ(RemoteHash(*node, *peer, 0, 4096).size(), 16u);
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportTest,
                         ::testing::Values(TransportParam{"shm", ""}, TransportParam{"tcp", "tcp"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tenax::net

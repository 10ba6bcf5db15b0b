// Unit tests of net's pure parts: the control codec, the HMAC handshake
// proofs, the link shaper and the link-fault file.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>

#include "tenax/core/files.h"
#include "tenax/net/auth.h"
#include "tenax/net/control_codec.h"
#include "tenax/net/link_faults.h"
#include "tenax/net/link_shaper.h"
#include "tenax/net/many_connections.h"
#include "tenax/net/message_kinds.h"
#include "tenax/net/node.h"
#include "testing.h"

namespace tenax::net {
namespace {

using namespace std::chrono_literals;

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(ControlCodecTest, RoundTripAndVersionCheck) {
  wire::Envelope env;
  env.mutable_user()->set_kind(7);
  env.mutable_user()->set_payload("hello");
  auto bytes = Bytes(EncodeEnvelope(env));
  auto back = DecodeEnvelope(bytes, 1024, "p");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->user().kind(), 7u);
  env.set_version(99);
  auto wrong = DecodeEnvelope(Bytes(env.SerializeAsString()), 1024, "10.0.0.2:7 (w1)");
  ASSERT_EQ(wrong.status().code(), StatusCode::kProtocolError);
  EXPECT_NE(wrong.status().message().find("10.0.0.2:7 (w1)"), std::string::npos);
  EXPECT_NE(wrong.status().message().find("wire version 99"), std::string::npos);
}

TEST(ControlCodecTest, RejectsOversizedTruncatedAndMalformed) {
  wire::Envelope env;
  env.mutable_user()->set_payload(std::string(5000, 'x'));
  auto bytes = Bytes(EncodeEnvelope(env));
  EXPECT_EQ(DecodeEnvelope(bytes, 1000, "p").status().code(), StatusCode::kProtocolError);
  bytes.resize(bytes.size() / 2);
  EXPECT_EQ(DecodeEnvelope(bytes, 100000, "p").status().code(), StatusCode::kProtocolError);
  EXPECT_EQ(DecodeEnvelope({}, 100, "p").status().code(), StatusCode::kProtocolError);
  wire::Envelope hello;
  hello.mutable_hello()->set_client_nonce("short");
  EXPECT_EQ(DecodeEnvelope(Bytes(EncodeEnvelope(hello)), 1000, "p").status().code(), StatusCode::kProtocolError);
  wire::Envelope empty;
  EXPECT_EQ(DecodeEnvelope(Bytes(EncodeEnvelope(empty)), 1000, "p").status().code(), StatusCode::kProtocolError);
}

TEST(ControlCodecTest, RegionDescriptors) {
  auto r = DecodeRegion(EncodeRegion(0x1000, 4096, "key"), "p");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->length, 4096u);
  EXPECT_FALSE(DecodeRegion(EncodeRegion(0x1000, 0, "key"), "p").ok());
  EXPECT_FALSE(DecodeRegion(EncodeRegion(~uint64_t{0} - 10, 4096, "key"), "p").ok());
  EXPECT_FALSE(DecodeRegion("\xff\xff\xff", "p").ok());
}

TEST(AuthTest, ProofsDependOnSecretAndBothNonces) {
  std::string a = RandomNonce(), b = RandomNonce();
  EXPECT_EQ(a.size(), kNonceBytes);
  EXPECT_NE(a, b);
  std::string secret = "0123456789abcdef-secret";
  EXPECT_EQ(ServerProof(secret, a, b), ServerProof(secret, a, b));
  EXPECT_NE(ServerProof(secret, a, b), ServerProof("another-secret-0123456", a, b));
  EXPECT_NE(ServerProof(secret, a, b), ServerProof(secret, b, a));
  EXPECT_NE(ServerProof(secret, a, b), ClientProof(secret, b, a));  // no reflection
  EXPECT_EQ(ServerProof(secret, a, b).size(), kProofBytes);
  EXPECT_TRUE(ConstantTimeEqual("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEqual("abc", "abcd"));
}

TEST(AuthTest, SecretMustBeSetAndLongEnough) {
  ::unsetenv(kSecretEnvVar);
  EXPECT_EQ(ResolveSecret("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveSecret("short").status().code(), StatusCode::kInvalidArgument);
  ::setenv(kSecretEnvVar, "from-the-environment-123", 1);
  auto from_env = ResolveSecret("");
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
  EXPECT_EQ(*from_env, "from-the-environment-123");
  auto configured = ResolveSecret("configured-secret-123456");
  ASSERT_TRUE(configured.ok()) << configured.status().ToString();
  EXPECT_EQ(*configured, "configured-secret-123456");
  ::unsetenv(kSecretEnvVar);
}

// The container image's way (deploy/Dockerfile): a mounted file named by
// $TENAX_SECRET_FILE, below $TENAX_SECRET and the configured secret.
TEST(AuthTest, SecretFromAFileNamedByTheEnvironment) {
  testing::ScratchDir dir;
  ::unsetenv(kSecretEnvVar);
  const std::string file = dir / "secret";
  auto write = [&](const std::string& text) {
    testing::WriteBytes(file, std::vector<uint8_t>(text.begin(), text.end()));
  };
  write("from-a-mounted-file\n");
  ::setenv(kSecretFileEnvVar, file.c_str(), 1);
  auto from_file = ResolveSecret("");
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(*from_file, "from-a-mounted-file");  // the newline a shell's echo adds is not part of it
  EXPECT_EQ(SecretFromEnvironment(), "from-a-mounted-file");

  ::setenv(kSecretEnvVar, "from-the-environment-123", 1);  // the variable wins over the file
  auto from_env = ResolveSecret("");
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
  EXPECT_EQ(*from_env, "from-the-environment-123");
  ::unsetenv(kSecretEnvVar);

  // Not mounted: one line naming the file, for a role; nothing for a launcher.
  const std::string missing = dir / "not-mounted";
  ::setenv(kSecretFileEnvVar, missing.c_str(), 1);
  auto none = ResolveSecret("");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find(missing + ": no such file"), std::string::npos) << none.status().message();
  EXPECT_EQ(none.status().message().find('\n'), std::string::npos) << none.status().message();
  EXPECT_EQ(SecretFromEnvironment(), "");

  write("short\n");  // too short to authenticate anyone
  ::setenv(kSecretFileEnvVar, file.c_str(), 1);
  EXPECT_EQ(ResolveSecret("").status().code(), StatusCode::kInvalidArgument);
  ::unsetenv(kSecretFileEnvVar);
}

TEST(NodeEnvironmentTest, UcxTcpSegmentDefaultsAreSetBeforeAnyNodeExists) {
  // ctest runs this test in its own process, where no Node was created:
  // the defaults were set while the program loaded, before any thread.
  // Before, the first Node::Create of each thread set them, and a getenv
  // in a thread beside it crashed (the environment array reallocated).
  const char* tx = std::getenv("UCX_TCP_TX_SEG_SIZE");
  const char* rx = std::getenv("UCX_TCP_RX_SEG_SIZE");
  ASSERT_NE(nullptr, tx);
  ASSERT_NE(nullptr, rx);
  EXPECT_STREQ("512k", tx);
  EXPECT_STREQ("512k", rx);
}

TEST(NodeOptionsTest, TcpStreamsOutsideOneToSixteenAreRefusedAtCreate) {
  for (int bad : {0, -3, kMaxTcpStreams + 1}) {
    NodeOptions o;
    o.secret = "node-options-test-secret-0123456789";
    o.tcp_streams = bad;
    auto node = Node::Create(o);
    ASSERT_FALSE(node.ok()) << bad;
    EXPECT_EQ(StatusCode::kInvalidArgument, node.status().code());
    EXPECT_NE(std::string::npos, node.status().message().find("tcp_streams is " + std::to_string(bad)))
        << node.status().message();
  }
}

// A server facing a fleet (NodeOptions::max_peers) gets UCX's async event
// limit raised for that many connections (past 1024 UCX reset connections
// and dropped every peer without it) and the soft open-file limit raised to
// the hard one; a later, smaller request never lowers either.
TEST(NodeOptionsTest, MaxPeersRaisesUcxsEventLimitAndTheOpenFileLimitAndNeverLowersThem) {
  EXPECT_EQ(4u * 5000 + 1024, AsyncEventsFor(5000));
  EXPECT_GT(AsyncEventsFor(kFleetPeers), 4u * kFleetPeers);
  EXPECT_GT(AsyncEventsFor(static_cast<size_t>(-1)), 0u) << "a huge count must not wrap around";
  NodeOptions o;
  o.secret = "node-options-test-secret-0123456789";
  o.max_peers = 5000;
  ASSERT_OK_AND_ASSIGN(auto node, Node::Create(o));
  const unsigned raised = AsyncEventLimit();
  EXPECT_GE(raised, AsyncEventsFor(5000));
  rlimit r{};
  ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &r));
  const int64_t reachable = ReachableOpenFileLimit();
  ASSERT_GT(reachable, 0) << "neither a hard limit nor fs.nr_open could be read";
  EXPECT_EQ(static_cast<rlim_t>(reachable), r.rlim_cur) << "hard limit " << r.rlim_max;
  o.max_peers = 10;
  ASSERT_OK_AND_ASSIGN(auto small, Node::Create(o));
  EXPECT_EQ(raised, AsyncEventLimit()) << "a smaller max_peers lowered the limit";
}

TEST(MessageKindsTest, OneRegistryWithARangePerLayer) {
  // The values other layers' headers take their constants from.
  EXPECT_EQ(KindValue(MessageKind::kArenaOffer), 0x100u);
  EXPECT_EQ(KindValue(MessageKind::kBarrier), 0x112u);
  EXPECT_EQ(KindValue(MessageKind::kJoinRequest), 0x200u);
  EXPECT_EQ(KindValue(MessageKind::kWatch), 0x206u);
  // Every listed kind is registered and inside its own layer's range.
  for (const auto& k : kRegisteredKinds) {
    EXPECT_TRUE(IsRegisteredKind(k.value)) << k.name;
    int ranges = 0;
    for (const auto& r : kKindRanges) ranges += k.value >= r.first && k.value <= r.last && r.layer == k.layer;
    EXPECT_EQ(ranges, 1) << k.name;
  }
  EXPECT_TRUE(IsRegisteredKind(kFirstTestKind));
  EXPECT_TRUE(IsRegisteredKind(kLastTestKind));
  EXPECT_FALSE(IsRegisteredKind(0));
  EXPECT_FALSE(IsRegisteredKind(0x103));  // inside comm's range, but not listed
  EXPECT_FALSE(IsRegisteredKind(0x5000));
  EXPECT_FALSE(IsRegisteredKind(kLastTestKind + 1));
}

TEST(LinkShaperTest, DelayAndBandwidth) {
  LinkShape shape;
  shape.delay = 1000us;
  shape.bandwidth_bytes_per_second = 1e6;  // 1 MB/s: 1000 bytes take 1 ms
  LinkShaper shaper(shape);
  auto t0 = SteadyClock::now();
  auto a = shaper.Schedule(1000, t0);
  EXPECT_EQ(a.complete_at - t0, 2ms);  // 1 ms on the wire + 1 ms delay
  auto b = shaper.Schedule(1000, t0);  // queued behind a
  EXPECT_EQ(b.complete_at - t0, 3ms);
  auto c = shaper.Schedule(1000, t0 + 10ms);  // link idle again
  EXPECT_EQ(c.complete_at - t0, 12ms);
}

TEST(LinkShaperTest, LossRetransmitsDeterministically) {
  LinkShape shape;
  shape.loss = 0.5;
  shape.retransmit_timeout = 100us;
  LinkShaper a(shape, 42), b(shape, 42);
  int total = 0;
  auto t0 = SteadyClock::now();
  for (int i = 0; i < 1000; ++i) {
    auto pa = a.Schedule(10, t0), pb = b.Schedule(10, t0);
    EXPECT_EQ(pa.transmissions, pb.transmissions);
    EXPECT_EQ(pa.complete_at - t0, (pa.transmissions - 1) * 100us);
    total += pa.transmissions;
  }
  // Geometric with p = 0.5: about 2 transmissions per operation.
  EXPECT_GT(total, 1800);
  EXPECT_LT(total, 2200);
  shape.loss = 0.9;
  shape.max_transmissions = 1;
  LinkShaper lossy(shape, 1);
  int failed = 0;
  for (int i = 0; i < 100; ++i) failed += lossy.Schedule(10, t0).failed;
  EXPECT_GT(failed, 70);
}

TEST(LinkFaultBookTest, RoundTripsAndNamesTheFaultInForce) {
  LinkFaultBook book;
  book.faults.push_back({"a1", "b1", LinkFaultKind::kSlow, 10, 1000, 5000});
  book.faults.push_back({"b1", "a1", LinkFaultKind::kSlow, 40, 2000, 3000});
  book.faults.push_back({"a1", "b1", LinkFaultKind::kDrop, 10, 2500, 2600});
  book.faults.push_back({"a1", "a2", LinkFaultKind::kDrop, 10, 0, 9000});
  book.faults.push_back({"a2", "b1", LinkFaultKind::kSlow, 10, 0, 9000, 20});  // a bad NIC: +20 ms
  auto back = LinkFaultBook::FromJson(book.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->faults, book.faults);
  // Either direction; a drop before a slow one; else the slowest; none
  // outside the windows (the end is exclusive).
  EXPECT_FALSE(book.Active("a1", "b1", 999).has_value());
  EXPECT_EQ(book.Active("b1", "a1", 1500)->factor, 10);
  EXPECT_EQ(book.Active("a1", "b1", 2100)->factor, 40);
  EXPECT_EQ(book.Active("a1", "b1", 2550)->kind, LinkFaultKind::kDrop);
  EXPECT_EQ(book.Active("a1", "b1", 3000)->factor, 10);
  EXPECT_FALSE(book.Active("a1", "b1", 5000).has_value());
  EXPECT_EQ(back->faults[4].delay_ms, 20);
  EXPECT_EQ(book.Active("b1", "a2", 1500)->delay_ms, 20);
  EXPECT_FALSE(book.Active("a2", "a3", 1500).has_value());
  book.Prune(3000);
  ASSERT_EQ(book.faults.size(), 3u);
  EXPECT_EQ(book.faults[0].until_ms, 5000);
  EXPECT_EQ(book.faults[1].b, "a2");
}

TEST(LinkFaultBookTest, MalformedFilesAreRefusedNamingTheEntryAndKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[]", "not a JSON object"},
      {"{}", "\"faults\" must be an array"},
      {R"({"faults":[1]})", "faults[0]: must be an object"},
      {R"({"faults":[{"hosts":["a"],"kind":"drop","from_ms":1,"until_ms":2}]})", "faults[0].hosts"},
      {R"({"faults":[{"hosts":["a","a"],"kind":"drop","from_ms":1,"until_ms":2}]})", "two different hosts"},
      {R"({"faults":[{"hosts":["a","b"],"kind":"cut","from_ms":1,"until_ms":2}]})", "faults[0].kind"},
      {R"({"faults":[{"hosts":["a","b"],"kind":"drop","from_ms":1.5,"until_ms":2}]})", "faults[0].from_ms"},
      {R"({"faults":[{"hosts":["a","b"],"kind":"drop","from_ms":5,"until_ms":5}]})", "until_ms must be after"},
      {R"({"faults":[{"hosts":["a","b"],"kind":"slow","from_ms":1,"until_ms":2}]})", "faults[0].factor"},
      {R"({"faults":[{"hosts":["a","b"],"kind":"slow","factor":1,"from_ms":1,"until_ms":2}]})", "from 2 to 1000"},
      {R"({"faults":[{"hosts":["a","b"],"kind":"slow","factor":2,"delay_ms":-1,"from_ms":1,"until_ms":2}]})",
       "faults[0].delay_ms: must be from 0 to 10000"},
      {R"({"faults":[{"hosts":["a","b"],"kind":"slow","factor":2,"delay_ms":"x","from_ms":1,"until_ms":2}]})",
       "faults[0].delay_ms: must be a number"},
  };
  for (const auto& [text, needle] : cases) {
    auto book = LinkFaultBook::FromJson(text);
    ASSERT_FALSE(book.ok()) << text;
    EXPECT_EQ(book.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(book.status().message().find(needle), std::string::npos) << text << " -> " << book.status().message();
  }
}

TEST(LinkFaultWatcherTest, FollowsTheFileAndKeepsTheLastGoodBook) {
  testing::ScratchDir dir;
  const std::string path = dir / "faults.json";
  LinkFaultWatcher watcher(path, /*interval_ms=*/10);
  EXPECT_FALSE(watcher.Poll(0));  // absent: an empty book
  EXPECT_TRUE(watcher.book().faults.empty());
  LinkFaultBook book;
  book.faults.push_back({"h1", "h2", LinkFaultKind::kDrop, 10, 100, 200});
  ASSERT_TRUE(WriteFileAtomic(path, book.ToJson()).ok());
  EXPECT_FALSE(watcher.Poll(5));  // not yet: at most once per interval
  EXPECT_TRUE(watcher.Poll(10));
  EXPECT_EQ(watcher.book().faults, book.faults);
  EXPECT_FALSE(watcher.Poll(20));  // unchanged
  // A torn or hostile file: reported, and the last good book stays.
  ASSERT_TRUE(WriteFileAtomic(path, "{\"faults\": [ {\"hosts\": 3}").ok());
  EXPECT_FALSE(watcher.Poll(30));
  EXPECT_NE(watcher.error().find(path), std::string::npos) << watcher.error();
  EXPECT_EQ(watcher.book().faults, book.faults);
  // Removed: no fault any more.
  ASSERT_EQ(std::remove(path.c_str()), 0);
  EXPECT_TRUE(watcher.Poll(40));
  EXPECT_TRUE(watcher.book().faults.empty());
}

TEST(EmulatedLinksTest, NominalBandwidthRoundTripsAndIsRefusedOutOfRange) {
  EmulatedLinks links;
  links.zone_of = {{"a1", "za"}, {"a2", "za"}, {"b1", "zb"}};
  links.same_zone_rate = 5e8;
  links.cross_zone_rate = 2.5e7;
  auto back = EmulatedLinks::FromJson(links.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->NominalRate("a1", "a2"), 5e8);
  EXPECT_EQ(back->NominalRate("a1", "b1"), 2.5e7);
  EXPECT_EQ(back->NominalRate("a1", "a1"), 0);
  EXPECT_EQ(back->NominalRate("a1", "zz"), 0);
  auto bad = EmulatedLinks::FromJson(R"({"hosts":{},"nominal_bandwidth_bytes_per_second":{"same_zone":-1}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nominal_bandwidth_bytes_per_second.same_zone"), std::string::npos);
}

}  // namespace
}  // namespace tenax::net

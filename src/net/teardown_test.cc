// A node closing while clients still connect to it: the closing process
// must neither crash nor leave UCX's teardown noise in its log. Seen in CI
// as exit 139 of a worker that left an elastic job while a joiner connected
// to it (UCX 1.13 ran the listener's callback after the listener was freed;
// listener_fence.h).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "net_test_protocol.h"
#include "tenax/net/node.h"
#include "testing.h"

namespace tenax::net {
namespace {

using namespace std::chrono_literals;
using testing::Child;

constexpr const char* kSecret = "teardown-test-secret-0123456789ab";

// A plain TCP connection to 127.0.0.1:port, or -1.
int TcpConnect(uint16_t port, int* error) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    *error = errno;
    close(fd);
    return -1;
  }
  return fd;
}

// Waits until nothing listens on `port` any more (a connect is refused).
bool WaitUntilRefused(uint16_t port, Deadline deadline) {
  while (!deadline.Expired()) {
    int error = 0;
    const int fd = TcpConnect(port, &error);
    if (fd < 0 && error == ECONNREFUSED) return true;
    if (fd >= 0) close(fd);
    std::this_thread::sleep_for(1ms);  // poll interval, not a synchronisation
  }
  return false;
}

uint16_t PortOf(const Child& child) {
  const std::string& err = child.stderr_text();
  const size_t at = err.rfind("PORT ");
  if (at == std::string::npos) return 0;
  const unsigned long port = std::strtoul(err.c_str() + at + 5, nullptr, 10);
  return port > 65535 ? 0 : static_cast<uint16_t>(port);
}

// Each cycle: a peer process with one live session (ours) and one client
// that connected but has not spoken yet is told to exit; once its listening
// socket is gone, the client speaks (UCX's connection-request header). The
// peer must exit 0, and say nothing about the sockets its teardown closed.
TEST(NodeTeardown, AClientThatSpeaksWhileTheNodeClosesNeitherCrashesItNorFillsItsLog) {
  constexpr int kCycles = 12;
  // UCX logs to stdout, which Child discards: its messages go to stderr here.
  setenv("UCX_LOG_FILE", "stderr", 1);
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    Child peer({TENAX_NET_TEST_PEER, kSecret, ""});
    ASSERT_TRUE(peer.WaitForStderrLine("PORT ")) << peer.stderr_text();
    const uint16_t port = PortOf(peer);
    ASSERT_NE(port, 0) << peer.stderr_text();

    NodeOptions options;
    options.name = "teardown-test";
    options.secret = kSecret;
    options.net_devices = "lo";
    auto node = Node::Create(options);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    auto session = (*node)->Connect("127.0.0.1", port, Deadline::After(20s));
    ASSERT_TRUE(session.ok()) << session.status().ToString();

    int error = 0;
    const int silent = TcpConnect(port, &error);
    ASSERT_GE(silent, 0) << std::strerror(error);
    // A round trip: by its end UCX's async thread has long accepted the
    // silent client (it accepts as soon as the kernel has).
    ASSERT_TRUE((*node)->SendControl(*session, testproto::kEcho, "ping", Deadline::After(10s)).ok());
    auto echo = (*node)->ReceiveControl(Deadline::After(20s), *session, testproto::kEchoReply);
    ASSERT_TRUE(echo.ok()) << echo.status().ToString();
    EXPECT_EQ(echo->payload, "ping");

    ASSERT_TRUE((*node)->SendControl(*session, testproto::kExit, "", Deadline::After(10s)).ok());
    // This process no longer drives its node, so the peer's flushing close of
    // our session takes a while: the window in which the silent client speaks.
    ASSERT_TRUE(WaitUntilRefused(port, Deadline::After(20s))) << "the peer kept listening after kExit";
    struct {
      uint64_t length = 0;
      uint8_t status = 0;
      uint8_t pad[7] = {};
    } header;
    (void)!write(silent, &header, sizeof(header));

    const int exit_code = peer.Wait(60s);
    close(silent);
    EXPECT_EQ(exit_code, 0) << "the closing peer died (139 = SIGSEGV):\n" << peer.stderr_text();
    for (const char* noise : {"epoll_ctl", "failed to remove", "accept() failed"}) {
      EXPECT_EQ(peer.stderr_text().find(noise), std::string::npos)
          << "teardown noise '" << noise << "' in:\n" << peer.stderr_text();
    }
    if (::testing::Test::HasFailure()) return;
  }
}

// The crash seen twice at teardown (exit 139: a probe agent on SIGTERM after
// a peer was SIGKILLed; the coordinator once): a Node destroyed shortly after
// one of its peers was lost, while UCX's async thread may still be handling
// that loss. Each cycle: a victim process connects to a doomed one and floods
// it; the doomed one is SIGKILLed a different while into the flood each cycle
// (0 to 5.7 ms, driving our own node meanwhile), and the victim is told to
// exit at once. Its send fails on the lost peer, it returns from main and its
// Node's destructor runs: it must exit 0 (a sanitizer's report or a signal
// would not). TENAX_TEARDOWN_CYCLES sets the cycles per transport (the
// extended script runs 500 under each sanitizer).
class NodeTeardownStress : public ::testing::TestWithParam<const char*> {};

int CyclesFromEnvironment(int fallback) {
  const char* v = std::getenv("TENAX_TEARDOWN_CYCLES");
  const int n = v ? std::atoi(v) : 0;
  return n > 0 ? n : fallback;
}

TEST_P(NodeTeardownStress, ANodeTornDownRightAfterItsPeerWasKilledExitsCleanly) {
  const std::string transports = GetParam();
  const int cycles = CyclesFromEnvironment(20);
  NodeOptions options;
  options.name = "teardown-stress";
  options.secret = kSecret;
  options.transports = transports;
  options.net_devices = "lo";
  auto node = Node::Create(options);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  for (int cycle = 0; cycle < cycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle) + " of " + std::to_string(cycles));
    Child victim({TENAX_NET_TEST_PEER, kSecret, transports});
    Child doomed({TENAX_NET_TEST_PEER, kSecret, transports});
    ASSERT_TRUE(victim.WaitForStderrLine("PORT ")) << victim.stderr_text();
    ASSERT_TRUE(doomed.WaitForStderrLine("PORT ")) << doomed.stderr_text();
    const uint16_t victim_port = PortOf(victim), doomed_port = PortOf(doomed);
    ASSERT_NE(victim_port, 0) << victim.stderr_text();
    ASSERT_NE(doomed_port, 0) << doomed.stderr_text();

    auto session = (*node)->Connect("127.0.0.1", victim_port, Deadline::After(20s));
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    ASSERT_TRUE((*node)
                    ->SendControl(*session, testproto::kConnectFlood, std::to_string(doomed_port) + " 1000000 1024",
                                  Deadline::After(10s))
                    .ok());
    auto reply = (*node)->ReceiveControl(Deadline::After(30s), *session, testproto::kEchoReply);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString() << "\n" << victim.stderr_text();
    ASSERT_EQ(reply->payload, "connected");

    const auto kill_at = std::chrono::steady_clock::now() + std::chrono::microseconds(300 * (cycle % 20));
    while (std::chrono::steady_clock::now() < kill_at) (*node)->Progress();
    doomed.Signal(SIGKILL);
    ASSERT_TRUE((*node)->SendControl(*session, testproto::kExit, "", Deadline::After(10s)).ok());
    const int exit_code = victim.Wait(60s);
    EXPECT_EQ(exit_code, 0) << "the victim died at teardown (139 = SIGSEGV):\n" << victim.stderr_text();
    EXPECT_EQ(victim.stderr_text().find("Sanitizer"), std::string::npos) << victim.stderr_text();
    EXPECT_EQ(doomed.Wait(10s), 128 + SIGKILL);
    // Our side of the victim goes too; wait for it, so the next cycle starts clean.
    const Deadline gone = Deadline::After(20s);
    while ((*node)->PeerStatus(*session).ok() && !gone.Expired()) (*node)->Progress();
    if (::testing::Test::HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, NodeTeardownStress, ::testing::Values("", "tcp"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(*info.param ? info.param : "shm");
                         });

}  // namespace
}  // namespace tenax::net

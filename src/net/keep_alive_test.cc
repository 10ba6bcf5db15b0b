// RunKeepingAlive: local work that outlasts the peer timeout does not make a
// connected peer give up on this node, and without it the peer does (the
// failure that made sync ranks lose each other while reading their data).
// Two real Nodes on loopback, each driven by its own thread.
#include "tenax/net/keep_alive.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "tenax/net/message_kinds.h"
#include "tenax/net/node.h"
#include "testing.h"

namespace tenax::net {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSecret = "keep-alive-test-secret-0123456789";
constexpr uint32_t kAfterWork = kFirstTestKind + 0x80;  // "the work is over" (test range)
constexpr auto kPeerTimeout = 1000ms;
constexpr auto kWork = 2500ms;  // 2.5 peer timeouts of local work

NodeOptions Options(const std::string& name, std::chrono::milliseconds peer_timeout = kPeerTimeout) {
  NodeOptions o;
  o.name = name;
  o.secret = kSecret;
  o.net_devices = "lo";
  o.peer_timeout = peer_timeout;
  return o;
}

// CPU-bound stand-in for decompressing a dataset: sums for `how_long` and
// returns the sum (so the result is a value the caller can check).
uint64_t BusyWork(std::chrono::milliseconds how_long) {
  const auto end = SteadyClock::now() + how_long;
  uint64_t sum = 0, i = 0;
  while (SteadyClock::now() < end) {
    for (int k = 0; k < 1000; ++k) sum += ++i;
  }
  return sum + 1;  // never 0
}

// A listening node on its own thread: accepts one peer and waits (up to 20 s)
// for its kAfterWork message; `heard` is that message's payload or the error.
// With a `reply`, it then sends that back as a kAfterWork message.
class Listener {
 public:
  explicit Listener(std::chrono::milliseconds peer_timeout = kPeerTimeout, std::string reply = "") {
    auto node = Node::Create(Options("listener", peer_timeout));
    if (!node.ok()) {
      ADD_FAILURE() << node.status().ToString();
      return;
    }
    node_ = std::move(*node);
    auto port = node_->Listen("127.0.0.1", 0);
    if (!port.ok()) {
      ADD_FAILURE() << port.status().ToString();
      return;
    }
    port_ = *port;
    thread_ = std::thread([this, reply] {
      auto peer = node_->Accept(Deadline::After(20s));
      if (!peer.ok()) {
        heard_ = peer.status();
      } else {
        auto msg = node_->ReceiveControl(Deadline::After(20s), *peer, kAfterWork);
        heard_ = msg.ok() ? Result<std::string>(msg->payload) : Result<std::string>(msg.status());
        if (msg.ok() && !reply.empty()) {
          if (Status st = node_->SendControl(*peer, kAfterWork, reply, Deadline::After(10s)); !st.ok()) heard_ = st;
        }
      }
    });
  }
  ~Listener() {
    if (thread_.joinable()) thread_.join();
  }
  uint16_t port() const { return port_; }
  // Joins the thread (it ends by its own deadlines) and returns what it heard.
  Result<std::string> Heard() {
    if (thread_.joinable()) thread_.join();
    return heard_;
  }

 private:
  std::unique_ptr<Node> node_;
  uint16_t port_ = 0;
  std::thread thread_;
  Result<std::string> heard_ = Internal("nothing heard");
};

TEST(KeepAlive, LongLocalWorkKeepsThePeerConnectedAndReturnsItsResult) {
  Listener listener;
  ASSERT_NE(0, listener.port());
  ASSERT_OK_AND_ASSIGN(auto node, Node::Create(Options("worker")));
  ASSERT_OK_AND_ASSIGN(PeerId peer, node->Connect("127.0.0.1", listener.port(), Deadline::After(20s)));

  const uint64_t sum = RunKeepingAlive(*node, [] { return BusyWork(kWork); });
  EXPECT_GT(sum, 1u) << "the work's own result comes back";
  ASSERT_OK(node->SendControl(peer, kAfterWork, "still here", Deadline::After(10s)));
  ASSERT_OK_AND_ASSIGN(std::string heard, listener.Heard());
  EXPECT_EQ("still here", heard);

  // An exception thrown by the work reaches the caller.
  EXPECT_THROW(RunKeepingAlive(*node, []() -> int { throw std::runtime_error("bad data"); }), std::runtime_error);
}

// The control: the same work on the Node's own thread, without the helper,
// and the listener gives up on this node for silence.
TEST(KeepAlive, WithoutItThePeerDeclaresTheBusyNodeLost) {
  Listener listener;
  ASSERT_NE(0, listener.port());
  ASSERT_OK_AND_ASSIGN(auto node, Node::Create(Options("worker")));
  ASSERT_OK_AND_ASSIGN(PeerId peer, node->Connect("127.0.0.1", listener.port(), Deadline::After(20s)));

  EXPECT_GT(BusyWork(kWork), 1u);
  (void)node->SendControl(peer, kAfterWork, "too late", Deadline::After(2s));  // may fail: the peer closed
  auto heard = listener.Heard();
  ASSERT_FALSE(heard.ok()) << "the listener heard '" << *heard << "' after 2.5 peer timeouts of silence";
  EXPECT_EQ(StatusCode::kPeerLost, heard.status().code()) << heard.status().ToString();
  EXPECT_NE(std::string::npos, heard.status().message().find("no heartbeat")) << heard.status().ToString();
}

// The whole process (both nodes, every thread) SIGSTOPped for 1.5 peer
// timeouts, as a machine frozen under load or a coordinator stuck in a slow
// fsync is: when it resumes, neither node may drop the other for a silence
// that was its own stall. (Before, whichever thread ran first judged its
// peer silent for 6 s and dropped it: every member of a job at once.) Each
// then has about half a timeout (2 s) to be heard again: room for a loaded
// machine to schedule the other thread.
TEST(KeepAlive, AProcessFrozenForLongerThanThePeerTimeoutKeepsItsPeersWhenItResumes) {
  constexpr auto kTimeout = 4000ms;
  constexpr auto kFrozen = 6000ms;
  Listener listener(kTimeout, "welcome back");
  ASSERT_NE(0, listener.port());
  ASSERT_OK_AND_ASSIGN(auto node, Node::Create(Options("worker", kTimeout)));
  ASSERT_OK_AND_ASSIGN(PeerId peer, node->Connect("127.0.0.1", listener.port(), Deadline::After(20s)));

  // The freezer: a child that stops this process, keeps it stopped for
  // kFrozen and continues it (only async-signal-safe calls after fork).
  const auto before = SteadyClock::now();
  const pid_t freezer = fork();
  ASSERT_GE(freezer, 0);
  if (freezer == 0) {
    const pid_t parent = getppid();
    kill(parent, SIGSTOP);
    timespec ts{kFrozen.count() / 1000, (kFrozen.count() % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
    kill(parent, SIGCONT);
    _exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(freezer, waitpid(freezer, &wstatus, 0));
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  const auto frozen = SteadyClock::now() - before;
  ASSERT_GE(frozen, kFrozen) << "the process was not stopped for the whole freeze";

  ASSERT_OK(node->SendControl(peer, kAfterWork, "still here", Deadline::After(10s)));
  auto reply = node->ReceiveControl(Deadline::After(10s), peer, kAfterWork);
  ASSERT_OK_AND_ASSIGN(std::string heard, listener.Heard());
  EXPECT_EQ("still here", heard) << "the listener kept the worker";
  ASSERT_OK(reply.status()) << "the worker kept the listener";
  EXPECT_EQ("welcome back", reply->payload);
}

}  // namespace
}  // namespace tenax::net

// JobWatcher against a scripted coordinator: a real Node on loopback in its
// own thread that accepts the watcher, checks its Watch and sends what a
// coordinator relays.
#include "tenax/coord/job_watcher.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <vector>

#include "tenax/coord/coord_codec.h"
#include "tenax/net/node.h"

namespace tenax::coord {
namespace {

using namespace std::chrono_literals;

// What the coordinator tells watchers of an async job's queue arrives
// as it was counted; a negative count from a broken peer is refused.
TEST(QueueCountsMessage, CountsSurviveTheWireAndNegativeOnesAreRefused) {
  const WorkQueueCounts counts{12, 15, 3, 1, 2, 4, 11, 10, 0};
  auto decoded = DecodeQueueCounts(QueueCountsToWire(counts).SerializeAsString(), "coordinator");
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(QueueCountsFromWire(*decoded), counts);
  wire::QueueCounts bad = QueueCountsToWire(counts);
  bad.set_leases_expired(-1);
  auto refused = DecodeQueueCounts(bad.SerializeAsString(), "coordinator");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kProtocolError);
}

constexpr const char* kSecret = "job-watcher-test-secret-0123456789";

struct Sent {
  uint32_t kind;
  std::string payload;
};

wire::Progress MakeProgress(uint32_t rank, int64_t step, double loss, double accuracy = -1) {
  wire::Progress p;
  p.set_rank(rank);
  p.set_step(step);
  p.set_total_steps(100);
  p.set_epoch(1 + step / 50);
  p.set_epochs(2);
  p.set_loss(loss);
  p.set_samples_per_second(1000 + step);
  p.set_elapsed_seconds(0.1 * static_cast<double>(step));
  p.set_test_accuracy(accuracy);
  return p;
}

Sent ProgressMsg(uint32_t rank, int64_t step, double loss, double accuracy = -1) {
  return {kProgressKind, MakeProgress(rank, step, loss, accuracy).SerializeAsString()};
}

// A coordinator that accepts one watcher, checks its Watch for `job_id`,
// sends `script`, then keeps its Node alive until `release` is ready.
class ScriptedCoordinator {
 public:
  ScriptedCoordinator(std::string job_id, std::vector<Sent> script) {
    std::promise<uint16_t> port;
    auto port_ready = port.get_future();
    thread_ = std::thread(
        [this, job_id, script, port = std::move(port)]() mutable { status_ = Serve(job_id, script, port); });
    port_ = port_ready.get();
  }
  ~ScriptedCoordinator() { (void)Join(); }
  uint16_t port() const { return port_; }
  // Ends the coordinator: its Node closes.
  void Release() {
    if (!released_) release_.set_value();
    released_ = true;
  }
  // Ends the coordinator and returns how its script went.
  Status Join() {
    Release();
    if (thread_.joinable()) thread_.join();
    return status_;
  }

 private:
  Status Serve(const std::string& job_id, const std::vector<Sent>& script, std::promise<uint16_t>& port_promise) {
    net::NodeOptions o;
    o.name = "coordinator";
    o.secret = kSecret;
    o.net_devices = "lo";
    o.peer_timeout = 5s;
    auto node = net::Node::Create(o);
    auto port = node.ok() ? (*node)->Listen("127.0.0.1", 0) : Result<uint16_t>(node.status());
    port_promise.set_value(port.ok() ? *port : 0);
    if (!port.ok()) return port.status();
    const Deadline deadline = Deadline::After(30s);
    TENAX_ASSIGN_OR_RETURN(net::PeerId watcher, (*node)->Accept(deadline));
    TENAX_ASSIGN_OR_RETURN(net::ControlMessage m, (*node)->ReceiveControl(deadline, watcher, kWatchKind));
    TENAX_ASSIGN_OR_RETURN(wire::Watch watch, DecodeWatch(m.payload, "watcher"));
    if (watch.job_id() != job_id) return Internal("watching '" + watch.job_id() + "', not '" + job_id + "'");
    for (const Sent& s : script) TENAX_RETURN_IF_ERROR((*node)->SendControl(watcher, s.kind, s.payload, deadline));
    auto released = release_.get_future();
    while (released.wait_for(1ms) != std::future_status::ready) {
      if (deadline.Expired()) return DeadlineExceeded("the test never released the coordinator");
      (*node)->Progress();  // heartbeats while the watcher reads
    }
    return Status::Ok();
  }

  std::thread thread_;
  std::promise<void> release_;
  bool released_ = false;
  uint16_t port_ = 0;
  Status status_;
};

JobWatcherOptions Options(uint16_t port, int world) {
  JobWatcherOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.job_id = "job-w";
  o.world = world;
  o.secret = kSecret;
  o.peer_timeout = 5s;
  o.name = "test-watcher";
  return o;
}

// Events until JobDone or JobFailed (included), or the deadline.
Result<std::vector<JobEvent>> EventsUntilTheEnd(JobWatcher& watcher, Deadline deadline) {
  std::vector<JobEvent> events;
  while (!deadline.Expired()) {
    TENAX_ASSIGN_OR_RETURN(std::optional<JobEvent> e, watcher.Next(deadline));
    if (!e) continue;
    events.push_back(*e);
    if (!std::holds_alternative<JobProgress>(*e)) return events;
  }
  return DeadlineExceeded("no end of job");
}

TEST(JobWatcherTest, ProgressIsTheSlowestRankOnceEveryRankReportedAndOnlyWhenItMoves) {
  ScriptedCoordinator coordinator("job-w", {
                                               ProgressMsg(0, 5, 0.5),        // rank 1 not heard yet: nothing
                                               ProgressMsg(1, 3, 0.3),        // slowest: rank 1 at 3
                                               ProgressMsg(1, 7, 0.7),        // slowest: rank 0 at 5
                                               ProgressMsg(0, 8, 0.8, 0.81),  // slowest: rank 1 at 7
                                               ProgressMsg(0, 9, 0.9),        // still rank 1 at 7: nothing
                                               {kDoneKind, wire::Done().SerializeAsString()},
                                           });
  auto watcher = JobWatcher::Connect(Options(coordinator.port(), 2), Deadline::After(30s));
  ASSERT_TRUE(watcher.ok()) << watcher.status().ToString();
  auto events = EventsUntilTheEnd(**watcher, Deadline::After(30s));
  ASSERT_TRUE(events.ok()) << events.status().ToString();

  ASSERT_EQ(4u, events->size());
  const std::vector<int64_t> steps = {3, 5, 7};
  const std::vector<int64_t> max_steps = {5, 7, 8};
  const std::vector<double> losses = {0.3, 0.5, 0.7};
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto* p = std::get_if<JobProgress>(&(*events)[i]);
    ASSERT_NE(nullptr, p) << "event " << i;
    EXPECT_EQ(steps[i], p->step);
    EXPECT_EQ(max_steps[i], p->max_step);
    EXPECT_FALSE(p->max_step_only);
    EXPECT_EQ(losses[i], p->loss);
    EXPECT_EQ(100, p->total_steps);
    EXPECT_EQ(2, p->epochs);
    EXPECT_EQ(static_cast<double>(1000 + steps[i]), p->samples_per_second);
    EXPECT_FALSE(p->test_accuracy.has_value()) << "the slowest rank did not evaluate";
  }
  EXPECT_TRUE(std::holds_alternative<JobDone>(events->back()));
  EXPECT_TRUE(coordinator.Join().ok());
}

// What the launcher's step-triggered faults need: a rank that never reports
// (not yet, or never again) must not hide the steps the others reach.
TEST(JobWatcherTest, OnRequestTheHighestStepIsReportedEvenWhenTheSlowestRankDoesNotMove) {
  ScriptedCoordinator coordinator("job-w", {
                                               ProgressMsg(0, 5, 0.5),       // rank 1 not heard yet: max 5
                                               ProgressMsg(1, 3, 0.3),       // slowest: rank 1 at 3 (max 5)
                                               ProgressMsg(1, 4, 0.4),       // slowest: rank 1 at 4 (max 5)
                                               ProgressMsg(0, 9, 0.9, 0.8),  // rank 1 silent: max 9 only
                                               ProgressMsg(0, 9, 0.9),       // nothing moved: nothing
                                               ProgressMsg(0, 8, 0.8),       // a lower step: nothing
                                               {kDoneKind, wire::Done().SerializeAsString()},
                                           });
  JobWatcherOptions o = Options(coordinator.port(), 2);
  o.report_max_step = true;
  auto watcher = JobWatcher::Connect(o, Deadline::After(30s));
  ASSERT_TRUE(watcher.ok()) << watcher.status().ToString();
  auto events = EventsUntilTheEnd(**watcher, Deadline::After(30s));
  ASSERT_TRUE(events.ok()) << events.status().ToString();

  struct Expected {
    int64_t step, max_step;
    bool max_step_only;
  };
  const std::vector<Expected> expected = {{5, 5, true}, {3, 5, false}, {4, 5, false}, {4, 9, true}};
  ASSERT_EQ(expected.size() + 1, events->size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto* p = std::get_if<JobProgress>(&(*events)[i]);
    ASSERT_NE(nullptr, p) << "event " << i;
    EXPECT_EQ(expected[i].step, p->step) << "event " << i;
    EXPECT_EQ(expected[i].max_step, p->max_step) << "event " << i;
    EXPECT_EQ(expected[i].max_step_only, p->max_step_only) << "event " << i;
    EXPECT_FALSE(p->test_accuracy.has_value()) << "event " << i << ": only the slowest rank's evaluation counts";
  }
  EXPECT_TRUE(std::holds_alternative<JobDone>(events->back()));
  EXPECT_TRUE(coordinator.Join().ok());
}

TEST(JobWatcherTest, TheFailureVerdictNamesTheRankAndALostCoordinatorIsAnError) {
  wire::Failure f;
  f.set_rank(1);
  f.set_host("10.0.0.2");
  f.set_reason("lost its connection");
  ScriptedCoordinator coordinator("job-w", {ProgressMsg(0, 4, 0.4, 0.5), {kFailureKind, f.SerializeAsString()}});
  auto watcher = JobWatcher::Connect(Options(coordinator.port(), 1), Deadline::After(30s));
  ASSERT_TRUE(watcher.ok()) << watcher.status().ToString();
  auto events = EventsUntilTheEnd(**watcher, Deadline::After(30s));
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(2u, events->size());
  const auto* p = std::get_if<JobProgress>(&(*events)[0]);
  ASSERT_NE(nullptr, p);
  EXPECT_EQ(4, p->step);
  EXPECT_EQ(std::optional<double>(0.5), p->test_accuracy);
  const auto* failed = std::get_if<JobFailed>(&(*events)[1]);
  ASSERT_NE(nullptr, failed);
  EXPECT_EQ(1, failed->rank);
  EXPECT_EQ("rank 1 on 10.0.0.2 failed: lost its connection", failed->Describe());

  ASSERT_TRUE(coordinator.Join().ok());  // its Node is gone
  const Deadline deadline = Deadline::After(30s);
  Result<std::optional<JobEvent>> next = std::optional<JobEvent>();
  while (next.ok() && !deadline.Expired()) next = (*watcher)->Next(deadline);
  ASSERT_FALSE(next.ok()) << "the coordinator's end went unnoticed";
  EXPECT_EQ(StatusCode::kPeerLost, next.status().code()) << next.status().ToString();
}

}  // namespace
}  // namespace tenax::coord

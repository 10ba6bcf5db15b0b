// The live view of `tenax run` rendered into a temporary file, both modes:
// the bytes a user's terminal or log file gets.
#include "live_view.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace tenax::cli {
namespace {

// A temporary file standing in for stderr, read back whole.
class Capture {
 public:
  Capture() : file_(std::tmpfile()) {}
  ~Capture() {
    if (file_) std::fclose(file_);
  }
  std::FILE* file() const { return file_; }
  std::string Text() const {
    std::fflush(file_);
    std::string text;
    std::rewind(file_);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) text.append(buf, n);
    std::fseek(file_, 0, SEEK_END);
    return text;
  }

 private:
  std::FILE* file_;
};

// A view on `capture` with a clock the test sets.
struct Harness {
  explicit Harness(bool interactive, TerminalSize size = {100, 0}) {
    LiveViewOptions o;
    o.interactive = interactive;
    o.size = size;
    o.clock = [this] { return now; };
    view = std::make_unique<LiveView>(capture.file(), std::move(o));
  }
  // What was written since the last call.
  std::string Delta() {
    std::string text = capture.Text();
    std::string delta = text.substr(seen);
    seen = text.size();
    return delta;
  }
  Capture capture;
  double now = 0;
  size_t seen = 0;
  std::unique_ptr<LiveView> view;
};

TrainProgress Step(int64_t global, bool log_point = false) {
  TrainProgress p;
  p.epoch = (global - 1) / 256 + 1;
  p.epochs = 2;
  p.step_in_epoch = (global - 1) % 256 + 1;
  p.steps_per_epoch = 256;
  p.global_step = global;
  p.total_steps = 512;
  p.loss = 0.4321;
  p.samples_per_second = 1234.4;
  p.elapsed_seconds = 10;
  p.eta_seconds = 83;
  p.log_point = log_point;
  return p;
}

WorkerStatus Worker(std::string name, std::string state, std::string host = "", std::string detail = "",
                    double since = 0) {
  return WorkerStatus{std::move(name), std::move(state), std::move(host), std::move(detail), since};
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(text.substr(start, nl - start));
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

// The columns a line takes on a terminal: CSI sequences none, a UTF-8
// character one.
size_t Columns(const std::string& line) {
  size_t n = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\033' && i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !(line[i] >= 0x40 && line[i] <= 0x7e)) ++i;
      continue;
    }
    if ((static_cast<unsigned char>(line[i]) & 0xc0) != 0x80) ++n;
  }
  return n;
}

TEST(LiveViewPlain, EventsAreOneLineEachWithTheTimeAndNoEscape) {
  Harness h(false);
  h.now = 12.34;
  h.view->Event("lease of unit 7 re-issued");
  h.now = 1234.5;
  h.view->Event("node storage-2 failed\nrecovery planned: 12 stripes");
  h.view->Event("a \033[2Jhostile\rtext");
  h.view->Finish();
  h.view->Event("after the end");
  EXPECT_EQ(
      "[  12.3s] lease of unit 7 re-issued\n"
      "[1234.5s] node storage-2 failed\n"
      "          recovery planned: 12 stripes\n"
      "[1234.5s] a  [2Jhostile text\n"
      "[1234.5s] after the end\n",
      h.capture.Text());
}

TEST(LiveViewPlain, ProgressLinesAtLogPointsInTheLauncherFormat) {
  Harness h(false);
  h.now = 5;
  h.view->Progress(Step(49));
  EXPECT_EQ("", h.Delta()) << "no line between log points";
  h.view->Progress(Step(50, true));
  const std::string line = h.Delta();
  EXPECT_EQ("[   5.0s] [run] epoch 1/2 step 50/256 loss 0.4321 1234 samples/s ETA 1:23\n", line);
  // What tests/async_cluster_test.cc reads from `tenax run`'s stderr.
  long long epoch = 0, epochs = 0, step = 0, per_epoch = 0;
  ASSERT_EQ(4, std::sscanf(line.c_str() + line.find("[run] epoch "), "[run] epoch %lld/%lld step %lld/%lld", &epoch,
                           &epochs, &step, &per_epoch));
  EXPECT_EQ(50, step);
  EXPECT_EQ(256, per_epoch);

  TrainProgress end = Step(256, true);
  end.loss = 0.3;
  end.test_accuracy = 0.91;
  h.now = 60;
  h.view->Progress(end);
  EXPECT_EQ(
      "[  60.0s] [run] epoch 1/2 step 256/256 loss 0.3000 1234 samples/s ETA 1:23\n"
      "[  60.0s] [run] epoch 1/2 done: train loss 0.3000, test accuracy 0.9100\n",
      h.Delta());
  h.view->Finish();
  EXPECT_EQ("", h.Delta()) << "nothing to close without a terminal";
}

TEST(LiveViewPlain, StateChangesNameTheOldAndTheNewState) {
  Harness h(false);
  h.now = 1;
  h.view->Workers({Worker("worker 0", "starting", "h1"), Worker("worker 1", "starting", "h2"),
                   Worker("worker 2", "starting", "h3")});
  EXPECT_EQ(
      "[   1.0s] worker 0: starting\n"
      "[   1.0s] worker 1: starting\n"
      "[   1.0s] worker 2: starting\n",
      h.Delta());
  h.now = 2;
  h.view->Workers({Worker("worker 0", "active", "h1"), Worker("worker 1", "active", "h2"),
                   Worker("worker 2", "active", "h3")});
  EXPECT_EQ(
      "[   2.0s] worker 0: starting -> active\n"
      "[   2.0s] worker 1: starting -> active\n"
      "[   2.0s] worker 2: starting -> active\n",
      h.Delta());
  h.now = 20;
  h.view->Workers({Worker("worker 0", "active", "h1"), Worker("worker 1", "active", "h2", "share 40 of 256"),
                   Worker("worker 2", "slow", "h3", "1.9x the median step time", 19.5)});
  EXPECT_EQ("[  20.0s] worker 2: active -> slow (1.9x the median step time)\n", h.Delta())
      << "a new detail alone is no state change";
  h.now = 31;
  h.view->Workers({Worker("worker 0", "preempted", "h1"), Worker("worker 1", "active", "h2"),
                   Worker("worker 2", "slow", "h3"), Worker("joiner 1", "rejoining", "h9", "replaces worker 0")});
  EXPECT_EQ(
      "[  31.0s] worker 0: active -> preempted\n"
      "[  31.0s] joiner 1: rejoining (replaces worker 0)\n",
      h.Delta());
  h.view->Finish();
  const std::string all = h.capture.Text();
  EXPECT_EQ(std::string::npos, all.find('\033'));
  EXPECT_EQ(std::string::npos, all.find('\r'));
}

TEST(LiveViewTerminal, AnEventScrollsAboveTheBlockWhichIsRedrawnBelowIt) {
  Harness h(true);
  h.now = 1;
  h.view->Workers({Worker("worker 0", "active", "h1", "share 128 of 256"), Worker("worker 1", "active", "h2")});
  h.view->Progress(Step(100));
  h.Delta();
  h.now = 12.3;
  h.view->Event("preemption notice: worker 1 (h2) in 30 s");
  const std::string out = h.Delta();
  // Erase the 3-line block (cursor up 3, clear to the end of the screen),
  // the event, the block again.
  const std::string erase = "\033[3A\r\033[J";
  ASSERT_EQ(0u, out.find(erase + "[  12.3s] preemption notice: worker 1 (h2) in 30 s\n")) << out;
  const auto lines = Lines(out.substr(erase.size()));
  ASSERT_EQ(4u, lines.size()) << out;
  EXPECT_EQ(0u, lines[1].find("epoch 1/2 step 100/512 ")) << lines[1];
  EXPECT_NE(std::string::npos, lines[1].find(" 20%  loss 0.4321  1234 samples/s  ETA 1:23")) << lines[1];
  EXPECT_EQ("  worker 0  \033[32mactive   \033[0m  h1  for 11s     share 128 of 256", lines[2]);
  EXPECT_EQ("  worker 1  \033[32mactive   \033[0m  h2  for 11s", lines[3]);
  EXPECT_EQ('\n', out.back()) << "the cursor waits below the block";

  // A second event erases exactly the block drawn after the first.
  h.view->Event("lease re-issued");
  EXPECT_EQ(0u, h.Delta().find(erase + "[  12.3s] lease re-issued\n"));
}

TEST(LiveViewTerminal, TheBarShowsTheTestAccuracyOnceAnEpochEnded) {
  Harness h(true);
  h.now = 1;
  TrainProgress end = Step(256, true);
  end.test_accuracy = 0.8765;
  h.view->Progress(end);
  const std::string out = h.Delta();
  const auto lines = Lines(out);
  ASSERT_EQ(2u, lines.size()) << out;
  EXPECT_EQ("[   1.0s] epoch 1/2 done: train loss 0.4321, test accuracy 0.8765", lines[0]);
  EXPECT_NE(std::string::npos, lines[1].find(" 50%  loss 0.4321  1234 samples/s  ETA 1:23  test accuracy 0.8765"))
      << lines[1];
  EXPECT_EQ(std::string::npos, out.find("[run]")) << "the process tag is for log files";
}

TEST(LiveViewTerminal, BlockLinesAreCutToTheTerminalWidth) {
  Harness h(true, {40, 0});
  h.view->Progress(Step(300));
  h.view->Workers({Worker("worker 0", "slow", "zone-a-host-1", std::string(80, 'x')),
                   Worker("worker 1", "killed", "zone-b-host-2")});
  const std::string out = h.capture.Text();
  const std::string block = out.substr(out.rfind("\033[J") + 3);
  const auto lines = Lines(block);
  ASSERT_EQ(3u, lines.size()) << block;
  for (const auto& line : lines) EXPECT_LE(Columns(line), 39u) << line;
  EXPECT_EQ(39u, Columns(lines[0])) << lines[0];
  // The bar at its narrowest (10), 59% of it full, the numbers cut.
  EXPECT_EQ("epoch 2/2 step 300/512 \u2588\u2588\u2588\u2588\u2588\u2591\u2591\u2591\u2591\u2591  59%\u2026", lines[0]);
  EXPECT_EQ("  worker 0  \033[33mslow     \033[0m  zone-a-host-1  \u2026\033[0m", lines[1]);
  EXPECT_EQ("  worker 1  \033[31mkilled   \033[0m  zone-b-host-2  \u2026\033[0m", lines[2]);

  // Event lines are not cut: they scroll away whole.
  const std::string long_event(120, 'e');
  h.view->Event(long_event);
  EXPECT_NE(std::string::npos, h.capture.Text().find("] " + long_event + "\n"));
}

TEST(LiveViewTerminal, EachStateHasItsColour) {
  Harness h(true, {200, 0});
  const std::vector<std::pair<std::string, std::string>> colours = {
      {"active", "\033[32m"},    {"slow", "\033[33m"},     {"preempted", "\033[31m"},
      {"killed", "\033[31m"},    {"stopped", "\033[31m"},  {"rejoining", "\033[36m"},
      {"starting", "\033[36m"},  {"left", "\033[2m"},      {"done", "\033[2m"}};
  std::vector<WorkerStatus> workers;
  for (size_t i = 0; i < colours.size(); ++i) workers.push_back(Worker("w" + std::to_string(i), colours[i].first));
  h.view->Workers(workers);
  const auto lines = Lines(h.capture.Text());
  ASSERT_EQ(1 + colours.size(), lines.size()) << h.capture.Text();
  EXPECT_EQ("waiting for the first step", lines[0]);
  for (size_t i = 0; i < colours.size(); ++i) {
    std::string word = colours[i].first;
    word.resize(9, ' ');
    EXPECT_NE(std::string::npos, lines[1 + i].find(colours[i].second + word + "\033[0m")) << lines[1 + i];
  }
}

TEST(LiveViewTerminal, ProgressRedrawsAtMostTenTimesASecondStateChangesAtOnce) {
  Harness h(true);
  h.view->Workers({Worker("worker 0", "active")});
  h.now = 1.0;
  h.view->Progress(Step(10));
  EXPECT_NE("", h.Delta());
  h.now = 1.05;
  h.view->Progress(Step(11));
  EXPECT_EQ("", h.Delta()) << "50 ms after the last redraw";
  h.now = 1.06;
  h.view->Workers({Worker("worker 0", "slow", "", "2.1x the median step time")});
  const std::string changed = h.Delta();
  EXPECT_NE(std::string::npos, changed.find("\033[33mslow")) << changed;
  EXPECT_NE(std::string::npos, changed.find("step 11/512")) << "the newest progress with it";
  h.now = 1.1;
  h.view->Workers({Worker("worker 0", "slow", "", "2.2x the median step time")});
  EXPECT_EQ("", h.Delta()) << "a new detail waits for the next redraw";
  h.now = 1.2;
  h.view->Progress(Step(12));
  const std::string later = h.Delta();
  EXPECT_NE(std::string::npos, later.find("step 12/512")) << later;
  EXPECT_NE(std::string::npos, later.find("2.2x the median step time")) << later;
  h.now = 1.21;
  h.view->Progress(Step(512));
  EXPECT_NE(std::string::npos, h.Delta().find("step 512/512")) << "the last step is always shown";
}

TEST(LiveViewTerminal, HowLongFollowsTheLaunchersClock) {
  Harness h(true);
  // The launcher started the workers 3 s after the view: a change it
  // reports at once has since_seconds = its now.
  h.now = 3;
  h.view->Workers({Worker("worker 0", "starting", "", "", 0), Worker("worker 1", "starting", "", "", 0)});
  h.now = 8;
  h.view->Workers({Worker("worker 0", "active", "", "", 5), Worker("worker 1", "starting", "", "", 0)});
  h.Delta();
  h.now = 73;
  h.view->Progress(Step(1));
  const auto lines = Lines(h.Delta().substr(std::string("\033[3A\r\033[J").size()));
  ASSERT_EQ(3u, lines.size());
  EXPECT_NE(std::string::npos, lines[1].find("for 1m05s")) << lines[1];
  EXPECT_NE(std::string::npos, lines[2].find("for 1m10s")) << lines[2];
}

TEST(LiveViewTerminal, WorkersBeyondTheScreenAreCounted) {
  Harness h(true, {100, 6});
  std::vector<WorkerStatus> workers;
  for (int i = 0; i < 10; ++i) workers.push_back(Worker("worker " + std::to_string(i), "active"));
  h.view->Progress(Step(1));
  h.view->Workers(workers);
  const std::string out = h.capture.Text();
  const auto lines = Lines(out.substr(out.rfind("\033[J") + 3));
  ASSERT_EQ(5u, lines.size()) << "one row short of the screen";
  EXPECT_NE(std::string::npos, lines[3].find("worker 2")) << lines[3];
  EXPECT_EQ("  \u2026 and 7 more workers", lines[4]);
}

TEST(LiveViewTerminal, FinishLeavesTheLastBlockAndLaterLinesGoBelowIt) {
  Harness h(true);
  h.view->Workers({Worker("worker 0", "active")});
  h.view->Progress(Step(200));
  h.now = 1;
  h.view->Workers({Worker("worker 0", "done")});
  h.Delta();
  h.view->Finish();
  const std::string last = h.Delta();
  ASSERT_EQ(0u, last.find("\033[2A\r\033[J")) << "the final block replaces the drawn one";
  const auto lines = Lines(last.substr(std::string("\033[2A\r\033[J").size()));
  ASSERT_EQ(2u, lines.size());
  EXPECT_NE(std::string::npos, lines[0].find("step 200/512"));
  EXPECT_NE(std::string::npos, lines[1].find("\033[2mdone"));
  h.view->Event("stopping");
  h.view->Progress(Step(201));
  h.view->Finish();
  EXPECT_EQ("[   1.0s] stopping\n", h.Delta()) << "no erase: the block stays on the screen";
}

TEST(LiveViewTerminal, NothingIsDrawnBeforeThereIsSomethingToShow) {
  Harness h(true);
  h.view->Event("job j: coordinator on 127.0.0.1:5000");
  h.view->Finish();
  EXPECT_EQ("[   0.0s] job j: coordinator on 127.0.0.1:5000\n", h.capture.Text());
}

// A sink writing the logger's lines to the view's file, as spdlog's stderr
// sink does to stderr.
class FileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit FileSink(std::FILE* f) : f_(f) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    std::fwrite(buf.data(), 1, buf.size(), f_);
  }
  void flush_() override { std::fflush(f_); }

 private:
  std::FILE* f_;
};

TEST(LiveViewTerminal, RoutedLogLinesGoAboveTheBlock) {
  Harness h(true);
  auto before = spdlog::default_logger();
  auto sink = std::make_shared<FileSink>(h.capture.file());
  auto logger = std::make_shared<spdlog::logger>("run", sink);
  logger->set_pattern("[%n] %v");
  spdlog::set_default_logger(logger);
  h.view->Workers({Worker("worker 0", "active")});
  h.view->RouteLogging();
  h.Delta();
  spdlog::info("placement changed");
  const std::string out = h.Delta();
  EXPECT_EQ(0u, out.find("\033[2A\r\033[J[run] placement changed\nwaiting for the first step\n")) << out;
  h.view->Finish();
  ASSERT_EQ(1u, logger->sinks().size());
  EXPECT_EQ(sink, logger->sinks()[0]) << "Finish gives the logger its sinks back";
  h.Delta();
  spdlog::info("after");
  EXPECT_EQ("[run] after\n", h.Delta());
  spdlog::set_default_logger(before);
}

TEST(LiveViewPlain, RoutingLogsIsForTerminalsOnly) {
  Harness h(false);
  auto before = spdlog::default_logger();
  auto sink = std::make_shared<FileSink>(h.capture.file());
  auto logger = std::make_shared<spdlog::logger>("run", sink);
  spdlog::set_default_logger(logger);
  h.view->RouteLogging();
  EXPECT_EQ(sink, logger->sinks().at(0));
  spdlog::set_default_logger(before);
}

TEST(RunClock, GoesOnFromTheStartThatTheOuterRunPassedDown) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  const std::string outer = std::to_string(now - 42'000'000'000);  // started 42 s ago
  ::setenv("TENAX_RUN_STARTED", outer.c_str(), 1);
  const double seconds = RunClock()();
  EXPECT_GE(seconds, 42.0);
  EXPECT_LT(seconds, 42.0 + 60);
  EXPECT_EQ(outer, std::getenv("TENAX_RUN_STARTED"));

  for (const char* bad : {"", "soon", "12abc", "-5", "99999999999999999999999"}) {
    ::setenv("TENAX_RUN_STARTED", bad, 1);
    EXPECT_LT(RunClock()(), 60.0) << "'" << bad << "' is ignored";
    EXPECT_NE(bad, std::string(std::getenv("TENAX_RUN_STARTED"))) << "and replaced by this run's start";
  }
  ::unsetenv("TENAX_RUN_STARTED");
  EXPECT_LT(RunClock()(), 60.0);
  EXPECT_NE(nullptr, std::getenv("TENAX_RUN_STARTED")) << "for the runs this one starts";
  ::unsetenv("TENAX_RUN_STARTED");
}

}  // namespace
}  // namespace tenax::cli

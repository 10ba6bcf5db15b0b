// The live terminal view of `tenax run`: the job's progress, every worker's
// state and a line per event.
//
// Interactive (a terminal): a block at the bottom of the screen, redrawn in
// place: the overall progress bar, then one line per worker (its state word
// coloured, host, how long in that state, detail). An event scrolls above
// the block: the block is erased (cursor up, clear to the end of the
// screen), "[  12.3s] text" printed, the block drawn again. Block lines are
// cut to the terminal's width (so a redraw always knows how many lines to
// erase); event lines are never cut (they scroll away whole).
// Not interactive (pipes, files, CI logs): no escape sequence at all, only
// lines: events as "[  12.3s] text", progress at each log point and at the
// end of each epoch ("[run] epoch 1/3 step 50/256 loss ..."; tests and
// scripts grep that), "worker 2: starting (detail)" when a worker first
// shows up and "worker 2: active -> slow (detail)" per state change.
//
// Ownership: writes to a FILE* it does not own (stderr in production, a
// temporary file in tests). Threading: every method may be called from any
// thread (one mutex). Failure: write errors of the FILE* are ignored (the
// job goes on without its view).
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tenax/launch/local_launcher.h"
#include "tenax/train/progress.h"

namespace spdlog {
class logger;
namespace sinks {
class sink;
}
}  // namespace spdlog

namespace tenax::cli {

struct TerminalSize {
  int width = 100;  // columns
  int height = 0;   // rows; 0 = unknown
};

// stderr's size (ioctl TIOCGWINSZ); 100 columns, unknown rows when it is
// not a terminal or does not say.
TerminalSize StderrTerminalSize();

// Seconds since the outermost `tenax run` of this job started, for the
// view's clock: a launcher that re-runs itself (inside an emulated
// topology's namespaces) shows the same times as the one it replaced. The
// start goes to children in $TENAX_RUN_STARTED (the steady clock, which is
// system-wide, in nanoseconds); one that does not parse or lies ahead is
// ignored. Sets the variable when absent: call it before starting threads.
std::function<double()> RunClock();

struct LiveViewOptions {
  bool interactive = false;  // draw the live block with ANSI sequences
  TerminalSize size;         // the terminal's size when `terminal_size` is empty
  // Asked before each redraw when set (the terminal may be resized).
  std::function<TerminalSize()> terminal_size;
  // Seconds since the view started; the steady clock when empty (tests
  // pass their own).
  std::function<double()> clock;
  // The process tag of progress lines when not interactive ("[run] epoch
  // ..."), as the launcher's log lines before the view had them.
  std::string progress_tag = "run";
};

class LiveView {
 public:
  LiveView(std::FILE* out, LiveViewOptions options);
  ~LiveView();  // puts logging back (RouteLogging)
  LiveView(const LiveView&) = delete;
  LiveView& operator=(const LiveView&) = delete;

  // The job's progress (LaunchOptions.on_progress).
  void Progress(const TrainProgress& p);
  // One event line (LaunchOptions.on_notice); several lines for a text
  // with newlines.
  void Event(const std::string& text);
  // Every worker's state (LaunchOptions.on_workers).
  void Workers(const std::vector<WorkerStatus>& workers);
  // Draws the final block and leaves it on the screen; later calls print
  // plain lines below it. Idempotent.
  void Finish();

  // Interactive only: the lines of spdlog's default logger go around the
  // block (erase, the logger's own line, redraw) instead of through it,
  // until Finish. Call it on the thread that logs, after the logger is set
  // up (the launcher sets its own); later calls do nothing. spdlog's sinks
  // may not change while another thread logs, hence the thread rule.
  void RouteLogging();

 private:
  class LogSink;

  double Now() const;
  std::string Stamp(double now) const;  // "[  12.3s] "
  void Emit(const std::string& text);   // one write + flush
  void Unroute();
  // Interactive: the bytes erasing the drawn block, then `above`, then the
  // block drawn again.
  std::string Redraw(double now, const std::string& above = "");
  // Interactive: the escape sequence erasing the drawn block ("" if none).
  std::string EraseBlock();
  std::string DrawBlock(double now);
  std::vector<std::string> BlockLines(double now, const TerminalSize& size) const;
  std::string WorkerLine(const WorkerStatus& w, size_t name_width, size_t host_width, double now) const;
  // A log line (LogSink): `write` runs with the block erased, which is
  // drawn again after it.
  void LogAround(const std::function<void()>& write);
  // Prints `lines` (already stamped) above the block, redrawing it.
  void ScrollLocked(const std::string& lines, double now);

  std::FILE* out_;
  LiveViewOptions options_;
  std::function<double()> clock_;
  mutable std::mutex mu_;
  bool finished_ = false;
  int block_lines_ = 0;       // lines of the block on screen now
  double last_draw_ = -1e18;  // when the block was last drawn
  std::optional<TrainProgress> progress_;
  std::optional<double> test_accuracy_;  // the newest epoch's
  std::vector<WorkerStatus> workers_;
  std::map<std::string, std::string> states_;  // the last state of each worker, by name
  // The launcher's clock (WorkerStatus.since_seconds) runs this much behind
  // ours: the smallest (our now - newest since) seen, as a state change is
  // reported when it happens.
  std::optional<double> launcher_offset_;
  // RouteLogging: the logger whose sinks were replaced, and its own sinks.
  std::shared_ptr<spdlog::logger> routed_logger_;
  std::vector<std::shared_ptr<spdlog::sinks::sink>> original_sinks_;
};

}  // namespace tenax::cli

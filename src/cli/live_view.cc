#include "live_view.h"

#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

namespace tenax::cli {
namespace {

// Redraws of the block for progress alone at most this often (seconds).
constexpr double kRedrawInterval = 0.1;
constexpr int kMinBarWidth = 10;
constexpr int kMaxBarWidth = 30;
constexpr size_t kStateWidth = 9;  // "preempted", "rejoining"
constexpr const char* kReset = "\033[0m";

std::string Printf(const char* format, auto... args) {
  char buf[256];
  const int n = std::snprintf(buf, sizeof buf, format, args...);
  return std::string(buf, static_cast<size_t>(std::clamp(n, 0, static_cast<int>(sizeof buf) - 1)));
}

// "1:23" or "1:02:03", as the progress lines have always shown the ETA.
std::string Clock(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  return s >= 3600 ? Printf("%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60) : Printf("%ld:%02ld", s / 60, s % 60);
}

// How long a worker has been in its state: "12s", "3m05s", "1h02m".
std::string Span(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  if (s < 60) return Printf("%lds", s);
  if (s < 3600) return Printf("%ldm%02lds", s / 60, s % 60);
  return Printf("%ldh%02ldm", s / 3600, (s / 60) % 60);
}

// Control bytes (ESC among them) out of text that came from elsewhere: a
// stray escape sequence would move the cursor under the view's feet, and a
// plain log must stay plain.
std::string Sanitize(std::string text) {
  for (char& c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = ' ';
  }
  return text;
}

// "\033[32m" for a state word, "" for one without a colour.
const char* StateColour(const std::string& state) {
  if (state == "active") return "\033[32m";  // green
  if (state == "slow") return "\033[33m";    // yellow
  if (state == "preempted" || state == "killed" || state == "failed" || state == "stopped") return "\033[31m";  // red
  if (state == "rejoining" || state == "starting" || state == "spare") return "\033[36m";  // cyan
  if (state == "left" || state == "done") return "\033[2m";                                // dim
  return "";
}

// Where the escape sequence at line[i] (ESC) ends: ESC [ parameters final-byte.
size_t EscapeEnd(const std::string& line, size_t i) {
  size_t j = i + 1;
  if (j < line.size() && line[j] == '[') {
    ++j;
    while (j < line.size() && !(line[j] >= 0x40 && line[j] <= 0x7e)) ++j;
  }
  return std::min(j + 1, line.size());
}

// Bytes of the UTF-8 character starting at line[i].
size_t CharLength(const std::string& line, size_t i) {
  const auto c = static_cast<unsigned char>(line[i]);
  const size_t len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
  return std::min(len, line.size() - i);
}

// Terminal columns `line` takes: escape sequences none, a character one
// (the view's own text has no wide characters).
size_t VisibleWidth(const std::string& line) {
  size_t n = 0;
  for (size_t i = 0; i < line.size();) {
    if (line[i] == '\033') {
      i = EscapeEnd(line, i);
    } else {
      i += CharLength(line, i);
      ++n;
    }
  }
  return n;
}

// `line` cut to at most `columns` columns, ending in "…" where it was cut
// (and resetting colours, as the cut may have dropped a reset).
std::string Fit(const std::string& line, size_t columns) {
  if (VisibleWidth(line) <= columns) return line;
  std::string out;
  size_t used = 0;
  bool escapes = false;
  for (size_t i = 0; i < line.size();) {
    if (line[i] == '\033') {
      const size_t end = EscapeEnd(line, i);
      out.append(line, i, end - i);
      escapes = true;
      i = end;
      continue;
    }
    if (used + 1 >= columns) break;  // the last column is the ellipsis'
    const size_t len = CharLength(line, i);
    out.append(line, i, len);
    ++used;
    i += len;
  }
  out += "\u2026";
  if (escapes) out += kReset;
  return out;
}

std::string ProgressText(const TrainProgress& p) {
  return Printf("epoch %lld/%lld step %lld/%lld loss %.4f %.0f samples/s ETA %s", static_cast<long long>(p.epoch),
                static_cast<long long>(p.epochs), static_cast<long long>(p.step_in_epoch),
                static_cast<long long>(p.steps_per_epoch), p.loss, p.samples_per_second,
                Clock(p.eta_seconds).c_str());
}

std::string EpochDoneText(const TrainProgress& p) {
  return Printf("epoch %lld/%lld done: train loss %.4f, test accuracy %.4f", static_cast<long long>(p.epoch),
                static_cast<long long>(p.epochs), p.loss, p.test_accuracy.value_or(0.0));
}

}  // namespace

TerminalSize StderrTerminalSize() {
  TerminalSize size;
  winsize ws{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    size.width = ws.ws_col;
    size.height = ws.ws_row;
  }
  return size;
}

std::function<double()> RunClock() {
  using Clock = std::chrono::steady_clock;
  constexpr const char* kVariable = "TENAX_RUN_STARTED";
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  int64_t start = now;
  if (const char* value = std::getenv(kVariable)) {
    char* end = nullptr;
    errno = 0;
    const long long parsed = std::strtoll(value, &end, 10);
    if (errno == 0 && end != value && *end == '\0' && parsed > 0 && parsed <= now) start = parsed;
  }
  ::setenv(kVariable, std::to_string(start).c_str(), 1);
  return [start] {
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    return static_cast<double>(ns - start) / 1e9;
  };
}

// spdlog's sink standing in for a logger's own sinks while the view routes
// logging: each line is written by those sinks (their format, their
// colours) with the block erased around it.
class LiveView::LogSink final : public spdlog::sinks::sink {
 public:
  LogSink(LiveView* view, std::vector<spdlog::sink_ptr> inner) : view_(view), inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    view_->LogAround([&] {
      for (auto& s : inner_) {
        if (s->should_log(msg.level)) s->log(msg);
      }
    });
  }
  void flush() override {
    for (auto& s : inner_) s->flush();
  }
  void set_pattern(const std::string& pattern) override {
    for (auto& s : inner_) s->set_pattern(pattern);
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    for (auto& s : inner_) s->set_formatter(formatter->clone());
  }

 private:
  LiveView* view_;
  std::vector<spdlog::sink_ptr> inner_;
};

LiveView::LiveView(std::FILE* out, LiveViewOptions options) : out_(out), options_(std::move(options)) {
  clock_ = options_.clock;
  if (!clock_) {
    const auto start = std::chrono::steady_clock::now();
    clock_ = [start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  }
}

LiveView::~LiveView() {
  std::lock_guard lock(mu_);
  Unroute();
}

double LiveView::Now() const { return clock_(); }

std::string LiveView::Stamp(double now) const { return Printf("[%6.1fs] ", now); }

void LiveView::Emit(const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

void LiveView::Progress(const TrainProgress& p) {
  std::lock_guard lock(mu_);
  const double now = Now();
  progress_ = p;
  if (p.test_accuracy) test_accuracy_ = p.test_accuracy;
  const std::string tag = options_.progress_tag.empty() ? "" : "[" + options_.progress_tag + "] ";
  if (!options_.interactive || finished_) {
    if (options_.interactive) return;  // the final block is on the screen
    std::string lines;
    if (p.log_point) lines += Stamp(now) + tag + ProgressText(p) + "\n";
    if (p.test_accuracy) lines += Stamp(now) + tag + EpochDoneText(p) + "\n";
    Emit(lines);
    return;
  }
  if (p.test_accuracy) {
    ScrollLocked(Stamp(now) + EpochDoneText(p) + "\n", now);
    return;
  }
  const bool last = p.total_steps > 0 && p.global_step >= p.total_steps;
  if (block_lines_ == 0 || last || now - last_draw_ >= kRedrawInterval) Emit(Redraw(now));
}

void LiveView::Event(const std::string& text) {
  std::lock_guard lock(mu_);
  const double now = Now();
  std::string lines;
  const std::string stamp = Stamp(now);
  size_t start = 0;
  bool first = true;
  while (start < text.size() || first) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    // Continuation lines line up under the first one's text.
    lines += (first ? stamp : std::string(stamp.size(), ' ')) + Sanitize(text.substr(start, nl - start)) + "\n";
    first = false;
    start = nl + 1;
  }
  ScrollLocked(lines, now);
}

void LiveView::Workers(const std::vector<WorkerStatus>& workers) {
  std::lock_guard lock(mu_);
  const double now = Now();
  double newest = -std::numeric_limits<double>::infinity();
  for (const auto& w : workers) newest = std::max(newest, w.since_seconds);
  if (!workers.empty()) launcher_offset_ = std::min(launcher_offset_.value_or(now - newest), now - newest);

  std::string lines;  // not interactive: a line per change
  bool changed = workers.size() != workers_.size();
  for (const auto& w : workers) {
    const std::string detail = w.detail.empty() ? "" : " (" + Sanitize(w.detail) + ")";
    auto it = states_.find(w.name);
    if (it == states_.end()) {
      changed = true;
      lines += Stamp(now) + Sanitize(w.name) + ": " + Sanitize(w.state) + detail + "\n";
      states_[w.name] = w.state;
    } else if (it->second != w.state) {
      changed = true;
      lines += Stamp(now) + Sanitize(w.name) + ": " + Sanitize(it->second) + " -> " + Sanitize(w.state) + detail + "\n";
      it->second = w.state;
    }
  }
  workers_ = workers;
  if (!options_.interactive) {
    Emit(lines);
    return;
  }
  if (finished_) return;
  if (changed || now - last_draw_ >= kRedrawInterval) Emit(Redraw(now));
}

void LiveView::Finish() {
  std::lock_guard lock(mu_);
  if (finished_) return;
  if (options_.interactive) Emit(Redraw(Now()));
  finished_ = true;
  block_lines_ = 0;  // left on the screen; what follows goes below it
  Unroute();
}

void LiveView::RouteLogging() {
  std::lock_guard lock(mu_);
  if (!options_.interactive || finished_ || routed_logger_) return;
  auto logger = spdlog::default_logger();
  if (!logger) return;
  original_sinks_ = logger->sinks();
  auto sink = std::make_shared<LogSink>(this, original_sinks_);
  logger->sinks().assign(1, sink);
  routed_logger_ = std::move(logger);
}

void LiveView::Unroute() {
  if (!routed_logger_) return;
  routed_logger_->sinks() = original_sinks_;
  routed_logger_.reset();
  original_sinks_.clear();
}

void LiveView::LogAround(const std::function<void()>& write) {
  std::lock_guard lock(mu_);
  if (!options_.interactive || finished_ || block_lines_ == 0) {
    write();
    return;
  }
  Emit(EraseBlock());
  write();
  Emit(DrawBlock(Now()));
}

void LiveView::ScrollLocked(const std::string& lines, double now) {
  if (!options_.interactive || finished_) {
    Emit(lines);
    return;
  }
  Emit(Redraw(now, lines));
}

std::string LiveView::Redraw(double now, const std::string& above) {
  std::string s = EraseBlock();  // first: it reads the height of the block drawn before
  s += above;
  s += DrawBlock(now);
  return s;
}

std::string LiveView::EraseBlock() {
  if (block_lines_ == 0) return "";
  // The cursor is at the start of the line below the block.
  std::string s = Printf("\033[%dA\r\033[J", block_lines_);
  block_lines_ = 0;
  return s;
}

std::string LiveView::DrawBlock(double now) {
  if (!progress_ && workers_.empty()) return "";
  const TerminalSize size = options_.terminal_size ? options_.terminal_size() : options_.size;
  std::string s;
  const auto lines = BlockLines(now, size);
  for (const auto& line : lines) s += line + "\n";
  block_lines_ = static_cast<int>(lines.size());
  last_draw_ = now;
  return s;
}

std::vector<std::string> LiveView::BlockLines(double now, const TerminalSize& size) const {
  // One column short of the width: a line filling the last column makes
  // some terminals wrap at once, and the block would be a line taller than
  // the view thinks when it erases it.
  const size_t columns = static_cast<size_t>(std::max(size.width, 20) - 1);
  std::vector<std::string> lines;
  if (progress_) {
    const TrainProgress& p = *progress_;
    double frac = 0;
    if (p.total_steps > 0) {
      frac = static_cast<double>(p.global_step) / static_cast<double>(p.total_steps);
    } else if (p.steps_per_epoch > 0) {
      frac = static_cast<double>(p.step_in_epoch) / static_cast<double>(p.steps_per_epoch);
    }
    frac = std::clamp(frac, 0.0, 1.0);
    const std::string left = Printf("epoch %lld/%lld step %lld/%lld ", static_cast<long long>(p.epoch),
                                    static_cast<long long>(p.epochs), static_cast<long long>(p.global_step),
                                    static_cast<long long>(p.total_steps));
    std::string right = Printf(" %3.0f%%  loss %.4f  %.0f samples/s  ETA %s", frac * 100, p.loss,
                               p.samples_per_second, Clock(p.eta_seconds).c_str());
    if (test_accuracy_) right += Printf("  test accuracy %.4f", *test_accuracy_);
    // The bar takes the room the numbers leave, within bounds.
    const int room = static_cast<int>(columns) - static_cast<int>(left.size() + right.size());
    const int width = std::clamp(room, kMinBarWidth, kMaxBarWidth);
    const int filled = static_cast<int>(frac * width);
    std::string bar;
    for (int i = 0; i < width; ++i) bar += i < filled ? "\u2588" : "\u2591";
    const std::string line = left + bar + right;
    lines.push_back(Fit(line, columns));
  } else {
    lines.push_back(Fit("waiting for the first step", columns));
  }
  size_t name_width = 0, host_width = 0;
  for (const auto& w : workers_) {
    name_width = std::max(name_width, w.name.size());
    host_width = std::max(host_width, w.host.size());
  }
  // A block taller than the screen could not be erased (the cursor stops
  // at the top row): the workers that do not fit are counted instead.
  size_t shown = workers_.size();
  if (size.height > 0) {
    const size_t room = static_cast<size_t>(std::max(size.height - 1, 2)) - 1;  // below the bar
    if (shown > room) shown = room - 1;
  }
  for (size_t i = 0; i < shown; ++i) lines.push_back(Fit(WorkerLine(workers_[i], name_width, host_width, now), columns));
  if (shown < workers_.size()) {
    lines.push_back(Fit(Printf("  \u2026 and %zu more workers", workers_.size() - shown), columns));
  }
  return lines;
}

std::string LiveView::WorkerLine(const WorkerStatus& w, size_t name_width, size_t host_width, double now) const {
  std::string name = Sanitize(w.name), state = Sanitize(w.state), host = Sanitize(w.host);
  name.resize(std::max(name.size(), name_width), ' ');
  state.resize(std::max(state.size(), kStateWidth), ' ');
  host.resize(std::max(host.size(), host_width), ' ');
  const char* colour = StateColour(w.state);
  std::string line = "  " + name + "  " + (*colour ? colour + state + kReset : state) + "  ";
  if (host_width > 0) line += host + "  ";
  const double launcher_now = now - launcher_offset_.value_or(0.0);
  std::string span = "for " + Span(launcher_now - w.since_seconds);
  span.resize(std::max<size_t>(span.size(), 10), ' ');
  line += span;
  if (!w.detail.empty()) line += "  " + Sanitize(w.detail);
  // No trailing blanks: they would only make a cut line look cut later.
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

}  // namespace tenax::cli

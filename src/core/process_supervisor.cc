#include "tenax/core/process_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "tenax/core/files.h"
#include "tenax/core/subprocess.h"

namespace tenax {

using namespace std::chrono_literals;

namespace {

// After every child is reaped, how long to wait for the end of captured
// output that a grandchild may still hold open.
constexpr auto kDrainLimit = 1s;
// Without pidfds, exits are noticed by polling at this interval.
constexpr auto kBlindPollInterval = 10ms;
constexpr auto kInterruptInterval = 50ms;

int OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // close-on-exec by default
#else
  (void)pid;
  return -1;
#endif
}

// The last `n` lines of a file, reading at most its last 64 KiB.
std::vector<std::string> LastLinesOfFile(const std::string& path, size_t n) {
  constexpr std::streamoff kWindow = 64 << 10;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > kWindow ? size - kWindow : 0;
  in.seekg(start);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());  // cut by the window
  if (lines.size() > n) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(n));
  return lines;
}

}  // namespace

std::string ChildFailure::Describe() const {
  std::string s = name + " exited with code " + std::to_string(exit_code);
  const std::string what = log_path.empty() ? "its output" : "its log (" + log_path + ")";
  if (last_lines.empty()) return s + "; " + what + " is empty";
  s += "; " + what + " ends:";
  for (const auto& line : last_lines) s += "\n    " + line;
  return s;
}

struct ProcessSupervisor::Child {
  std::string name;
  std::string log_path;  // "" when captured
  bool capture = false;
  pid_t pid = -1;
  std::unique_ptr<ChildProcess> proc;
  int pidfd = -1;   // readable once the child exited; -1 when reaped or unavailable
  int out_fd = -1;  // captured stdout (non-blocking); -1 once closed
  std::string partial;
  std::vector<std::string> lines;
  std::optional<int> exit;
  SteadyClock::time_point started{}, ended{};  // ended: when the exit was observed
  uint64_t exit_order = 0;
  bool stopped = false;        // signalled by Stop while running
  bool exit_expected = false;  // signalled on purpose by the owner (ExpectExit)

  ~Child() {
    if (pidfd >= 0) ::close(pidfd);
    if (out_fd >= 0) ::close(out_fd);
  }
  void CloseOutput() {
    if (out_fd >= 0) ::close(out_fd);
    out_fd = -1;
    if (!partial.empty()) lines.push_back(std::exchange(partial, std::string()));
  }
};

ProcessSupervisor::ProcessSupervisor(std::string group, std::chrono::milliseconds stop_grace, size_t tail_lines)
    : group_(std::move(group)), stop_grace_(stop_grace), tail_lines_(tail_lines) {}

ProcessSupervisor::~ProcessSupervisor() { Stop(); }

Result<size_t> ProcessSupervisor::StartLogged(const std::string& name, const std::vector<std::string>& argv,
                                              const std::string& log_path) {
  return Add(name, argv, log_path, false);
}

Result<size_t> ProcessSupervisor::StartCaptured(const std::string& name, const std::vector<std::string>& argv) {
  return Add(name, argv, "", true);
}

Result<size_t> ProcessSupervisor::Add(const std::string& name, const std::vector<std::string>& argv,
                                      const std::string& log_path, bool capture) {
  auto c = std::make_unique<Child>();
  c->name = name;
  c->log_path = log_path;
  c->capture = capture;
  Result<std::unique_ptr<ChildProcess>> proc = NotFound("");
  if (capture) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return IoError(group_ + ": " + name + ": pipe: " + ErrnoMessage(errno));
    proc = ChildProcess::StartWithOutput(argv, fds[1], -1);
    ::close(fds[1]);
    if (proc.ok()) {
      ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
      c->out_fd = fds[0];
    } else {
      ::close(fds[0]);
    }
  } else {
    proc = ChildProcess::StartLogged(argv, log_path);
  }
  if (!proc.ok()) return proc.status().WithContext(group_ + ": " + name);
  c->proc = std::move(*proc);
  c->pid = c->proc->pid();
  c->started = SteadyClock::now();
  c->pidfd = OpenPidfd(c->pid);  // before any reaping, so it names this child
  children_.push_back(std::move(c));
  return children_.size() - 1;
}

const std::string& ProcessSupervisor::name(size_t index) const { return children_.at(index)->name; }
pid_t ProcessSupervisor::pid(size_t index) const { return children_.at(index)->pid; }
std::optional<int> ProcessSupervisor::exit_code(size_t index) const { return children_.at(index)->exit; }
const std::vector<std::string>& ProcessSupervisor::Lines(size_t index) const { return children_.at(index)->lines; }

void ProcessSupervisor::ReadOutput(Child& c) {
  char buf[16 << 10];
  while (c.out_fd >= 0) {
    const ssize_t n = ::read(c.out_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      c.CloseOutput();  // end of output (or an error: nothing more will come)
      return;
    }
    c.partial.append(buf, static_cast<size_t>(n));
    size_t begin = 0;
    for (size_t nl; (nl = c.partial.find('\n', begin)) != std::string::npos; begin = nl + 1) {
      c.lines.push_back(c.partial.substr(begin, nl - begin));
    }
    c.partial.erase(0, begin);
  }
}

Status ProcessSupervisor::Signal(size_t index, int signal) {
  Child& c = *children_.at(index);
  if (c.exit) {
    return FailedPrecondition(group_ + ": " + c.name + " (pid " + std::to_string(c.pid) +
                              ") already exited with code " + std::to_string(*c.exit));
  }
  c.proc->Signal(signal);  // a no-op once ChildProcess reaped it
  return Status::Ok();
}

Status ProcessSupervisor::ForEachThread(size_t index, const std::string& what,
                                        const std::function<int(pid_t)>& change) {
  Child& c = *children_.at(index);
  if (c.exit) {
    return FailedPrecondition(group_ + ": " + c.name + " (pid " + std::to_string(c.pid) +
                              ") already exited with code " + std::to_string(*c.exit));
  }
  std::error_code ec;
  int threads = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(c.pid) + "/task", ec)) {
    const pid_t tid = static_cast<pid_t>(std::atol(task.path().filename().c_str()));
    if (tid <= 0) continue;
    if (change(tid) != 0 && errno != ESRCH) {
      const int err = errno;
      return IoError(group_ + ": cannot " + what + " of " + c.name + " (pid " + std::to_string(c.pid) + ", thread " +
                     std::to_string(tid) + "): " + std::strerror(err));
    }
    ++threads;
  }
  if (ec || threads == 0) {
    return FailedPrecondition(group_ + ": " + c.name + " (pid " + std::to_string(c.pid) + ") has no threads to " +
                              what + (ec ? " (" + ec.message() + ")" : ""));
  }
  return Status::Ok();
}

Status ProcessSupervisor::SetNice(size_t index, int nice) {
  return ForEachThread(index, "set the nice value to " + std::to_string(nice), [nice](pid_t tid) {
    // Back to the normal class first (from SCHED_IDLE, SetIdle's).
    const sched_param normal{};
    if (::sched_getscheduler(tid) != SCHED_OTHER && ::sched_setscheduler(tid, SCHED_OTHER, &normal) != 0) return -1;
    return ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice);
  });
}

Status ProcessSupervisor::SetIdle(size_t index) {
  return ForEachThread(index, "set the scheduling class to SCHED_IDLE", [](pid_t tid) {
    const sched_param idle{};
    return ::sched_setscheduler(tid, SCHED_IDLE, &idle);
  });
}

void ProcessSupervisor::ExpectExit(size_t index) { children_.at(index)->exit_expected = true; }

Result<int> ProcessSupervisor::WaitForExit(size_t index, Deadline deadline) {
  const Child& c = *children_.at(index);
  while (true) {
    Poll();
    if (c.exit) return *c.exit;
    if (deadline.Expired()) return DeadlineExceeded(group_ + ": " + c.name + " still running at the deadline");
    WaitForActivity(deadline);
  }
}

double ProcessSupervisor::RunSeconds(size_t index) const {
  const Child& c = *children_.at(index);
  return std::chrono::duration<double>((c.exit ? c.ended : SteadyClock::now()) - c.started).count();
}

bool ProcessSupervisor::Poll() {
  bool all = true;
  for (auto& c : children_) {
    ReadOutput(*c);
    if (c->exit) continue;
    c->exit = c->proc->TryWait();
    if (!c->exit) {
      all = false;
      continue;
    }
    c->ended = SteadyClock::now();
    c->exit_order = ++exits_observed_;
    if (c->pidfd >= 0) ::close(c->pidfd);
    c->pidfd = -1;
  }
  return all;
}

void ProcessSupervisor::WaitForActivity(Deadline until) {
  std::vector<pollfd> fds;
  bool blind = false;
  for (auto& c : children_) {
    if (!c->exit) {
      if (c->pidfd >= 0) {
        fds.push_back({c->pidfd, POLLIN, 0});
      } else {
        blind = true;
      }
    }
    if (c->out_fd >= 0) fds.push_back({c->out_fd, POLLIN, 0});
  }
  auto wait = until.Remaining();
  if (blind) wait = std::min<std::chrono::nanoseconds>(wait, kBlindPollInterval);
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
  ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(ms, 1 << 30)));  // EINTR: the caller re-checks
}

std::optional<ChildFailure> ProcessSupervisor::FailureOf(const Child& c) const {
  if (c.exit_expected) return std::nullopt;
  return ExitOf(c);
}

std::optional<ChildFailure> ProcessSupervisor::ExitReport(size_t index) const { return ExitOf(*children_.at(index)); }

std::optional<ChildFailure> ProcessSupervisor::ExitOf(const Child& c) const {
  if (!c.exit || *c.exit == 0 || c.stopped) return std::nullopt;
  ChildFailure f;
  f.name = c.name;
  f.exit_code = *c.exit;
  f.log_path = c.log_path;
  if (c.capture) {
    std::vector<std::string> all = c.lines;
    if (!c.partial.empty()) all.push_back(c.partial);
    const size_t from = all.size() > tail_lines_ ? all.size() - tail_lines_ : 0;
    f.last_lines.assign(all.begin() + static_cast<std::ptrdiff_t>(from), all.end());
  } else {
    f.last_lines = LastLinesOfFile(c.log_path, tail_lines_);
  }
  return f;
}

std::optional<ChildFailure> ProcessSupervisor::EarliestFailure() const {
  const Child* first = nullptr;
  for (const auto& c : children_) {
    if (FailureOf(*c) && (!first || c->exit_order < first->exit_order)) first = c.get();
  }
  return first ? FailureOf(*first) : std::nullopt;
}

std::optional<ChildFailure> ProcessSupervisor::FirstFailure() {
  Poll();
  return EarliestFailure();
}

Result<std::string> ProcessSupervisor::WaitForLine(size_t index, std::string_view text, Deadline deadline) {
  Child& c = *children_.at(index);
  if (!c.capture) return FailedPrecondition(group_ + ": " + c.name + " has no captured output");
  size_t scanned = 0;
  while (true) {
    Poll();
    for (; scanned < c.lines.size(); ++scanned) {
      if (c.lines[scanned].find(text) != std::string::npos) return c.lines[scanned];
    }
    if (c.exit && c.out_fd < 0) {
      const std::optional<ChildFailure> f = FailureOf(c);
      return Unavailable(group_ + ": " + c.name + " ended before printing '" + std::string(text) +
                         "': " + (f ? f->Describe() : "it exited with code " + std::to_string(*c.exit)));
    }
    if (deadline.Expired()) {
      return DeadlineExceeded(group_ + ": " + c.name + " did not print '" + std::string(text) + "' in time");
    }
    WaitForActivity(deadline);
  }
}

Status ProcessSupervisor::WaitAll(Deadline deadline, const std::function<Status()>& interrupt) {
  while (true) {
    const bool all = Poll();
    if (EarliestFailure()) {
      Stop();  // also completes the failed child's captured output
      return Internal(group_ + ": " + EarliestFailure()->Describe());
    }
    if (all) {
      Stop();  // nobody to signal: closes the captured output once it ended
      return Status::Ok();
    }
    if (interrupt) {
      Status st = interrupt();
      if (!st.ok()) {
        Stop();
        return st;
      }
    }
    if (deadline.Expired()) {
      std::string running;
      for (const auto& c : children_) {
        if (!c->exit) running += (running.empty() ? "" : ", ") + c->name;
      }
      Stop();
      return DeadlineExceeded(group_ + ": " + running + " still running at the deadline");
    }
    WaitForActivity(interrupt ? deadline.Earlier(Deadline::After(kInterruptInterval)) : deadline);
  }
}

void ProcessSupervisor::Stop() {
  bool signalled = false;
  for (auto& c : children_) {
    if (c->exit) continue;
    c->proc->Signal(SIGTERM);
    c->stopped = true;
    signalled = true;
  }
  if (signalled) {
    const Deadline grace = Deadline::After(stop_grace_);
    while (!Poll() && !grace.Expired()) WaitForActivity(grace);
    for (auto& c : children_) {
      if (c->exit) continue;
      c->proc->Signal(SIGKILL);
      c->exit = c->proc->Wait();
      c->ended = SteadyClock::now();
      c->exit_order = ++exits_observed_;
      if (c->pidfd >= 0) ::close(c->pidfd);
      c->pidfd = -1;
    }
  }
  // Everyone is reaped; read what their pipes still hold.
  const Deadline drain = Deadline::After(kDrainLimit);
  while (true) {
    bool open = false;
    for (auto& c : children_) {
      ReadOutput(*c);
      open |= c->out_fd >= 0;
    }
    if (!open) break;
    if (drain.Expired()) {
      for (auto& c : children_) c->CloseOutput();  // a grandchild holds the pipe: stop listening
      break;
    }
    WaitForActivity(drain);
  }
}

}  // namespace tenax

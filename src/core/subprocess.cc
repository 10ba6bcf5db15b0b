#include "tenax/core/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "tenax/core/files.h"

extern char** environ;

namespace tenax {

namespace {
int WaitForExit(pid_t pid) {
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}
}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::Start(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("ChildProcess: empty argv");
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return IoError("pipe: " + ErrnoMessage(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    return NotFound(argv[0] + ": cannot start: " + ErrnoMessage(rc));
  }
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->out_fd_ = pipe_fds[0];
  return child;
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::StartLogged(const std::vector<std::string>& argv,
                                                                const std::string& log_path) {
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return IoError(log_path + ": cannot open for the child's output: " + ErrnoMessage(errno));
  auto child = StartWithOutput(argv, log_fd, log_fd);
  ::close(log_fd);
  return child;
}

namespace {
// argv0 itself when it names a path, else the first executable match in PATH.
std::optional<std::string> FindProgram(const std::string& argv0) {
  if (argv0.find('/') != std::string::npos) return argv0;
  const char* path = std::getenv("PATH");
  const std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";
    const std::string candidate = dir + "/" + argv0;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    begin = end + 1;
  }
  return std::nullopt;
}
}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::StartWithOutput(const std::vector<std::string>& argv, int stdout_fd,
                                                                    int stderr_fd) {
  if (argv.empty()) return InvalidArgument("ChildProcess: empty argv");
  // Everything the child needs is prepared here: between fork and exec only
  // async-signal-safe calls are allowed (other threads may hold malloc's lock).
  const std::optional<std::string> program = FindProgram(argv[0]);
  if (!program) return NotFound(argv[0] + ": cannot start: not found in PATH");
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  sigset_t no_signals;
  sigemptyset(&no_signals);
  // The child reports a failed exec through this pipe; a successful exec
  // closes it (O_CLOEXEC), so the parent reads end of file.
  int exec_error[2];
  if (::pipe2(exec_error, O_CLOEXEC) != 0) return IoError("pipe: " + ErrnoMessage(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(exec_error[0]);
    ::close(exec_error[1]);
    return IoError("fork: " + ErrnoMessage(err));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::sigprocmask(SIG_SETMASK, &no_signals, nullptr);
    if (stdout_fd >= 0) ::dup2(stdout_fd, STDOUT_FILENO);
    if (stderr_fd >= 0) ::dup2(stderr_fd, STDERR_FILENO);
    ::execv(program->c_str(), cargv.data());
    const int err = errno;
    [[maybe_unused]] ssize_t n = ::write(exec_error[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(exec_error[1]);
  int err = 0;
  ssize_t n = 0;
  do {
    n = ::read(exec_error[0], &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  ::close(exec_error[0]);
  if (n == static_cast<ssize_t>(sizeof err)) {
    WaitForExit(pid);
    return NotFound(*program + ": cannot start: " + ErrnoMessage(err));
  }
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  return child;
}

std::optional<int> ChildProcess::TryWait() {
  if (pid_ <= 0) return exit_code_;
  int wstatus = 0;
  pid_t r = ::waitpid(pid_, &wstatus, WNOHANG);
  if (r == 0 || (r < 0 && errno == EINTR)) return std::nullopt;
  exit_code_ = r < 0 ? -1 : (WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus));
  pid_ = -1;
  return exit_code_;
}

void ChildProcess::Signal(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    WaitForExit(pid_);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

Result<std::string> ChildProcess::ReadLine() {
  if (out_fd_ < 0) return NotFound("child " + std::to_string(pid_) + " has no output pipe");
  char buf[4096];
  while (true) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    ssize_t n = ::read(out_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return NotFound("child " + std::to_string(pid_) + " closed its output");
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

std::string ChildProcess::TakeRemainder() { return std::exchange(buffer_, std::string()); }

int ChildProcess::Wait() {
  if (pid_ > 0) {
    exit_code_ = WaitForExit(pid_);
    pid_ = -1;
  }
  return exit_code_;
}

Result<ProcessOutput> RunAndCapture(const std::vector<std::string>& argv) {
  TENAX_ASSIGN_OR_RETURN(auto child, ChildProcess::Start(argv));
  ProcessOutput out;
  while (true) {
    auto line = child->ReadLine();
    if (!line.ok()) break;  // end of output
    out.stdout_text += *line + "\n";
  }
  out.stdout_text += child->TakeRemainder();
  out.exit_code = child->Wait();
  return out;
}

}  // namespace tenax

#include "tenax/core/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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
  if (argv.empty()) return InvalidArgument("ChildProcess: empty argv");
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return IoError(log_path + ": cannot open for the child's output: " + ErrnoMessage(errno));
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(log_fd);
    return IoError("fork: " + ErrnoMessage(err));
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(log_fd);
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

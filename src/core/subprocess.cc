#include "tenax/core/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
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

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    WaitForExit(pid_);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

Result<std::string> ChildProcess::ReadLine() {
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

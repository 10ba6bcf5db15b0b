// Running a child program and collecting its standard output (benchmarks run
// their peers this way). The child inherits stderr, so its diagnostics reach
// the user directly.
#pragma once

#include <optional>

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax {

struct ProcessOutput {
  int exit_code = 0;  // 128 + signal number if killed by a signal
  std::string stdout_text;
};

// Starts argv[0] (searched in PATH) and waits for it. NotFound if it cannot
// be started; a non-zero exit is reported in exit_code, not as an error.
Result<ProcessOutput> RunAndCapture(const std::vector<std::string>& argv);

// A running child whose stdout is read line by line. The destructor sends
// SIGKILL and reaps the child if it is still running, so no child outlives
// its owner's scope (a crash of the owner is the one way to orphan it).
class ChildProcess {
 public:
  static Result<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv);
  // Starts argv[0] (a path, or a name searched in PATH) with stdout and
  // stderr appended to `log_path` (no pipe: ReadLine reports end of output).
  static Result<std::unique_ptr<ChildProcess>> StartLogged(const std::vector<std::string>& argv,
                                                           const std::string& log_path);
  // Starts argv[0] (a path, or a name searched in PATH) with stdout and
  // stderr on the given descriptors (-1: inherited; the caller keeps its
  // descriptors). NotFound, with the reason, if the program cannot be
  // executed. The child gets SIGTERM when the *thread* that started it ends
  // (PR_SET_PDEATHSIG), so a killed owner leaves no orphans: start children
  // from a thread that outlives them.
  static Result<std::unique_ptr<ChildProcess>> StartWithOutput(const std::vector<std::string>& argv, int stdout_fd,
                                                               int stderr_fd);
  // Non-blocking: the exit code if the child has exited, else nullopt.
  std::optional<int> TryWait();
  // Sends `signal` if the child is still running.
  void Signal(int signal);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The next line of stdout (without the newline); NotFound at end of output.
  Result<std::string> ReadLine();
  // Output read but not yet returned as a line (a last line without '\n').
  std::string TakeRemainder();
  // Waits for exit and returns the exit code (128 + signal if killed).
  int Wait();
  pid_t pid() const { return pid_; }

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string buffer_;
  int exit_code_ = -1;
};

}  // namespace tenax

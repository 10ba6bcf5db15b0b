// A named group of child processes started, watched and stopped together:
// the local launcher's coordinator and workers, a benchmark's ranks.
//
// Output: StartLogged appends a child's stdout and stderr to a log file;
// StartCaptured keeps its stdout as lines in memory (stderr is inherited, so
// its diagnostics reach the user). A failure is reported with the last lines
// of the child's log or captured output.
//
// Ownership and failure: the supervisor owns its children. Stop (also run
// by the destructor) sends SIGTERM, then SIGKILL to whoever still runs after
// the grace period, and reaps everyone: no child outlives the supervisor.
// Children also get SIGTERM when the thread that started them ends
// (PR_SET_PDEATHSIG), so even a SIGKILLed owner leaves no orphans. Children
// may be started at any time (a replacement after others exited), and the
// owner may signal one on purpose (Signal, ExpectExit: fault injection).
//
// Threading: one owner thread, which must outlive the children it starts.
// Captured output is read while the owner is inside a call (Poll,
// FirstFailure, WaitForLine, WaitAll, Stop): a child that writes more than a
// pipe holds (64 KiB) between calls waits until the next one. Exits are
// noticed without polling where the kernel has pidfds (Linux >= 5.3).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/core/deadline.h"
#include "tenax/core/status.h"

namespace tenax {

// A child that exited with a non-zero code on its own (not stopped by the
// supervisor, nor expected to exit: ExpectExit).
struct ChildFailure {
  std::string name;
  int exit_code = 0;                    // 128 + signal number if killed by a signal
  std::string log_path;                 // "" for captured output
  std::vector<std::string> last_lines;  // the end of its log or captured output
  // "<name> exited with code N; its log (<path>) ends:\n    <line>..."
  std::string Describe() const;
};

class ProcessSupervisor {
 public:
  // `group` names the children in messages ("job small", "allreduce run").
  // `stop_grace`: how long Stop waits after SIGTERM before SIGKILL.
  // `tail_lines`: how many last lines a failure reports.
  explicit ProcessSupervisor(std::string group, std::chrono::milliseconds stop_grace = std::chrono::seconds(5),
                             size_t tail_lines = 5);
  ~ProcessSupervisor();
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Starts argv[0] (a path, or a name searched in PATH) as child `name`
  // with stdout and stderr appended to `log_path`. Returns its index (start
  // order). NotFound if the program cannot be executed, IoError if the log
  // cannot be opened; the status names the child.
  Result<size_t> StartLogged(const std::string& name, const std::vector<std::string>& argv,
                             const std::string& log_path);
  // As StartLogged, but stdout is captured line by line (see Lines).
  Result<size_t> StartCaptured(const std::string& name, const std::vector<std::string>& argv);

  size_t size() const { return children_.size(); }
  const std::string& name(size_t index) const;
  // The pid it was started with (kept after it was reaped).
  pid_t pid(size_t index) const;
  // How long it ran: from its start until its exit was observed (or now).
  // The launcher's process-seconds for cost (job/price_table.h).
  double RunSeconds(size_t index) const;
  // Its exit code (128 + signal if killed) once an exit was observed.
  std::optional<int> exit_code(size_t index) const;
  // Its captured stdout so far, one entry per line (a last line without a
  // newline included once the pipe closed). Complete after WaitAll or Stop.
  const std::vector<std::string>& Lines(size_t index) const;

  // Sends `signal` to child `index` (SIGSTOP, SIGCONT, SIGKILL...): a fault
  // injected on purpose. FailedPrecondition naming the child once its exit
  // was observed (its pid may belong to someone else by then); a child that
  // exited but was not reaped yet ignores it.
  Status Signal(size_t index, int signal);
  // Sets the nice value of every thread of child `index` (Linux keeps one
  // per thread; a process started under `nice` passes it to every thread it
  // makes). Raising it is always allowed; lowering it needs CAP_SYS_NICE or
  // RLIMIT_NICE: IoError naming the child and the thread otherwise.
  // FailedPrecondition once its exit was observed. A thread in another
  // scheduling class (SCHED_IDLE: SetIdle, or `chrt --idle`) is moved back
  // to the normal one (SCHED_OTHER) first; from SCHED_IDLE that is allowed
  // within RLIMIT_NICE.
  Status SetNice(size_t index, int nice);
  // Moves every thread of child `index` to SCHED_IDLE: it runs only on a
  // core nothing else wants, and any waking normal thread preempts it at
  // once (nice 19 still takes a share, and its wake-ups are not preempted
  // at once). Always allowed; failures as SetNice's.
  Status SetIdle(size_t index);
  // From now on child `index`'s exit, whatever its code or signal, is not a
  // failure for FirstFailure and WaitAll: its owner signalled it on purpose.
  // WaitAll still waits for it to exit (a SIGSTOPped child needs SIGKILL).
  void ExpectExit(size_t index);
  // Waits until child `index` exits and returns its exit code (128 + signal
  // if killed), reading output meanwhile; DeadlineExceeded naming it at
  // `deadline` (it keeps running).
  Result<int> WaitForExit(size_t index, Deadline deadline);

  // Non-blocking: reaps children that exited and reads pending output.
  // True when every child has exited.
  bool Poll();
  // Blocks until a child exits, captured output arrives, or `until` (then
  // Poll notes what happened): for owners with timers of their own.
  void WaitForActivity(Deadline until);
  // The first child, in the order exits were observed (start order within
  // one Poll), that failed on its own; nullopt if none. Polls first.
  std::optional<ChildFailure> FirstFailure();
  // Child `index`'s exit as a ChildFailure (its code and the end of its log)
  // when it exited with a non-zero code and the supervisor did not stop it,
  // even if its exit was expected (ExpectExit): an elastic job's launcher
  // tells a worker's own failure from a planned kill. nullopt otherwise.
  std::optional<ChildFailure> ExitReport(size_t index) const;
  // Waits until child `index` printed a line (captured output) containing
  // `text` and returns that line. Unavailable (with the failure) if the
  // child exited first, DeadlineExceeded at `deadline`; the others are left
  // running either way.
  Result<std::string> WaitForLine(size_t index, std::string_view text, Deadline deadline);
  // Waits until every child has exited. OK when all exited with code 0.
  // Otherwise stops the others (Stop) and returns: Internal with the first
  // failure's Describe(); the status of `interrupt` (consulted about every
  // 50 ms; may be empty) once it is not OK; or DeadlineExceeded naming the
  // children still running at `deadline`. Every child is reaped on return.
  Status WaitAll(Deadline deadline, const std::function<Status()>& interrupt = {});
  // SIGTERM to every running child, SIGKILL after the grace period to those
  // still running, then reaps all and closes their output. Idempotent.
  void Stop();

 private:
  struct Child;
  Result<size_t> Add(const std::string& name, const std::vector<std::string>& argv, const std::string& log_path,
                     bool capture);
  void ReadOutput(Child& c);
  // `change(tid)` on every thread of child `index` (-1 and errno: failed).
  Status ForEachThread(size_t index, const std::string& what, const std::function<int(pid_t)>& change);
  std::optional<ChildFailure> FailureOf(const Child& c) const;
  std::optional<ChildFailure> ExitOf(const Child& c) const;  // FailureOf, expected or not
  std::optional<ChildFailure> EarliestFailure() const;

  std::string group_;
  std::chrono::milliseconds stop_grace_;
  size_t tail_lines_;
  std::vector<std::unique_ptr<Child>> children_;
  uint64_t exits_observed_ = 0;
};

}  // namespace tenax

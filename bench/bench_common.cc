#include "bench_common.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "cli_app.h"
#include "tenax/core/blas_kernels.h"
#include "tenax/core/files.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/core/subprocess.h"
#include "tenax/net/auth.h"

namespace tenax::bench {

Result<int> FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return IoError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return IoError("cannot find a free port");
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}


using namespace std::chrono_literals;

// ------------------------------------------------------ programs and files

Result<std::string> SelfExe() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Internal("cannot find the tenax-bench binary (/proc/self/exe): " + ec.message());
  return self.string();
}

namespace {
std::filesystem::path BenchDir() {
  auto self = SelfExe();
  return self.ok() ? std::filesystem::path(*self).parent_path() : std::filesystem::path(".");
}
}  // namespace

std::string BenchFile(const std::string& name) { return (BenchDir() / "bench-files" / name).string(); }

Status ExecPython(const std::string& python, const std::vector<std::string>& script_and_args) {
  std::vector<std::string> args = {python};
  args.insert(args.end(), script_and_args.begin(), script_and_args.end());
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  ::execvp(python.c_str(), argv.data());  // a bare name is looked up on PATH
  return Unavailable("cannot run " + python + ": " + std::strerror(errno));
}

Result<std::string> FindProgram(const std::string& name, const std::string& override_path, const std::string& flag) {
  const std::string path = override_path.empty() ? (BenchDir() / name).string() : override_path;
  if (::access(path.c_str(), X_OK) != 0) {
    return NotFound(path + ": " + name + " not found or not executable (build the CMake target " + name +
                    (flag.empty() ? ")" : ", or pass " + flag + ")"));
  }
  return path;
}

Status CheckOnPath(const std::string& program, const std::string& flag) {
  if (program.find('/') != std::string::npos) {
    if (::access(program.c_str(), X_OK) == 0) return Status::Ok();
    return NotFound(program + ": not found or not executable (" + flag + ")");
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    const size_t colon = std::min(dirs.find(':', pos), dirs.size());
    const std::string dir = dirs.substr(pos, colon - pos);
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return Status::Ok();
    pos = colon + 1;
  }
  return NotFound(program + ": not found in PATH (install it, or pass " + flag + ")");
}

// ------------------------------------------------------- run environment

void UseFreshSecret() {
  std::string secret;
  while (secret.size() < 32) {
    for (unsigned char c : net::RandomNonce()) {
      secret += "0123456789abcdef"[c >> 4];
      secret += "0123456789abcdef"[c & 15];
    }
  }
  secret.resize(32);
  ::setenv(net::kSecretEnvVar, secret.c_str(), 1);
}

std::string ChooseBlasCoreForBothSides(bool keep) {
  if (const char* set = std::getenv("OPENBLAS_CORETYPE"); set != nullptr && *set != '\0') {
    return std::string(set) + " (OPENBLAS_CORETYPE was set by the caller)";
  }
  const std::string loaded = LoadedOpenBlasCore(), best = BestOpenBlasCoreForCpu();
  const std::string shown = loaded.empty() ? "unknown" : loaded;
  if (OpenBlasAdvice(loaded, best).empty()) return shown + " (OpenBLAS's own pick)";
  if (keep) return shown + " (kept by --keep-blas-core; the CPU could run " + best + ")";
  ::setenv("OPENBLAS_CORETYPE", best.c_str(), 1);
  return best + " (OpenBLAS fell back to " + loaded + " on this CPU; its flags run " + best + ")";
}

Result<ScratchDir> ScratchDir::Create(const std::string& prefix) {
  std::string tmpl = std::filesystem::temp_directory_path().string() + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return IoError(tmpl + ": mkdtemp: " + ErrnoMessage(errno));
  return ScratchDir(tmpl);
}

ScratchDir::ScratchDir(ScratchDir&& other) noexcept : path_(std::exchange(other.path_, std::string())) {}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

// ------------------------------------------------------- peer processes

struct PeerGroup::Child {
  std::string name;
  pid_t pid = -1;
  std::unique_ptr<ChildProcess> proc;
  std::thread reader;
  std::mutex mu;
  std::condition_variable changed;  // a line arrived or the output closed
  std::vector<std::string> lines;   // guarded by mu
  bool output_closed = false;       // guarded by mu
  bool exited = false;
  int exit_code = -1;

  // Has the child exited? Looks without reaping (WNOWAIT), so the pid stays
  // ours to signal until Reap.
  bool Poll() {
    if (exited || !proc) return true;
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      exited = true;  // ECHILD: already reaped
      return true;
    }
    if (info.si_pid == 0) return false;
    exited = true;
    exit_code = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
    return true;
  }

  std::string ExitText() const {
    return "exited with status " + std::to_string(exit_code) +
           (exit_code > 128 ? " (signal " + std::to_string(exit_code - 128) + ")" : "");
  }
};

PeerGroup::PeerGroup() = default;
PeerGroup::~PeerGroup() { Stop(); }

Status PeerGroup::Start(const std::string& name, const std::vector<std::string>& argv) {
  auto proc = ChildProcess::Start(argv);
  if (!proc.ok()) return proc.status().WithContext(name);
  auto c = std::make_unique<Child>();
  c->name = name;
  c->pid = (*proc)->pid();
  c->proc = std::move(*proc);
  Child* raw = c.get();
  c->reader = std::thread([raw] {
    while (true) {
      auto line = raw->proc->ReadLine();
      if (!line.ok()) break;
      std::lock_guard<std::mutex> lock(raw->mu);
      raw->lines.push_back(std::move(*line));
      raw->changed.notify_all();
    }
    std::string rest = raw->proc->TakeRemainder();
    std::lock_guard<std::mutex> lock(raw->mu);
    if (!rest.empty()) raw->lines.push_back(std::move(rest));
    raw->output_closed = true;
    raw->changed.notify_all();
  });
  children_.push_back(std::move(c));
  return Status::Ok();
}

Result<std::string> PeerGroup::WaitForLine(size_t i, const std::function<bool(const std::string&)>& match,
                                           Deadline deadline) {
  Child& c = *children_.at(i);
  size_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(c.mu);
      for (; seen < c.lines.size(); ++seen) {
        if (match(c.lines[seen])) return c.lines[seen];
      }
      if (c.output_closed) break;
      c.changed.wait_for(lock, 10ms);
    }
    if (StopRequested()) {
      Stop();
      return Cancelled("stopped by signal " + std::to_string(StopSignal()));
    }
    if (deadline.Expired()) {
      Stop();
      return DeadlineExceeded(c.name + " did not print the expected line in time");
    }
  }
  Stop();
  return Internal(c.name + " closed its output without the expected line (" + c.ExitText() + ")");
}

Status PeerGroup::Wait(Deadline deadline, const std::string& limit) {
  while (true) {
    bool all = true;
    for (auto& c : children_) {
      if (!c->Poll()) {
        all = false;
      } else if (c->exit_code != 0) {
        Stop();
        return Internal(c->name + " " + c->ExitText());
      }
    }
    if (all) {
      Reap();
      return Status::Ok();
    }
    if (StopRequested()) {
      Stop();
      return Cancelled("stopped by signal " + std::to_string(StopSignal()));
    }
    if (deadline.Expired()) {
      Stop();
      return DeadlineExceeded("still running at " + limit);
    }
    std::this_thread::sleep_for(10ms);
  }
}

std::vector<std::string> PeerGroup::Lines(size_t i) {
  Child& c = *children_.at(i);
  std::lock_guard<std::mutex> lock(c.mu);
  return c.lines;
}

void PeerGroup::Signal(int signal) {
  for (auto& c : children_) {
    if (!c->Poll()) ::kill(c->pid, signal);  // not reaped yet: the pid is still ours
  }
}

void PeerGroup::WaitExited(Deadline deadline) {
  while (!deadline.Expired()) {
    bool all = true;
    for (auto& c : children_) all &= c->Poll();
    if (all) return;
    std::this_thread::sleep_for(1ms);
  }
}

void PeerGroup::Stop() {
  Signal(SIGTERM);
  WaitExited(Deadline::After(3s));
  // A child that ignored SIGTERM is not gone the instant SIGKILL is sent:
  // without this wait Reap would skip it and its reader thread would still
  // be joinable when the group is destroyed (std::terminate).
  Signal(SIGKILL);
  WaitExited(Deadline::After(10s));
  Reap();
}

bool PeerGroup::Exited(size_t i) { return children_.at(i)->Poll(); }

void PeerGroup::Kill() {
  Signal(SIGKILL);
  WaitExited(Deadline::After(10s));
  Reap();
}

// For exited children: join the reader (the pipe is closed) and reap.
void PeerGroup::Reap() {
  for (auto& c : children_) {
    if (!c->proc || !c->Poll()) continue;
    if (c->reader.joinable()) c->reader.join();
    c->proc->Wait();
    c->proc.reset();
  }
}

Result<std::vector<std::string>> RunToEnd(const std::string& name, const std::vector<std::string>& argv,
                                          Deadline deadline) {
  PeerGroup group;
  TENAX_RETURN_IF_ERROR(group.Start(name, argv));
  TENAX_RETURN_IF_ERROR(group.Wait(deadline));
  return group.Lines(0);
}

// ----------------------------------------------------------------- report

std::vector<nlohmann::json> JsonObjectLines(const std::vector<std::string>& lines) {
  std::vector<nlohmann::json> out;
  for (const std::string& line : lines) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

Status WriteJsonReport(const std::string& path, const nlohmann::json& report) {
  if (path.empty()) return Status::Ok();
  return WriteFileAtomic(path, report.dump(2) + "\n");
}

// ---------------------------------------------------------------- command

CLI::App* AddBenchmark(CLI::App& bench, const std::string& name, const std::string& description,
                       const std::string& quick_help, bool& quick, std::string& json_path, std::function<Status()> run,
                       int& exit_code) {
  CLI::App* cmd = bench.add_subcommand(name, description);
  cmd->add_flag("--quick", quick, quick_help);
  cmd->add_option("--json", json_path, "Write the result as JSON to FILE")->type_name("FILE");
  cmd->callback([name, run = std::move(run), &exit_code] {
    InitLogging("bench");
    InstallStopHandlers();
    const Status st = run();
    exit_code = st.ok() ? 0 : cli::ReportError("bench " + name, st);
  });
  return cmd;
}

void AddTrainingFlags(CLI::App& cmd, TrainingFlags& flags, const TrainingFlagsHelp& help) {
  cmd.add_option("--model", flags.model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}))->capture_default_str();
  cmd.add_option("--batch-size", flags.batch_size, help.batch_size)
      ->check(CLI::Range(int64_t{1}, help.max_batch_size))
      ->capture_default_str();
  cmd.add_option("--lr", flags.lr, help.lr)->check(CLI::Range(1e-9, 10.0))->capture_default_str();
  cmd.add_option("--rounds", flags.rounds, help.rounds)->check(CLI::Range(int64_t{1}, int64_t{100}));
  cmd.add_option("--data", flags.data_dir, "Fashion-MNIST directory")->capture_default_str();
  cmd.add_option("--python", flags.python, "Python interpreter with torch")->capture_default_str();
  cmd.add_option("--script", flags.script, help.script)->capture_default_str();
  cmd.add_option("--timeout", flags.timeout_seconds, help.timeout)
      ->check(CLI::Range(int64_t{1}, int64_t{86400}))
      ->capture_default_str();
}

Status RunAlternatingRounds(int64_t rounds, TrainingSide& tenax, TrainingSide& peer) {
  for (int64_t r = 1; r <= rounds; ++r) {
    for (TrainingSide* side : {&tenax, &peer}) {
      if (StopRequested()) return Cancelled("benchmark stopped");
      spdlog::info("round {}/{}: {} ({}) ...", r, rounds, side->name, side->details);
      TENAX_ASSIGN_OR_RETURN(double sps, side->run());
      side->samples_per_second.push_back(sps);
      spdlog::info("round {}/{}: {} {:.0f} samples/s", r, rounds, side->name, sps);
    }
  }
  return Status::Ok();
}

nlohmann::json TrainingReport(const std::string& benchmark, bool quick, const TrainingFlags& flags,
                              const TrainingSide& tenax, const TrainingSide& peer) {
  const double t = Median(tenax.samples_per_second), p = Median(peer.samples_per_second);
  return {{"benchmark", benchmark},
          {"quick", quick},
          {"model", flags.model},
          {"rounds", flags.rounds},
          {"optimizer", "sgd"},
          {"lr", flags.lr},
          {"momentum", 0.9},
          {tenax.name + "_samples_per_second", t},
          {peer.name + "_samples_per_second", p},
          {"ratio", t / p},
          {tenax.name + "_rounds", tenax.samples_per_second},
          {peer.name + "_rounds", peer.samples_per_second}};
}

}  // namespace tenax::bench

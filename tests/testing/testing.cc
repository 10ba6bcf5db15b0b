#include "testing.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <cstring>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace tenax::testing {
namespace {

pid_t Spawn(const std::vector<std::string>& argv, int out_fd, int err_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  if (err_fd >= 0) posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
  return pid;
}

using Clock = std::chrono::steady_clock;

int ExitCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// Milliseconds left until `deadline` for poll(), rounded up so that a poll
// that times out ends at or after the deadline.
int MillisUntil(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

// Waits for pid's exit until `deadline`; nullopt if it is still running then.
// A pidfd makes the wait a poll with a timeout (no sleeping loop).
std::optional<int> WaitExitUntil(pid_t pid, Clock::time_point deadline) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  std::optional<int> code;
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      code = ExitCode(status);
      break;
    }
    if (r < 0 && errno != EINTR) {
      code = -1;
      break;
    }
    if (r == 0 && Clock::now() >= deadline) break;
    if (pidfd >= 0) {
      pollfd p = {pidfd, POLLIN, 0};
      ::poll(&p, 1, MillisUntil(deadline));
    } else {
      ::poll(nullptr, 0, std::min(50, MillisUntil(deadline)));  // kernel without pidfd: bounded re-checks
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  return code;
}

// SIGKILL cannot be ignored, so the blocking reap after it ends.
int KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return ExitCode(status);
}

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// "180 s", "0.3 s".
std::string Seconds(std::chrono::milliseconds d) {
  std::ostringstream s;
  s << std::setprecision(3) << std::chrono::duration<double>(d).count() << " s";
  return s.str();
}

}  // namespace

ScratchDir::ScratchDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "tenax";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  path_ = (std::filesystem::temp_directory_path() / ("tenax-" + name + "-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<uint8_t> Gzip(const std::vector<uint8_t>& raw) {
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::vector<uint8_t> out(deflateBound(&zs, raw.size()) + 64);
  zs.next_in = const_cast<Bytef*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::vector<uint8_t> MakeIdx(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    out.push_back(static_cast<uint8_t>(d >> 24));
    out.push_back(static_cast<uint8_t>(d >> 16));
    out.push_back(static_cast<uint8_t>(d >> 8));
    out.push_back(static_cast<uint8_t>(d));
  }
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::remove(path);  // may be a symlink into the dataset
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::string ReadText(const std::string& path) {
  auto b = ReadBytes(path);
  return std::string(b.begin(), b.end());
}

int FlipLastByteOf(const std::string& path, const std::string& marker) {
  std::vector<uint8_t> bytes = ReadBytes(path);
  int flipped = 0;
  for (size_t at = 0; !marker.empty() && at + marker.size() <= bytes.size(); ++at) {
    if (std::memcmp(bytes.data() + at, marker.data(), marker.size()) != 0) continue;
    bytes[at + marker.size() - 1] ^= 0x01;
    ++flipped;
  }
  if (flipped > 0) WriteBytes(path, bytes);
  return flipped;
}

void LinkFashionMnist(const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                        "t10k-labels-idx1-ubyte.gz"}) {
    std::filesystem::create_symlink(std::string(kFashionMnistDir) + "/" + f, dir + "/" + f);
  }
}

ProcessResult RunProcess(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  pid_t pid = Spawn(argv, out_pipe[1], err_pipe[1]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ProcessResult r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[4096];
  while (open_fds > 0) {
    const int ready = ::poll(fds, 2, MillisUntil(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (ready == 0) {
      if (Clock::now() < deadline) continue;
      r.timed_out = true;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  std::optional<int> code;
  if (!r.timed_out) code = WaitExitUntil(pid, deadline);
  if (code) {
    r.exit_code = *code;
  } else {
    r.timed_out = true;
    r.exit_code = KillAndReap(pid);
    ADD_FAILURE() << CommandLine(argv) << ": did not finish within " << Seconds(timeout)
                  << " s; killed it.\nstdout so far:\n"
                  << r.out << "\nstderr so far:\n"
                  << r.err;
  }
  return r;
}

struct Child::Shared {
  std::mutex mu;
  std::condition_variable changed;
  std::string received;  // every byte read so far
  size_t consumed = 0;   // received[0, consumed) is in err_
  bool eof = false;
};

Child::Child(const std::vector<std::string>& argv) : command_(CommandLine(argv)), shared_(std::make_unique<Shared>()) {
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0 || ::pipe2(wake_, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  pid_ = Spawn(argv, devnull, err_pipe[1]);
  ::close(devnull);
  ::close(err_pipe[1]);
  err_fd_ = err_pipe[0];
  reader_ = std::thread([this] { Drain(); });
}

Child::~Child() {
  if (pid_ > 0) KillAndReap(pid_);
  char one = 1;
  (void)!::write(wake_[1], &one, 1);  // a grandchild may still hold the pipe open
  if (reader_.joinable()) reader_.join();
  for (int fd : {err_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void Child::Drain() {
  char buf[4096];
  while (true) {
    pollfd p[2] = {{err_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    const int ready = ::poll(p, 2, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready > 0 && (p[1].revents & POLLIN)) break;
    ssize_t n = ready < 0 ? -1 : ::read(err_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->received.append(buf, static_cast<size_t>(n));
    shared_->changed.notify_all();
  }
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->eof = true;
  shared_->changed.notify_all();
}

void Child::Expire(const std::string& what, std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    err_ += shared_->received.substr(shared_->consumed);
    shared_->consumed = shared_->received.size();
  }
  if (pid_ > 0) {
    exit_code_ = KillAndReap(pid_);
    pid_ = -1;
  }
  ADD_FAILURE() << command_ << ": " << what << " within " << Seconds(timeout) << "; killed it.\nstderr so far:\n"
                << err_;
}

bool Child::WaitForStderrLine(const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock<std::mutex> lock(shared_->mu);
  while (true) {
    size_t nl;
    while ((nl = shared_->received.find('\n', shared_->consumed)) != std::string::npos) {
      std::string line = shared_->received.substr(shared_->consumed, nl + 1 - shared_->consumed);
      shared_->consumed = nl + 1;
      err_ += line;
      if (line.find(needle) != std::string::npos) return true;
    }
    if (shared_->eof) return false;
    if (shared_->changed.wait_until(lock, deadline) == std::cv_status::timeout &&
        shared_->received.find('\n', shared_->consumed) == std::string::npos && !shared_->eof) {
      lock.unlock();
      Expire("no stderr line containing '" + needle + "'", timeout);
      return false;
    }
  }
}

void Child::Signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

int Child::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  {
    std::unique_lock<std::mutex> lock(shared_->mu);
    const bool ended = shared_->changed.wait_until(lock, deadline, [&] { return shared_->eof; });
    err_ += shared_->received.substr(shared_->consumed);
    shared_->consumed = shared_->received.size();
    if (!ended) {
      lock.unlock();
      Expire("did not close stderr", timeout);
      return exit_code_;
    }
  }
  if (pid_ > 0) {
    std::optional<int> code = WaitExitUntil(pid_, deadline);
    if (!code) {
      Expire("did not exit", timeout);
      return exit_code_;
    }
    exit_code_ = *code;
    pid_ = -1;
  }
  return exit_code_;
}

std::string TenaxBinary() {
#ifdef TENAX_BINARY
  return TENAX_BINARY;
#else
  return "tenax";
#endif
}

std::vector<uint8_t> ImageLabelRecords(const std::vector<uint8_t>& pixels, const std::vector<uint8_t>& labels,
                                       size_t sample_bytes) {
  std::vector<uint8_t> out;
  out.reserve(labels.size() * (sample_bytes + 1));
  for (size_t i = 0; i < labels.size(); ++i) {
    out.insert(out.end(), pixels.begin() + static_cast<std::ptrdiff_t>(i * sample_bytes),
               pixels.begin() + static_cast<std::ptrdiff_t>((i + 1) * sample_bytes));
    out.push_back(labels[i]);
  }
  return out;
}

std::vector<int> ProcessesMentioning(const std::string& needle) {
  std::vector<int> pids;
  DIR* proc = opendir("/proc");
  if (!proc) return pids;
  while (dirent* e = readdir(proc)) {
    const int pid = atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (auto& c : cmd) c = c == '\0' ? ' ' : c;
    std::ifstream st("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
    const bool zombie = stat.find(") Z ") != std::string::npos;
    if (!zombie && cmd.find(needle) != std::string::npos) pids.push_back(pid);
  }
  closedir(proc);
  return pids;
}

std::string NamespacesUnavailable() {
  if (::geteuid() != 0) return "not root: network namespaces need root";
  const std::string name = "tnxcheck" + std::to_string(::getpid());
  auto add = RunProcess({"ip", "netns", "add", name});
  if (add.exit_code != 0) return "'ip netns add' failed: " + add.out + add.err;
  RunProcess({"ip", "netns", "del", name});
  return "";
}

}  // namespace tenax::testing

// Helpers shared by tenax's tests: Status/Result assertions, scratch
// directories, IDX/gzip builders and child processes that are always reaped.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tenax::testing {

// A fresh directory under $TMPDIR named after the running test; removed by
// the destructor.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<uint8_t> Gzip(const std::vector<uint8_t>& raw);
// An IDX (ubyte) file image with the given dimensions and payload.
std::vector<uint8_t> MakeIdx(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data);
void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> ReadBytes(const std::string& path);
std::string ReadText(const std::string& path);
// Flips the last byte of every occurrence of `marker` in the file (a value
// damaged on disk); returns how many it flipped.
int FlipLastByteOf(const std::string& path, const std::string& marker);

// A data directory whose four files are symlinks to the installed
// Fashion-MNIST files, so one of them can be replaced by a broken copy.
void LinkFashionMnist(const std::string& dir);
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// How long a test waits for a child by default: generous for a loaded
// machine, yet below ctest's per-test timeout (300 s) so that the test, not
// ctest, reports the hang together with the output read so far.
inline constexpr std::chrono::seconds kChildTimeout{180};

struct ProcessResult {
  int exit_code = -1;  // 128 + signal if killed
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv to completion, capturing stdout and stderr. If it has not exited
// (and closed both streams) within `timeout`, the child is killed and reaped,
// a test failure showing the output read so far is recorded, and timed_out
// is set (exit_code is then 128 + SIGKILL).
ProcessResult RunProcess(const std::vector<std::string>& argv, std::chrono::milliseconds timeout = kChildTimeout);

// A running child whose stderr is read line by line (stdout is discarded).
// A thread of its own drains the child's stderr all the time, so a child
// that logs a lot never blocks on a full pipe while the test waits on
// something else (a blocked write stalls its event loop: peers then see it
// as silent). The destructor kills (SIGKILL) and reaps the child if it is
// still running. Every wait has a deadline; on expiry the child is killed
// and reaped and a test failure naming the command and what it had
// written is recorded.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Waits until a line containing `needle` arrives (true), the stream ends
  // (false) or `timeout` passes (false; the child is killed). Lines up to
  // it are kept in stderr_text().
  bool WaitForStderrLine(const std::string& needle, std::chrono::milliseconds timeout = kChildTimeout);
  void Signal(int sig);
  // Waits for the end of the output and the exit within `timeout`; returns
  // the exit code (128 + SIGKILL if the deadline killed it).
  int Wait(std::chrono::milliseconds timeout = kChildTimeout);
  const std::string& stderr_text() const { return err_; }
  pid_t pid() const { return pid_; }

 private:
  void Drain();  // the reader thread
  void Expire(const std::string& what, std::chrono::milliseconds timeout);

  std::string command_;
  pid_t pid_ = -1;
  int err_fd_ = -1;
  int wake_[2] = {-1, -1};  // the destructor's way to stop the reader
  std::string err_;         // what the test has consumed
  int exit_code_ = -1;
  struct Shared;            // the reader's bytes, guarded
  std::unique_ptr<Shared> shared_;
  std::thread reader_;
};

// Store records as `tenax store put` makes them from an idx pair: each
// sample's `sample_bytes` pixels, then its label byte.
std::vector<uint8_t> ImageLabelRecords(const std::vector<uint8_t>& pixels, const std::vector<uint8_t>& labels,
                                       size_t sample_bytes);

// Path of the tenax binary under test (set by CMake).
std::string TenaxBinary();

// PIDs of live (not zombie) processes whose command line mentions `needle`:
// a run's children, found by the run directory in their arguments.
std::vector<int> ProcessesMentioning(const std::string& needle);

// Why network namespaces cannot be made here (not root, no `ip netns`), or
// "" when they can: tests of namespaced hosts skip with this reason.
std::string NamespacesUnavailable();

namespace internal {

// The Status of a Status or of a Result<T> (anything with .status()). Generic
// so that this header does not need tenax_core.
template <typename T>
const auto& StatusOf(const T& v) {
  if constexpr (requires { v.status(); }) {
    return v.status();
  } else {
    return v;
  }
}

template <typename T>
::testing::AssertionResult IsOk(const char* expr_text, const T& v) {
  const auto& status = StatusOf(v);
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << expr_text << " failed: " << status.ToString();
}

}  // namespace internal
}  // namespace tenax::testing

// Status/Result assertions. A failed Result in a test must fail that test with
// its message, never reach value() (which asserts and aborts the binary).
//
//   ASSERT_OK(expr);                      // expr is a Status or a Result; fatal
//   EXPECT_OK(expr);                      // non-fatal
//   ASSERT_OK_AND_ASSIGN(auto x, F());    // declares x from F()'s value, or
//                                         // fails and returns (void functions)
//   ASSIGN_OK_OR_RETURN(auto x, F(), v);  // any function: records a failure
//                                         // and `return v;` (omit v if void)
//
// In bodies run by RunThreadGroup (which return Status) prefer
// TENAX_ASSIGN_OR_RETURN: the rank's Status is returned and the test asserts
// every rank's Status with ASSERT_OK.
#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::tenax::testing::internal::IsOk, expr)
#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::tenax::testing::internal::IsOk, expr)

#define TENAX_TEST_CONCAT_INNER(a, b) a##b
#define TENAX_TEST_CONCAT(a, b) TENAX_TEST_CONCAT_INNER(a, b)

#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  TENAX_ASSERT_OK_AND_ASSIGN_IMPL(TENAX_TEST_CONCAT(tenax_test_result_, __LINE__), lhs, rexpr)
#define TENAX_ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                    \
  ASSERT_OK(tmp);                                        \
  lhs = std::move(tmp).value()

#define ASSIGN_OK_OR_RETURN(lhs, rexpr, ...) \
  TENAX_ASSIGN_OK_OR_RETURN_IMPL(TENAX_TEST_CONCAT(tenax_test_result_, __LINE__), lhs, rexpr, __VA_ARGS__)
#define TENAX_ASSIGN_OK_OR_RETURN_IMPL(tmp, lhs, rexpr, ...)                                        \
  auto tmp = (rexpr);                                                                               \
  if (const auto tenax_test_ok_ = ::tenax::testing::internal::IsOk(#rexpr, tmp); !tenax_test_ok_) { \
    ADD_FAILURE() << tenax_test_ok_.message();                                                      \
    return __VA_ARGS__;                                                                             \
  }                                                                                                 \
  lhs = std::move(tmp).value()

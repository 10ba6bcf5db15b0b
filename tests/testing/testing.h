// Helpers shared by tenax's tests: scratch directories, IDX/gzip builders
// and child processes that are always reaped.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
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

// A data directory whose four files are symlinks to the installed
// Fashion-MNIST files, so one of them can be replaced by a broken copy.
void LinkFashionMnist(const std::string& dir);
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct ProcessResult {
  int exit_code = -1;  // 128 + signal if killed
  std::string out;
  std::string err;
};

// Runs argv to completion, capturing stdout and stderr.
ProcessResult RunProcess(const std::vector<std::string>& argv);

// A running child whose stderr is read line by line. The destructor kills
// (SIGKILL) and reaps the child if it is still running.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Reads stderr until a line containing `needle` arrives (true) or the
  // stream ends (false). Lines read are kept in stderr_text().
  bool WaitForStderrLine(const std::string& needle);
  void Signal(int sig);
  // Drains the remaining output and waits; returns the exit code.
  int Wait();
  const std::string& stderr_text() const { return err_; }

 private:
  pid_t pid_ = -1;
  int err_fd_ = -1;
  std::string err_;
  std::string pending_;
  int exit_code_ = -1;
};

// Path of the tenax binary under test (set by CMake).
std::string TenaxBinary();

}  // namespace tenax::testing

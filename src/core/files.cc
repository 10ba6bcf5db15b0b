#include "tenax/core/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tenax {
namespace {

Status OpenError(const std::string& path, int err) {
  if (err == ENOENT) {
    // A relative path is read from the working directory, which a job file's
    // author and its user may see differently (a path that exists only in
    // the source tree, run from the installed examples): say which it was.
    std::error_code ec;
    const std::filesystem::path cwd = std::filesystem::current_path(ec);
    if (!path.empty() && path.front() != '/' && !ec) {
      return NotFound(path + ": no such file (a relative path, read from the working directory " + cwd.string() + ")");
    }
    return NotFound(path + ": no such file");
  }
  return IoError(path + ": " + ErrnoMessage(err));
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(path + ": write failed: " + ErrnoMessage(errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(path, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return IoError(path + ": fsync failed: " + ErrnoMessage(err));
  return Status::Ok();
}

}  // namespace

std::string ErrnoMessage(int err) { return std::strerror(err); }

Result<std::vector<uint8_t>> ReadFileBytes(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return IoError(path + ": " + ErrnoMessage(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + ": is a directory, expected a file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return InvalidArgument(path + ": file is " + std::to_string(st.st_size) + " bytes, more than the limit of " +
                           std::to_string(max_bytes));
  }
  std::vector<uint8_t> out(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return IoError(path + ": read failed: " + ErrnoMessage(err));
    }
    if (n == 0) break;  // file shrank under us
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

Result<std::string> ReadFileText(const std::string& path, size_t max_bytes) {
  TENAX_ASSIGN_OR_RETURN(auto bytes, ReadFileBytes(path, max_bytes));
  return std::string(bytes.begin(), bytes.end());
}

Status CommitFileAtomic(const std::string& tmp_path, const std::string& path) {
  TENAX_RETURN_IF_ERROR(FsyncPath(tmp_path));
  if (::rename(tmp_path.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_path.c_str());
    return IoError(path + ": rename failed: " + ErrnoMessage(err));
  }
  // The rename is durable only once the directory entry is.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return FsyncPath(dir.empty() ? "." : dir);
}

Status WriteFileAtomic(const std::string& path, std::string_view contents) {
  // Unique per call, so that threads writing the same path never share a
  // temporary file.
  static std::atomic<uint64_t> writes{0};
  std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(writes.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return OpenError(tmp, errno);
  Status st = WriteAll(fd, contents, tmp);
  ::close(fd);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return CommitFileAtomic(tmp, path);
}

Status EnsureWritableDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(dir + ": cannot create directory: " + ec.message());
  if (!std::filesystem::is_directory(dir, ec)) return IoError(dir + ": exists and is not a directory");
  std::string probe = dir + "/.tenax-write-probe-" + std::to_string(::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(dir + ": directory is not writable: " + ErrnoMessage(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::Ok();
}

}  // namespace tenax

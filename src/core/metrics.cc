#include "tenax/core/metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "tenax/core/files.h"

namespace tenax {

// Both modes append (O_APPEND): another process appending to the same file
// (the launcher's fault events) never has its records overwritten.
Result<JsonLinesWriter> JsonLinesWriter::OpenWithMode(const std::string& path, bool truncate) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
  if (fd < 0) return IoError(path + ": cannot open for writing: " + ErrnoMessage(errno));
  std::FILE* f = ::fdopen(fd, "a");
  if (!f) {
    const int e = errno;
    ::close(fd);
    return IoError(path + ": cannot open for writing: " + ErrnoMessage(e));
  }
  JsonLinesWriter w;
  w.path_ = path;
  w.file_.reset(f);
  return w;
}

Result<JsonLinesWriter> JsonLinesWriter::Open(const std::string& path) { return OpenWithMode(path, true); }
Result<JsonLinesWriter> JsonLinesWriter::Append(const std::string& path) { return OpenWithMode(path, false); }

Status JsonLinesWriter::Write(const nlohmann::json& record) {
  if (!record.is_object()) return Internal("metrics record must be a JSON object");
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line.push_back('\n');
  if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size() || std::fflush(file_.get()) != 0) {
    return IoError(path_ + ": write failed: " + ErrnoMessage(errno));
  }
  return Status::Ok();
}

}  // namespace tenax

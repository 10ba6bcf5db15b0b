#include "tenax/core/metrics.h"

#include <chrono>
#include <fstream>

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
  // Every record carries the wall clock it was written at: the records of
  // a run come from several processes (rank 0, a later rank 0, the
  // launcher), and this is their one common time axis (the report's).
  std::string line;
  if (record.contains("time")) {
    line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    nlohmann::json timed = record;
    timed["time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    line = timed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  line.push_back('\n');
  if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size() || std::fflush(file_.get()) != 0) {
    return IoError(path_ + ": write failed: " + ErrnoMessage(errno));
  }
  return Status::Ok();
}

std::vector<nlohmann::json> JsonLinesTail::ReadNew() {
  std::vector<nlohmann::json> out;
  std::ifstream in(path_);
  if (!in) return out;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // a line still being written: read it next time
    offset_ += line.size() + 1;
    auto e = nlohmann::json::parse(line, nullptr, false);
    if (!e.is_discarded() && e.is_object()) out.push_back(std::move(e));
  }
  return out;
}

}  // namespace tenax

#include "tenax/core/metrics.h"

#include <cerrno>

#include "tenax/core/files.h"

namespace tenax {

Result<JsonLinesWriter> JsonLinesWriter::Open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "we");
  if (!f) return IoError(path + ": cannot open for writing: " + ErrnoMessage(errno));
  JsonLinesWriter w;
  w.path_ = path;
  w.file_.reset(f);
  return w;
}

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

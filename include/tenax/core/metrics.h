// JSON-lines metrics: one JSON object per line, flushed after every record so
// that a crash loses at most the record being written and `tail -f` works.
#pragma once

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tenax/core/status.h"

namespace tenax {

// Owns its FILE*. Not thread-safe: one writer per thread, or lock outside.
class JsonLinesWriter {
 public:
  // Creates or truncates `path`. IoError names the path on failure.
  static Result<JsonLinesWriter> Open(const std::string& path);
  // Creates `path` or appends to it (O_APPEND: each record is one write(),
  // so records of several processes appending to one file do not mix).
  static Result<JsonLinesWriter> Append(const std::string& path);

  // Appends one record. The record must be a JSON object.
  Status Write(const nlohmann::json& record);

  const std::string& path() const { return path_; }

 private:
  static Result<JsonLinesWriter> OpenWithMode(const std::string& path, bool truncate);
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
};

}  // namespace tenax

// JSON-lines metrics: one JSON object per line, flushed after every record so
// that a crash loses at most the record being written and `tail -f` works.
#pragma once

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax {

// Set by `tenax run` for its children: the run's metrics.jsonl. Rank 0
// then appends to it instead of starting it afresh (the launcher's records
// come first), and any process may append events of its own (a store
// recovery a worker started).
inline constexpr char kRunMetricsEnvVar[] = "TENAX_RUN_METRICS";

// Owns its FILE*. Not thread-safe: one writer per thread, or lock outside.
class JsonLinesWriter {
 public:
  // Creates or truncates `path`. IoError names the path on failure.
  static Result<JsonLinesWriter> Open(const std::string& path);
  // Creates `path` or appends to it (O_APPEND: each record is one write(),
  // so records of several processes appending to one file do not mix).
  static Result<JsonLinesWriter> Append(const std::string& path);

  // Appends one record. The record must be a JSON object. A record without
  // "time" gets one: unix seconds (double) when it was written.
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

// Follows a JSON-lines file another process appends to: each ReadNew
// returns the complete object records added since the last call (a line
// still being written waits for the next call; other lines are skipped).
// A missing file reads as empty. Not thread-safe.
class JsonLinesTail {
 public:
  explicit JsonLinesTail(std::string path) : path_(std::move(path)) {}
  std::vector<nlohmann::json> ReadNew();

 private:
  std::string path_;
  size_t offset_ = 0;
};

}  // namespace tenax

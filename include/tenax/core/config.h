// TOML configuration: a parsed document with `--set key=value` overrides and
// a typed reader that validates values and rejects keys nobody asked for.
//
// Every error names where the bad value came from: "job.toml:12: ..." for a
// value in a file, "--set train.epochs=x: ..." for an override. Nothing here
// throws; toml++ exceptions are converted to Status.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/core/status.h"

namespace tenax {

// Inputs larger than this are refused before parsing (configs are small; a
// huge file is a mistake, not a config).
inline constexpr size_t kMaxConfigBytes = 1 << 20;

class ConfigDoc {
 public:
  ConfigDoc() = default;

  // Reads and parses a TOML file. NotFound / IoError / InvalidArgument.
  static Result<ConfigDoc> Load(const std::string& path);
  // Parses TOML text; `source_name` is used in messages (usually the path).
  static Result<ConfigDoc> Parse(std::string_view text, std::string source_name);

  // Applies "dotted.key=value". The value is read as a TOML literal
  // (3, 0.1, true, "x") and, if it is not one, as a plain string, so that
  // `--set model.name=mlp` works without quotes. Replaces an existing value.
  Status Override(std::string_view assignment);

  const toml::table& table() const { return table_; }
  const std::string& source_name() const { return source_; }

  // Where the value at `dotted_key` came from: "file:line", the override
  // text, or just the file name when the key is absent.
  std::string Where(std::string_view dotted_key) const;

 private:
  std::string source_;
  toml::table table_;
  // Where each value came from ("file:line" or the --set text), recorded at
  // parse time: toml++ drops source positions when a table is copied.
  std::map<std::string, std::string, std::less<>> origin_;
};

// Reads typed values from a ConfigDoc. Getters return the default when the
// key is absent and record the first error otherwise (bad type, out of
// range); Finish() returns that error, or an error naming the first key in
// the document that no getter asked for. Not thread-safe.
class ConfigReader {
 public:
  explicit ConfigReader(const ConfigDoc& doc) : doc_(doc) {}

  int64_t Int(std::string_view key, int64_t def, int64_t min, int64_t max);
  double Real(std::string_view key, double def, double min, double max);
  bool Bool(std::string_view key, bool def);
  std::string String(std::string_view key, std::string def);
  // A string that must be one of `choices`.
  std::string Choice(std::string_view key, std::string def, const std::vector<std::string>& choices);

  // Marks `key` as read and returns its node, or nullptr when absent: for
  // values the typed getters do not read (an array of tables such as
  // [[faults]]), which the caller then checks itself, unknown keys included.
  const toml::node* Node(std::string_view key);

  // Records an error found by cross-field validation, located at `key`.
  void Fail(std::string_view key, const std::string& message);

  bool has(std::string_view key) const;
  Status Finish() const;

 private:
  toml::node_view<const toml::node> Lookup(std::string_view key);
  void TypeError(std::string_view key, const char* expected, const toml::node& node);

  const ConfigDoc& doc_;
  std::set<std::string, std::less<>> known_;
  Status first_error_;
};

// "integer", "string", ... for messages.
std::string_view TomlTypeName(toml::node_type type);

}  // namespace tenax

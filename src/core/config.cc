#include "tenax/core/config.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tenax/core/files.h"

namespace tenax {
namespace {

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

bool IsBareKeySegment(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::vector<std::string> SplitDotted(std::string_view key) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = key.find('.', start);
    parts.emplace_back(key.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Levenshtein distance, for "did you mean" hints on unknown keys.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

struct LeafKey {
  std::string path;
  uint32_t line;
};

// Every value's dotted path with its source line (0 when unknown), and the
// empty tables.
void CollectLeaves(const toml::table& table, const std::string& prefix, std::vector<LeafKey>& out) {
  for (const auto& [k, node] : table) {
    std::string path = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const auto* sub = node.as_table(); sub && !sub->empty()) {
      CollectLeaves(*sub, path, out);
    } else {
      out.push_back({path, node.source().begin.line});
    }
  }
}

uint32_t LineOf(const std::string& where) {
  size_t colon = where.rfind(':');
  if (colon == std::string::npos) return 0;
  try {
    return static_cast<uint32_t>(std::stoul(where.substr(colon + 1)));
  } catch (...) {
    return 0;
  }
}

}  // namespace

std::string_view TomlTypeName(toml::node_type type) {
  switch (type) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    case toml::node_type::none:
      return "nothing";
  }
  return "unknown";
}

Result<ConfigDoc> ConfigDoc::Load(const std::string& path) {
  TENAX_ASSIGN_OR_RETURN(std::string text, ReadFileText(path, kMaxConfigBytes));
  return Parse(text, path);
}

Result<ConfigDoc> ConfigDoc::Parse(std::string_view text, std::string source_name) {
  if (text.size() > kMaxConfigBytes) {
    return InvalidArgument(source_name + ": config is larger than " + std::to_string(kMaxConfigBytes) + " bytes");
  }
  ConfigDoc doc;
  doc.source_ = source_name;
  try {
    doc.table_ = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << source_name << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    return InvalidArgument(msg.str());
  }
  std::vector<LeafKey> leaves;
  CollectLeaves(doc.table_, "", leaves);
  for (const auto& leaf : leaves) {
    doc.origin_[leaf.path] = leaf.line > 0 ? source_name + ":" + std::to_string(leaf.line) : source_name;
  }
  return doc;
}

Status ConfigDoc::Override(std::string_view assignment) {
  const std::string origin = "--set " + std::string(assignment);
  size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) return InvalidArgument(origin + ": expected key=value");
  std::string_view key = Trim(assignment.substr(0, eq));
  std::string_view raw = Trim(assignment.substr(eq + 1));
  std::vector<std::string> parts = SplitDotted(key);
  for (const auto& p : parts) {
    if (!IsBareKeySegment(p))
      return InvalidArgument(origin + ": " + Quote(key) + " is not a dotted key like train.epochs");
  }
  if (raw.empty()) return InvalidArgument(origin + ": empty value");

  // Read the value as a TOML literal; anything that is not one is a string.
  std::optional<toml::table> literal;
  try {
    literal = toml::parse("v = " + std::string(raw));
  } catch (const toml::parse_error&) {
  }

  toml::table* t = &table_;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* next = t->get(parts[i]);
    if (!next) {
      t->insert(parts[i], toml::table{});
      next = t->get(parts[i]);
    }
    if (!next->is_table()) {
      return InvalidArgument(origin + ": " + Quote(parts[i]) + " is a value, not a table");
    }
    t = next->as_table();
  }
  if (toml::node* existing = t->get(parts.back()); existing && existing->is_table()) {
    return InvalidArgument(origin + ": " + Quote(key) + " is a table, not a value");
  }
  if (literal && literal->get("v") && !literal->get("v")->is_table()) {
    t->insert_or_assign(parts.back(), *literal->get("v"));
  } else {
    t->insert_or_assign(parts.back(), std::string(raw));
  }
  origin_[std::string(key)] = origin;
  return Status::Ok();
}

std::string ConfigDoc::Where(std::string_view dotted_key) const {
  if (auto it = origin_.find(dotted_key); it != origin_.end()) return it->second;
  return source_.empty() ? std::string("config") : source_;
}

toml::node_view<const toml::node> ConfigReader::Lookup(std::string_view key) {
  known_.emplace(key);
  return doc_.table().at_path(key);
}

const toml::node* ConfigReader::Node(std::string_view key) { return Lookup(key).node(); }

bool ConfigReader::has(std::string_view key) const { return static_cast<bool>(doc_.table().at_path(key)); }

void ConfigReader::Fail(std::string_view key, const std::string& message) {
  if (!first_error_.ok()) return;
  first_error_ = InvalidArgument(doc_.Where(key) + ": " + Quote(key) + " " + message);
}

void ConfigReader::TypeError(std::string_view key, const char* expected, const toml::node& node) {
  Fail(key, std::string("must be ") + expected + ", got " + std::string(TomlTypeName(node.type())));
}

int64_t ConfigReader::Int(std::string_view key, int64_t def, int64_t min, int64_t max) {
  auto node = Lookup(key);
  if (!node) return def;
  auto v = node.value_exact<int64_t>();
  if (!v) {
    TypeError(key, "an integer", *node.node());
    return def;
  }
  if (*v < min || *v > max) {
    Fail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + std::to_string(*v));
    return def;
  }
  return *v;
}

double ConfigReader::Real(std::string_view key, double def, double min, double max) {
  auto node = Lookup(key);
  if (!node) return def;
  std::optional<double> v;
  if (node.is_floating_point())
    v = node.value_exact<double>();
  else if (node.is_integer())
    v = static_cast<double>(*node.value_exact<int64_t>());
  if (!v) {
    TypeError(key, "a number", *node.node());
    return def;
  }
  if (!std::isfinite(*v) || *v < min || *v > max) {
    std::ostringstream msg;
    msg << "must be between " << min << " and " << max << ", got " << *v;
    Fail(key, msg.str());
    return def;
  }
  return *v;
}

bool ConfigReader::Bool(std::string_view key, bool def) {
  auto node = Lookup(key);
  if (!node) return def;
  auto v = node.value_exact<bool>();
  if (!v) {
    TypeError(key, "true or false", *node.node());
    return def;
  }
  return *v;
}

std::string ConfigReader::String(std::string_view key, std::string def) {
  auto node = Lookup(key);
  if (!node) return def;
  auto v = node.value_exact<std::string>();
  if (!v) {
    TypeError(key, "a string", *node.node());
    return def;
  }
  return *v;
}

std::string ConfigReader::Choice(std::string_view key, std::string def, const std::vector<std::string>& choices) {
  std::string v = String(key, def);
  if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    Fail(key, "must be one of " + list + ", got " + Quote(v));
    return def;
  }
  return v;
}

Status ConfigReader::Finish() const {
  if (!first_error_.ok()) return first_error_;
  std::vector<LeafKey> leaves;
  CollectLeaves(doc_.table(), "", leaves);
  std::vector<LeafKey> unknown;
  for (auto& leaf : leaves) {
    leaf.line = LineOf(doc_.Where(leaf.path));  // --set keys sort first (line 0)
    if (!known_.count(leaf.path)) unknown.push_back(leaf);
  }
  if (unknown.empty()) return Status::Ok();
  std::stable_sort(unknown.begin(), unknown.end(), [](const LeafKey& a, const LeafKey& b) { return a.line < b.line; });
  const LeafKey& first = unknown.front();
  std::string msg = doc_.Where(first.path) + ": unknown key " + Quote(first.path);
  const std::string* best = nullptr;
  size_t best_d = 3;  // only suggest near misses
  for (const auto& k : known_) {
    size_t d = EditDistance(first.path, k);
    if (d < best_d) best_d = d, best = &k;
  }
  if (best) msg += " (did you mean " + Quote(*best) + "?)";
  if (unknown.size() > 1) msg += " and " + std::to_string(unknown.size() - 1) + " more unknown key(s)";
  return InvalidArgument(msg);
}

}  // namespace tenax

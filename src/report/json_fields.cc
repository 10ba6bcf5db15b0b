#include "json_fields.h"

#include <cmath>

namespace tenax::report {
namespace {

using nlohmann::json;

constexpr size_t kMaxFlattened = 60;
constexpr int kMaxDepth = 4;
constexpr size_t kMaxValueChars = 160;

const json* Field(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string Scalar(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean() || v.is_null()) return v.dump();
  return "";
}

std::string Shorten(std::string s) {
  if (s.size() > kMaxValueChars) s = s.substr(0, kMaxValueChars) + "...";
  return s;
}

void Flatten(const json& j, const std::string& prefix, int depth, std::vector<std::pair<std::string, std::string>>& out) {
  if (out.size() >= kMaxFlattened) return;
  const std::string name = prefix.empty() ? "value" : prefix;
  if (j.is_primitive()) {
    out.emplace_back(name, Shorten(Scalar(j)));
    return;
  }
  if (depth >= kMaxDepth) {
    out.emplace_back(name, j.is_array() ? "[" + std::to_string(j.size()) + " items]" : "{...}");
    return;
  }
  if (j.is_array()) {
    bool scalars = true;
    for (const json& v : j) scalars = scalars && v.is_primitive();
    if (scalars) {
      std::string text;
      for (const json& v : j) text += (text.empty() ? "" : ", ") + Scalar(v);
      out.emplace_back(name, Shorten(text));
      return;
    }
    size_t i = 0;
    for (const json& v : j) Flatten(v, name + "[" + std::to_string(i++) + "]", depth + 1, out);
    return;
  }
  for (const auto& [key, value] : j.items()) Flatten(value, prefix.empty() ? key : prefix + "." + key, depth + 1, out);
}

}  // namespace

std::optional<double> Number(const json& j, const char* key) {
  const json* v = Field(j, key);
  if (!v || !v->is_number()) return std::nullopt;
  const double d = v->get<double>();
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

std::optional<int64_t> Integer(const json& j, const char* key) {
  const json* v = Field(j, key);
  if (!v) return std::nullopt;
  if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<int64_t>();
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    // 2^63 itself does not fit; every double below it does.
    if (!std::isfinite(d) || d != std::floor(d) || d >= 9.2233720368547758e18 || d < -9.2233720368547758e18) {
      return std::nullopt;
    }
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

std::optional<bool> Flag(const json& j, const char* key) {
  const json* v = Field(j, key);
  if (!v || !v->is_boolean()) return std::nullopt;
  return v->get<bool>();
}

std::string Text(const json& j, const char* key) {
  const json* v = Field(j, key);
  return v && !v->is_null() ? Scalar(*v) : "";
}

void FlattenInto(const json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  Flatten(j, prefix, 0, out);
}

}  // namespace tenax::report

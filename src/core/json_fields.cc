#include "tenax/core/json_fields.h"

#include <cmath>

namespace tenax::json_fields {
namespace {

using nlohmann::json;

const json* Field(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

}  // namespace

std::string ScalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean() || v.is_null()) return v.dump();
  return "";
}

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
  return v && !v->is_null() ? ScalarText(*v) : "";
}

}  // namespace tenax::json_fields

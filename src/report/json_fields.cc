#include "json_fields.h"


namespace tenax::report {
namespace {

using nlohmann::json;

constexpr size_t kMaxFlattened = 60;
constexpr int kMaxDepth = 4;
constexpr size_t kMaxValueChars = 160;

using json_fields::ScalarText;

std::string Shorten(std::string s) {
  if (s.size() > kMaxValueChars) s = s.substr(0, kMaxValueChars) + "...";
  return s;
}

void Flatten(const json& j, const std::string& prefix, int depth, std::vector<std::pair<std::string, std::string>>& out) {
  if (out.size() >= kMaxFlattened) return;
  const std::string name = prefix.empty() ? "value" : prefix;
  if (j.is_primitive()) {
    out.emplace_back(name, Shorten(ScalarText(j)));
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
      for (const json& v : j) text += (text.empty() ? "" : ", ") + ScalarText(v);
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

void FlattenInto(const json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  Flatten(j, prefix, 0, out);
}

}  // namespace tenax::report

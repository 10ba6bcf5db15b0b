// Reading fields of records written by other programs (and possibly other
// versions of tenax) without trusting their types: a key that is missing or
// of the wrong type reads as "absent", never throws. Internal to the report
// layer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tenax::report {

// A finite number under `key` of object `j`.
std::optional<double> Number(const nlohmann::json& j, const char* key);
// An integer (or an integral float within int64's range).
std::optional<int64_t> Integer(const nlohmann::json& j, const char* key);
std::optional<bool> Flag(const nlohmann::json& j, const char* key);
// A string as is; a number or bool as its JSON text; anything else "".
std::string Text(const nlohmann::json& j, const char* key);

// Appends "prefix.key" = value lines for the scalars (and lists of scalars)
// of `j`, at most a few dozen and a few levels deep; values are shortened.
void FlattenInto(const nlohmann::json& j, const std::string& prefix,
                 std::vector<std::pair<std::string, std::string>>& out);

}  // namespace tenax::report

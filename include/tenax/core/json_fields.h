// Reading fields of JSON records written by other processes (and possibly
// other versions of tenax) without trusting their types: a key that is
// missing, or a value of another type, reads as "absent"; nothing throws.
// The run records' readers (core/run_records.h) and the report use them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tenax::json_fields {

// A finite number under `key` of object `j`.
std::optional<double> Number(const nlohmann::json& j, const char* key);
// An integer (or an integral float) within int64's range.
std::optional<int64_t> Integer(const nlohmann::json& j, const char* key);
std::optional<bool> Flag(const nlohmann::json& j, const char* key);
// A string as is; a number or bool as its JSON text; anything else "".
std::string Text(const nlohmann::json& j, const char* key);
// The same for a value: a string as is, a number, bool or null as its
// JSON text, an array or object "".
std::string ScalarText(const nlohmann::json& v);

}  // namespace tenax::json_fields

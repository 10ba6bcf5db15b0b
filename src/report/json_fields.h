// Reading fields of records written by other programs without trusting
// their types (core/json_fields.h's readers), and flattening a JSON value
// into lines for the page. Internal to the report layer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tenax/core/json_fields.h"

namespace tenax::report {

// The tolerant readers (core/json_fields.h), by their short names here.
using json_fields::Flag;
using json_fields::Integer;
using json_fields::Number;
using json_fields::Text;

// Appends "prefix.key" = value lines for the scalars (and lists of scalars)
// of `j`, at most a few dozen and a few levels deep; values are shortened.
void FlattenInto(const nlohmann::json& j, const std::string& prefix,
                 std::vector<std::pair<std::string, std::string>>& out);

}  // namespace tenax::report

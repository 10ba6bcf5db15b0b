// Fuzzes the price table decoder (job/price_table.h): any text parses or
// gives InvalidArgument; a table that parses prices any run finitely.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tenax/job/price_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = tenax::ParsePriceTable(std::string(reinterpret_cast<const char*>(data), size), "fuzz.toml");
  if (!t.ok()) {
    if (t.status().code() != tenax::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  std::map<std::string, double> seconds;
  for (const auto& [role, market] : t->role_market) seconds[role] = 3600;
  auto c = tenax::ComputeCost(*t, seconds);
  if (!c.ok() || !std::isfinite(c->total) || c->total < 0) std::abort();
  return 0;
}

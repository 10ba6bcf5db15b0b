// What a job's processes cost: a price table (a TOML file the job points
// to with cost.prices) and the cost of a run from its process-seconds per
// role. examples/prices/ holds tables copied from a provider's published
// list, each with its source and date (docs/cost.md).
//
// Table format:
//   provider = "aws"                   # who publishes the prices
//   instance_type = "m5.xlarge"
//   region = "us-east-1"
//   published = "2025-01-15"           # the date the prices were read (YYYY-MM-DD)
//   source = "https://..."             # where
//   currency = "USD"
//   [price_per_hour]
//   on_demand = 0.192
//   preemptible = 0.0456
//   [roles]                            # which market each role runs on
//   coordinator = "on_demand"
//   server = "on_demand"
//   worker = "preemptible"
//   storage = "on_demand"              # optional; only roles the job runs are needed
//
// Free of libtorch and I/O beyond reading the file, so the decoder is
// fuzzed (fuzz/price_table_fuzz.cc). Threading: plain values.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenax/core/config.h"
#include "tenax/core/status.h"

namespace tenax {

struct PriceTable {
  std::string provider, instance_type, region, published, source, currency;
  double on_demand_per_hour = 0;
  double preemptible_per_hour = 0;
  std::map<std::string, std::string> role_market;  // role -> "on_demand" | "preemptible"
  std::string path;                                 // where it was read from ("" if from text)

  double PricePerHour(const std::string& role) const;  // 0 for a role the table lacks
};

// InvalidArgument naming the file (and line where the TOML parser gives
// one) for a table that does not parse, lacks a key, has a price that is
// not a finite number >= 0, an on-demand price below the preemptible one,
// a market other than "on_demand"/"preemptible", or a date not YYYY-MM-DD.
Result<PriceTable> ParsePriceTable(const std::string& toml_text, const std::string& source_name);
Result<PriceTable> LoadPriceTable(const std::string& path);

// InvalidArgument naming the first role in `roles` the table has no market
// for ("the price table F has no price for role \"server\"").
Status CheckPriceTableCovers(const PriceTable& table, const std::vector<std::string>& roles);

struct CostReport {
  double total = 0;                          // in the table's currency
  std::map<std::string, double> by_role;     // role -> cost
  std::map<std::string, double> seconds;     // role -> process-seconds
};

// Cost of `process_seconds` (role -> summed seconds of that role's
// processes). InvalidArgument for a role the table lacks or negative time.
Result<CostReport> ComputeCost(const PriceTable& table, const std::map<std::string, double>& process_seconds);

// {"total":..,"currency":..,"by_role":{..},"process_seconds":{..},
//  "prices":{"file":..,"provider":..,"instance_type":..,"published":..}}
nlohmann::json CostToJson(const PriceTable& table, const CostReport& report);

}  // namespace tenax

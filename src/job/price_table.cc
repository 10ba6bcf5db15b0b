#include "tenax/job/price_table.h"

#include <cmath>
#include <regex>

#include "tenax/core/files.h"

namespace tenax {
namespace {

constexpr const char* kOnDemand = "on_demand";
constexpr const char* kPreemptible = "preemptible";
// Roles a table may price (tenax's process roles).
const std::vector<std::string> kRoles = {"coordinator", "server", "worker", "storage"};

}  // namespace

double PriceTable::PricePerHour(const std::string& role) const {
  auto it = role_market.find(role);
  if (it == role_market.end()) return 0;
  return it->second == kPreemptible ? preemptible_per_hour : on_demand_per_hour;
}

Result<PriceTable> ParsePriceTable(const std::string& toml_text, const std::string& source_name) {
  TENAX_ASSIGN_OR_RETURN(ConfigDoc doc, ConfigDoc::Parse(toml_text, source_name));
  ConfigReader r(doc);
  PriceTable t;
  auto required = [&](const char* key) {
    std::string v = r.String(key, "");
    if (!r.has(key)) r.Fail(key, std::string("is missing (a price table names its ") + key + ")");
    else if (v.empty()) r.Fail(key, "must not be empty");
    return v;
  };
  t.provider = required("provider");
  t.instance_type = required("instance_type");
  t.region = required("region");
  t.published = required("published");
  t.source = required("source");
  t.currency = r.String("currency", "USD");
  if (!t.published.empty() && !std::regex_match(t.published, std::regex("[0-9]{4}-[0-9]{2}-[0-9]{2}"))) {
    r.Fail("published", "must be a date YYYY-MM-DD (got \"" + t.published.substr(0, 32) + "\")");
  }
  for (const char* key : {"price_per_hour.on_demand", "price_per_hour.preemptible"}) {
    if (!r.has(key)) r.Fail(key, "is missing (the price per hour, a number >= 0)");
  }
  t.on_demand_per_hour = r.Real("price_per_hour.on_demand", 0, 0, 1e6);
  t.preemptible_per_hour = r.Real("price_per_hour.preemptible", 0, 0, 1e6);
  if (t.preemptible_per_hour > t.on_demand_per_hour) {
    r.Fail("price_per_hour.preemptible", "is above the on-demand price: preemptible capacity is the cheap kind");
  }
  for (const auto& role : kRoles) {
    const std::string key = "roles." + role;
    if (!r.has(key)) continue;
    t.role_market[role] = r.Choice(key, kOnDemand, {kOnDemand, kPreemptible});
  }
  if (t.role_market.empty()) r.Fail("roles", "is missing: name the market of each role (worker = \"preemptible\", ...)");
  TENAX_RETURN_IF_ERROR(r.Finish());
  return t;
}

Result<PriceTable> LoadPriceTable(const std::string& path) {
  TENAX_ASSIGN_OR_RETURN(std::string raw, ReadFileText(path, kMaxConfigBytes));
  TENAX_ASSIGN_OR_RETURN(PriceTable t, ParsePriceTable(raw, path));
  t.path = path;
  return t;
}

Status CheckPriceTableCovers(const PriceTable& table, const std::vector<std::string>& roles) {
  for (const auto& role : roles) {
    if (!table.role_market.count(role)) {
      return InvalidArgument("the price table " + (table.path.empty() ? std::string("(text)") : table.path) +
                             " has no price for role \"" + role + "\" (add roles." + role +
                             " = \"on_demand\" or \"preemptible\")");
    }
  }
  return Status::Ok();
}

Result<CostReport> ComputeCost(const PriceTable& table, const std::map<std::string, double>& process_seconds) {
  CostReport c;
  for (const auto& [role, seconds] : process_seconds) {
    if (!table.role_market.count(role)) {
      return InvalidArgument("the price table " + table.path + " has no price for role \"" + role + "\"");
    }
    if (!std::isfinite(seconds) || seconds < 0) {
      return InvalidArgument("role \"" + role + "\" ran a negative or unknown time");
    }
    const double cost = seconds / 3600.0 * table.PricePerHour(role);
    c.by_role[role] = cost;
    c.seconds[role] = seconds;
    c.total += cost;
  }
  return c;
}

nlohmann::json CostToJson(const PriceTable& t, const CostReport& c) {
  nlohmann::json markets = nlohmann::json::object();
  for (const auto& [role, market] : t.role_market) markets[role] = market;
  return {{"total", c.total},
          {"currency", t.currency},
          {"by_role", c.by_role},
          {"process_seconds", c.seconds},
          {"prices",
           {{"file", t.path},
            {"provider", t.provider},
            {"instance_type", t.instance_type},
            {"region", t.region},
            {"published", t.published},
            {"source", t.source},
            {"on_demand_per_hour", t.on_demand_per_hour},
            {"preemptible_per_hour", t.preemptible_per_hour},
            {"markets", markets}}}};
}

}  // namespace tenax

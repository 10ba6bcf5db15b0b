#include "tenax/net/emulated_links.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tenax::net {
namespace {

nlohmann::json ShapeJson(const LinkShape& s) {
  return {{"delay_us", s.delay.count()}, {"loss", s.loss}, {"bandwidth_bytes_per_second", s.bandwidth_bytes_per_second}};
}

Result<LinkShape> ParseShape(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return InvalidArgument(where + ": expected an object");
  LinkShape s;
  auto num = [&](const char* key, double lo, double hi, double def) -> Result<double> {
    auto it = j.find(key);
    if (it == j.end()) return def;
    if (!it->is_number()) return InvalidArgument(where + "." + key + ": expected a number");
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi) {
      return InvalidArgument(where + "." + key + " = " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." +
                             std::to_string(hi));
    }
    return v;
  };
  TENAX_ASSIGN_OR_RETURN(double delay, num("delay_us", 0, 10e6, 0));
  TENAX_ASSIGN_OR_RETURN(s.loss, num("loss", 0, 0.9, 0));
  TENAX_ASSIGN_OR_RETURN(s.bandwidth_bytes_per_second, num("bandwidth_bytes_per_second", 0, 1e13, 0));
  s.delay = std::chrono::microseconds(static_cast<int64_t>(delay));
  return s;
}

}  // namespace

LinkShape EmulatedLinks::Between(const std::string& a, const std::string& b) const {
  if (a == b) return LinkShape{};
  auto za = zone_of.find(a);
  auto zb = zone_of.find(b);
  if (za == zone_of.end() || zb == zone_of.end()) return LinkShape{};
  if (za->second == zb->second) return same_zone;
  auto key = za->second < zb->second ? std::make_pair(za->second, zb->second) : std::make_pair(zb->second, za->second);
  if (auto it = zone_pairs.find(key); it != zone_pairs.end()) return it->second;
  return cross_zone;
}

double EmulatedLinks::NominalRate(const std::string& a, const std::string& b) const {
  if (a == b) return 0;
  auto za = zone_of.find(a);
  auto zb = zone_of.find(b);
  if (za == zone_of.end() || zb == zone_of.end()) return 0;
  return za->second == zb->second ? same_zone_rate : cross_zone_rate;
}

std::string EmulatedLinks::ToJson() const {
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& [k, s] : zone_pairs) pairs.push_back({{"zones", {k.first, k.second}}, {"shape", ShapeJson(s)}});
  nlohmann::json j{{"hosts", zone_of}, {"same_zone", ShapeJson(same_zone)}, {"cross_zone", ShapeJson(cross_zone)},
                   {"zone_pairs", pairs},
                   {"nominal_bandwidth_bytes_per_second", {{"same_zone", same_zone_rate}, {"cross_zone", cross_zone_rate}}}};
  return j.dump(1);
}

Result<EmulatedLinks> EmulatedLinks::FromJson(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("emulated links: not a JSON object");
  EmulatedLinks e;
  auto hosts = j.find("hosts");
  if (hosts == j.end() || !hosts->is_object()) return InvalidArgument("emulated links: \"hosts\" must map hosts to zones");
  for (auto it = hosts->begin(); it != hosts->end(); ++it) {
    if (!it.value().is_string()) return InvalidArgument("emulated links: hosts." + it.key() + " must be a zone name");
    e.zone_of[it.key()] = it.value().get<std::string>();
  }
  if (auto it = j.find("same_zone"); it != j.end()) {
    TENAX_ASSIGN_OR_RETURN(e.same_zone, ParseShape(*it, "emulated links: same_zone"));
  }
  if (auto it = j.find("cross_zone"); it != j.end()) {
    TENAX_ASSIGN_OR_RETURN(e.cross_zone, ParseShape(*it, "emulated links: cross_zone"));
  }
  if (auto it = j.find("nominal_bandwidth_bytes_per_second"); it != j.end()) {
    if (!it->is_object()) return InvalidArgument("emulated links: nominal_bandwidth_bytes_per_second must be an object");
    for (const char* key : {"same_zone", "cross_zone"}) {
      auto v = it->find(key);
      if (v == it->end()) continue;
      if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0 || v->get<double>() > 1e13) {
        return InvalidArgument(std::string("emulated links: nominal_bandwidth_bytes_per_second.") + key +
                               " must be a number from 0 to 1e13");
      }
      (std::string(key) == "same_zone" ? e.same_zone_rate : e.cross_zone_rate) = v->get<double>();
    }
  }
  if (auto it = j.find("zone_pairs"); it != j.end()) {
    if (!it->is_array()) return InvalidArgument("emulated links: zone_pairs must be an array");
    for (const auto& p : *it) {
      auto zones = p.find("zones");
      auto shape = p.find("shape");
      if (!p.is_object() || zones == p.end() || !zones->is_array() || zones->size() != 2 || !(*zones)[0].is_string() ||
          !(*zones)[1].is_string() || shape == p.end()) {
        return InvalidArgument("emulated links: a zone pair needs \"zones\": [a, b] and \"shape\"");
      }
      std::string a = (*zones)[0], b = (*zones)[1];
      if (b < a) std::swap(a, b);
      TENAX_ASSIGN_OR_RETURN(LinkShape pair_shape, ParseShape(*shape, "emulated links: zone pair " + a + "/" + b));
      e.zone_pairs[std::make_pair(a, b)] = pair_shape;
    }
  }
  return e;
}

Result<std::optional<std::pair<std::string, std::shared_ptr<const EmulatedLinks>>>> EmulatedLinksFromEnvironment() {
  const char* host = std::getenv(kEmulatedHostEnvVar);
  if (host == nullptr || *host == '\0') return std::optional<std::pair<std::string, std::shared_ptr<const EmulatedLinks>>>();
  const char* path = std::getenv(kEmulatedLinksEnvVar);
  if (path == nullptr || *path == '\0') {
    return InvalidArgument(std::string(kEmulatedHostEnvVar) + " is set but " + kEmulatedLinksEnvVar + " is not");
  }
  std::ifstream in(path);
  if (!in) return InvalidArgument(std::string(kEmulatedLinksEnvVar) + ": cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto links = EmulatedLinks::FromJson(text.str());
  if (!links.ok()) return links.status().WithContext(path);
  if (!links->zone_of.count(host)) {
    return InvalidArgument(std::string(path) + ": emulated host '" + host + "' is not listed");
  }
  return std::optional(std::make_pair(std::string(host), std::make_shared<const EmulatedLinks>(std::move(links).value())));
}

}  // namespace tenax::net

#include "tenax/comm/group_zones.h"

#include <utility>

#include "tenax/net/emulated_links.h"

namespace tenax::comm {
namespace {

// (zone, members) in order of each zone's lowest rank.
std::vector<std::pair<std::string, int>> CountZones(const std::vector<std::string>& zone_of_rank) {
  std::vector<std::pair<std::string, int>> zones;
  for (const std::string& z : zone_of_rank) {
    auto it = zones.begin();
    while (it != zones.end() && it->first != z) ++it;
    if (it == zones.end()) {
      zones.emplace_back(z, 1);
    } else {
      ++it->second;
    }
  }
  return zones;
}

}  // namespace

GroupZones ZonesOfGroup(const Group& group) {
  GroupZones out;
  const net::NodeOptions& o = group.node().options();
  if (!o.emulated_links || o.emulated_host.empty()) {
    out.why_unknown = "no emulated topology (the zones of the members are not known)";
    return out;
  }
  const auto& zone_of = o.emulated_links->zone_of;
  std::vector<std::string> zones;
  for (int r = 0; r < group.world(); ++r) {
    std::string host = o.emulated_host;
    if (r != group.rank()) {
      Result<net::PeerInfo> info = group.node().Info(group.peer(r));
      host = info.ok() ? info->emulated_host : "";
    }
    auto it = host.empty() ? zone_of.end() : zone_of.find(host);
    if (it == zone_of.end()) {
      out.why_unknown = group.Describe(r) + (host.empty() ? " named no emulated host" : " is on host '" + host +
                                                                                           "', which the topology does not list");
      return out;
    }
    zones.push_back(it->second);
  }
  out.zone_of_rank = std::move(zones);
  return out;
}

std::string DescribeZones(const std::vector<std::string>& zone_of_rank) {
  std::string text;
  for (const auto& [zone, members] : CountZones(zone_of_rank)) {
    text += (text.empty() ? "" : ", ") + zone + ": " + std::to_string(members);
  }
  return text;
}

std::string WhyNotHierarchical(const std::vector<std::string>& zone_of_rank) {
  if (zone_of_rank.empty()) return "the zones of the members are not known";
  const auto zones = CountZones(zone_of_rank);
  if (zones.size() < 2) return "every member is in zone " + zones.front().first;
  for (const auto& z : zones) {
    if (z.second != zones.front().second) return "zones of unequal size (" + DescribeZones(zone_of_rank) + ")";
  }
  return "";
}

}  // namespace tenax::comm

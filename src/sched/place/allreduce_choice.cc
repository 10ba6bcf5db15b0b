#include "tenax/sched/place/allreduce_choice.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace tenax::sched {
namespace {

// The worse of two links for an allreduce: lower throughput, then longer delay, then more loss.
LinkMetrics Worse(const LinkMetrics& a, const LinkMetrics& b) {
  if (!a.reachable || !b.reachable) return a.reachable ? b : a;
  LinkMetrics w;
  w.throughput_gbps = std::min(a.throughput_gbps, b.throughput_gbps);
  w.rtt_ms = std::max(a.rtt_ms, b.rtt_ms);
  w.loss = std::max(a.loss, b.loss);
  return w;
}

std::string Seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f s", s);
  return b;
}

}  // namespace

AllreduceChoice ChooseAllreduce(const std::vector<NodeState>& members, const LinkView& links, double bytes) {
  AllreduceChoice c;
  std::map<std::string, int> size;
  for (const NodeState& m : members) {
    c.zones.push_back(m.zone);
    ++size[m.zone];
  }
  c.zone_count = static_cast<int>(size.size());
  if (members.size() < 2 || c.zone_count < 2) {
    c.reason = "flat ring: the members are in one zone";
    return c;
  }
  c.zone_size = size.begin()->second;
  for (const auto& [zone, n] : size) {
    if (n != c.zone_size) {
      c.reason = "flat ring: zones of unequal size (zone '" + size.begin()->first + "' has " +
                 std::to_string(c.zone_size) + " members, zone '" + zone + "' " + std::to_string(n) + ")";
      c.zone_size = 0;
      return c;
    }
  }
  bool any_inside = false, any_across = false;
  LinkMetrics inside{0, 0, 1e9, true}, across{0, 0, 1e9, true};
  for (size_t a = 0; a < members.size(); ++a) {
    for (size_t b = a + 1; b < members.size(); ++b) {
      if (members[a].name == members[b].name) continue;  // one host: no network link
      auto l = links.Link(members[a], members[b]);
      if (!l) {
        c.reason = "flat ring: no probe has measured the link " + members[a].name + " - " + members[b].name;
        return c;
      }
      if (members[a].zone == members[b].zone) {
        inside = any_inside ? Worse(inside, *l) : *l;
        any_inside = true;
      } else {
        across = any_across ? Worse(across, *l) : *l;
        any_across = true;
      }
    }
  }
  // Members of one zone on one host: their link is memory, far faster than any network link.
  if (!any_inside) inside = LinkMetrics{0.01, 0, 100.0, true};
  const int n = static_cast<int>(members.size());
  c.ring_seconds = RingAllreduceSeconds(n, bytes, any_across ? Worse(inside, across) : inside);
  c.hierarchical_seconds = HierarchicalAllreduceSeconds(c.zone_count, c.zone_size, bytes, inside, across);
  c.hierarchical = c.hierarchical_seconds < c.ring_seconds;
  c.reason = std::string(c.hierarchical ? "hierarchical" : "flat ring") + ": " + std::to_string(c.zone_count) +
             " zones of " + std::to_string(c.zone_size) + ", estimated " + Seconds(c.hierarchical_seconds) +
             " hierarchical vs " + Seconds(c.ring_seconds) + " flat ring per allreduce";
  return c;
}

}  // namespace tenax::sched

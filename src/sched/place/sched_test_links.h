// A LinkView for sched's unit tests: links set by hand, keyed by node name.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "tenax/sched/probe/link_metrics.h"

namespace tenax::sched::testing {

class TableLinks final : public LinkView {
 public:
  void Set(const std::string& a, const std::string& b, LinkMetrics m) { table_[Key(a, b)] = m; }
  std::optional<LinkMetrics> Link(const NodeState& a, const NodeState& b) const override {
    auto it = table_.find(Key(a.name, b.name));
    if (it == table_.end()) return std::nullopt;
    return it->second;
  }

 private:
  static std::pair<std::string, std::string> Key(const std::string& a, const std::string& b) {
    return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
  }
  std::map<std::pair<std::string, std::string>, LinkMetrics> table_;
};

// nodes "<zone>-<i>" for each zone, `capacity` slots each.
inline std::vector<NodeState> ZonedNodes(const std::vector<std::pair<std::string, int>>& zones, int capacity) {
  std::vector<NodeState> nodes;
  for (const auto& [zone, count] : zones) {
    for (int i = 0; i < count; ++i) {
      NodeState n;
      n.name = zone + "-" + std::to_string(i);
      n.zone = zone;
      n.capacity = capacity;
      n.id = static_cast<int>(nodes.size());
      nodes.push_back(n);
    }
  }
  return nodes;
}

}  // namespace tenax::sched::testing

#include "tenax/sched/k8s/cluster_state.h"

#include <nlohmann/json.hpp>

#include "tenax/sched/probe/link_matrix.h"

namespace tenax::sched {

std::shared_ptr<const ClusterSnapshot> EmptySnapshot() {
  auto s = std::make_shared<ClusterSnapshot>();
  s->links = std::make_shared<LinkMatrix>();
  return s;
}

Result<ClusterSnapshot> ParseClusterState(const std::string& text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("cluster state: not valid JSON");
  if (!doc.is_object()) {
    return InvalidArgument("cluster state: expected a JSON object with \"links\", \"jobs\" and \"zones\"");
  }
  for (const auto& [key, value] : doc.items()) {
    if (key != "half_life_seconds" && key != "links" && key != "jobs" && key != "zones") {
      return InvalidArgument("cluster state: unknown key \"" + key +
                             "\" (known: half_life_seconds, links, jobs, zones)");
    }
  }
  ClusterSnapshot s;
  if (doc.contains("links")) {
    // LinkMatrix's own parser reads "half_life_seconds" and "links" and
    // ignores the other keys.
    Result<LinkMatrix> m = LinkMatrix::FromJson(text);
    if (!m.ok()) return InvalidArgument("cluster state: " + m.status().message());
    s.links = std::make_shared<LinkMatrix>(std::move(m).value());
  } else {
    s.links = std::make_shared<LinkMatrix>();
  }
  if (auto it = doc.find("jobs"); it != doc.end()) {
    if (!it->is_object()) return InvalidArgument("cluster state: \"jobs\" must map job names to arrays of node names");
    for (const auto& [job, nodes] : it->items()) {
      const std::string where = "cluster state: jobs[\"" + job + "\"]";
      if (job.empty()) return InvalidArgument("cluster state: a job name in \"jobs\" is empty");
      if (!nodes.is_array()) return InvalidArgument(where + " must be an array of node names");
      std::vector<std::string>& out = s.jobs[job];
      for (const auto& n : nodes) {
        if (!n.is_string() || n.get_ref<const std::string&>().empty()) {
          return InvalidArgument(where + " must hold non-empty node names (strings)");
        }
        out.push_back(n.get<std::string>());
      }
    }
  }
  if (auto it = doc.find("zones"); it != doc.end()) {
    if (!it->is_object()) return InvalidArgument("cluster state: \"zones\" must map node names to zone names");
    for (const auto& [node, zone] : it->items()) {
      if (node.empty() || !zone.is_string()) {
        return InvalidArgument("cluster state: zones[\"" + node + "\"] must be a zone name (string) of a named node");
      }
      s.zones[node] = zone.get<std::string>();
    }
  }
  return s;
}

}  // namespace tenax::sched

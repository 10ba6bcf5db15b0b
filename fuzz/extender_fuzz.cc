// Fuzzes the Kubernetes extender's request handling (sched/k8s/extender.h) and
// its state-file parser (sched/k8s/cluster_state.h): any bytes give an answer
// with status 200, 400 or 413 whose body is JSON; a filter answer accounts
// for every candidate (passed or failed, never both); a prioritize answer
// scores every candidate in 0..10. The same bytes also go to the state-file
// parser, which parses or gives InvalidArgument.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tenax/sched/k8s/cluster_state.h"
#include "tenax/sched/k8s/extender.h"

namespace {

using nlohmann::json;

const tenax::sched::ClusterSnapshot& State() {
  static const tenax::sched::ClusterSnapshot* state = [] {
    auto s = tenax::sched::ParseClusterState(R"({
      "links": [{"a": "a-1", "b": "a-2", "rtt_ms": 0.1, "loss": 0, "throughput_gbps": 9.5},
                {"a": "a-1", "b": "b-2", "rtt_ms": 0, "loss": 1, "throughput_gbps": 0, "reachable": false}],
      "jobs": {"resnet": ["a-1", "a-1"], "bert": ["x-9"]},
      "zones": {"a-1": "zone-a", "a-2": "zone-a", "b-2": "zone-b"}})");
    if (!s.ok()) std::abort();
    return new tenax::sched::ClusterSnapshot(std::move(s).value());
  }();
  return *state;
}

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  tenax::sched::ExtenderOptions options;
  options.max_body_bytes = 1 << 16;

  auto parsed = tenax::sched::ParseExtenderArgs(body, options.max_body_bytes);
  const tenax::sched::ExtenderReply f = tenax::sched::HandleFilter(body, State(), options);
  const tenax::sched::ExtenderReply p = tenax::sched::HandlePrioritize(body, State(), options);
  for (const auto* r : {&f, &p}) {
    Check(r->http_status == 200 || r->http_status == 400 || r->http_status == 413);
    Check((r->http_status == 200) == parsed.ok());
    const json j = json::parse(r->body, nullptr, false);
    Check(!j.is_discarded());
    if (r->http_status != 200) Check(j.is_object() && j.contains("Error") && j["Error"].is_string());
  }
  if (parsed.ok()) {
    const size_t n = parsed->nodes.size();
    const json fj = json::parse(f.body);
    std::set<std::string> names;
    for (const auto& node : parsed->nodes) names.insert(node.name);
    std::set<std::string> passed;
    if (parsed->by_name) {
      for (const json& name : fj.at("NodeNames")) passed.insert(name.get<std::string>());
    } else {
      for (const json& node : fj.at("Nodes").at("items"))
        passed.insert(node.at("metadata").at("name").get<std::string>());
    }
    const json& failed = fj.at("FailedAndUnresolvableNodes");
    for (const auto& [name, reason] : failed.items()) {
      Check(names.count(name) == 1 && passed.count(name) == 0 && reason.is_string());
    }
    for (const std::string& name : names) Check(passed.count(name) + failed.count(name) == 1);
    const json pj = json::parse(p.body);
    Check(pj.is_array() && pj.size() == n);
    for (size_t i = 0; i < n; ++i) {
      Check(pj[i].at("Host") == parsed->nodes[i].name);
      const int score = pj[i].at("Score").get<int>();
      Check(score >= 0 && score <= tenax::sched::kMaxExtenderPriority);
    }
  }

  auto state = tenax::sched::ParseClusterState(std::string(body));
  if (!state.ok()) Check(state.status().code() == tenax::StatusCode::kInvalidArgument);
  if (state.ok()) Check(state->links != nullptr);
  return 0;
}

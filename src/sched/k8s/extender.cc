#include "tenax/sched/k8s/extender.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <utility>

#include "tenax/sched/probe/link_matrix.h"

namespace tenax::sched {
namespace {

using nlohmann::json;

// dump() that never throws: strings we did not parse (our messages quoting
// the input, nlohmann's "last read: '...'") may hold broken UTF-8.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Largest nesting of [ and { outside strings. For every prefix the JSON
// parser accepts this is its own depth, so checking it first bounds the
// depth of anything parsed (dump() of an echoed node recurses).
bool WithinDepth(std::string_view s, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

// A key of an ExtenderArgs object as Go's encoding/json finds it (the Go
// struct has no json tags): the exact field name, else one equal ignoring
// case. nullptr when absent or null (a nil pointer in Go).
json* GoField(json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end()) {
    for (auto i = obj.begin(); i != obj.end(); ++i) {
      if (EqualsIgnoringCase(i.key(), name)) {
        it = i;
        break;
      }
    }
  }
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A member of a Kubernetes object (exact key); nullptr when absent or null.
const json* Member(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A string-valued entry of a labels/annotations map; "" when absent.
Result<std::string> StringEntry(const json* map, const char* key, const std::string& where) {
  if (map == nullptr) return std::string();
  const json* v = Member(*map, key);
  if (v == nullptr) return std::string();
  if (!v->is_string()) return InvalidArgument(where + "[\"" + key + "\"] must be a string");
  return v->get<std::string>();
}

Result<const json*> StringMap(const json& meta, const char* key, const std::string& where) {
  const json* m = Member(meta, key);
  if (m != nullptr && !m->is_object()) return InvalidArgument(where + "." + key + " must be an object of strings");
  return m;
}

std::vector<std::string> SplitNames(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string name = text.substr(start, end - start);
    const size_t b = name.find_first_not_of(" \t\n");
    const size_t e = name.find_last_not_of(" \t\n");
    if (b != std::string::npos) out.push_back(name.substr(b, e - b + 1));
    start = end + 1;
  }
  return out;
}

Result<ExtenderPod> ParsePod(const json& pod) {
  if (!pod.is_object()) return InvalidArgument("\"Pod\" must be a v1.Pod object");
  const json* meta = Member(pod, "metadata");
  if (meta == nullptr || !meta->is_object()) return InvalidArgument("\"Pod\" has no \"metadata\" object");
  ExtenderPod p;
  const json* name = Member(*meta, "name");
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return InvalidArgument("\"Pod\".metadata.name must be a non-empty string");
  }
  p.name = name->get<std::string>();
  if (const json* ns = Member(*meta, "namespace")) {
    if (!ns->is_string()) return InvalidArgument("\"Pod\".metadata.namespace must be a string");
    p.name_space = ns->get<std::string>();
  }
  const std::string where = "pod " + p.Id() + ": metadata";
  TENAX_ASSIGN_OR_RETURN(const json* labels, StringMap(*meta, "labels", where));
  TENAX_ASSIGN_OR_RETURN(const json* annotations, StringMap(*meta, "annotations", where));
  TENAX_ASSIGN_OR_RETURN(p.job, StringEntry(labels, kJobLabel, where + ".labels"));
  TENAX_ASSIGN_OR_RETURN(p.role, StringEntry(labels, kRoleLabel, where + ".labels"));
  TENAX_ASSIGN_OR_RETURN(std::string zone, StringEntry(annotations, kZoneConstraintAnnotation, where + ".annotations"));
  TENAX_ASSIGN_OR_RETURN(std::string storage,
                         StringEntry(annotations, kStorageNodesAnnotation, where + ".annotations"));
  if (!zone.empty()) {
    Result<ZoneConstraint> z = ParseZoneConstraint(zone);
    if (z.ok()) {
      p.zone = z.value();
    } else {
      p.problem = std::string("tenax: annotation ") + kZoneConstraintAnnotation + ": " + z.status().message();
    }
  }
  p.storage_nodes = SplitNames(storage);
  return p;
}

Result<ExtenderNode> ParseNode(const json& node, size_t i) {
  const std::string where = "\"Nodes\".items[" + std::to_string(i) + "]";
  if (!node.is_object()) return InvalidArgument(where + " must be a v1.Node object");
  const json* meta = Member(node, "metadata");
  if (meta == nullptr || !meta->is_object()) return InvalidArgument(where + " has no \"metadata\" object");
  const json* name = Member(*meta, "name");
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return InvalidArgument(where + ".metadata.name must be a non-empty string");
  }
  ExtenderNode n;
  n.name = name->get<std::string>();
  TENAX_ASSIGN_OR_RETURN(const json* labels, StringMap(*meta, "labels", "node " + n.name + ": metadata"));
  if (labels != nullptr && Member(*labels, kZoneLabel) != nullptr) {
    TENAX_ASSIGN_OR_RETURN(n.zone, StringEntry(labels, kZoneLabel, "node " + n.name + ": metadata.labels"));
    n.zone_labelled = true;
  }
  return n;
}

// Node names are unique in a cluster; a request naming one twice could not
// be answered (FailedNodes is keyed by name).
Status UniqueNames(const std::vector<ExtenderNode>& nodes) {
  std::map<std::string_view, size_t> seen;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto [it, fresh] = seen.emplace(nodes[i].name, i);
    if (!fresh) {
      return InvalidArgument("node \"" + nodes[i].name + "\" is a candidate twice (entries " +
                             std::to_string(it->second) + " and " + std::to_string(i) + "); node names are unique");
    }
  }
  return Status::Ok();
}

// The nodes a request is about: the candidates (index i = args.nodes[i])
// and after them the job's placed peers and storage nodes not among them.
struct Universe {
  std::vector<NodeState> nodes;
  std::map<std::string, int> first;  // name -> first index

  int Find(const std::string& name) const {
    auto it = first.find(name);
    return it == first.end() ? -1 : it->second;
  }
  // The index of `name`, added (zone from the state) if it is not a candidate.
  int Intern(const std::string& name, const ClusterSnapshot& state) {
    if (int i = Find(name); i >= 0) return i;
    NodeState n;
    n.name = name;
    if (auto it = state.zones.find(name); it != state.zones.end()) n.zone = it->second;
    n.id = static_cast<int>(nodes.size());
    nodes.push_back(std::move(n));
    first.emplace(name, nodes.back().id);
    return nodes.back().id;
  }
};

Universe Candidates(const ExtenderArgs& args, const ClusterSnapshot& state) {
  Universe u;
  u.nodes.reserve(args.nodes.size());
  for (const ExtenderNode& c : args.nodes) {
    NodeState n;
    n.name = c.name;
    if (c.zone_labelled) {
      n.zone = c.zone;
    } else if (auto it = state.zones.find(c.name); it != state.zones.end()) {
      n.zone = it->second;
    }
    n.id = static_cast<int>(u.nodes.size());
    u.first.emplace(n.name, n.id);
    u.nodes.push_back(std::move(n));
  }
  return u;
}

// Indices of the job's placed pods (a node repeats per pod).
std::vector<int> PlacedPeers(Universe& u, const ExtenderArgs& args, const ClusterSnapshot& state) {
  std::vector<int> peers;
  auto it = state.jobs.find(args.pod.job);
  if (it == state.jobs.end()) return peers;
  for (const std::string& name : it->second) peers.push_back(u.Intern(name, state));
  return peers;
}

const LinkView& LinksOf(const ClusterSnapshot& state) {
  static const LinkMatrix kNone;
  return state.links ? *state.links : kNone;
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

Result<ExtenderArgs> ParseExtenderArgs(std::string_view body, size_t max_body_bytes) {
  if (body.size() > max_body_bytes) {
    return InvalidArgument("request body is " + std::to_string(body.size()) + " bytes; the extender accepts at most " +
                           std::to_string(max_body_bytes) + " (raise --max-body-mib for larger clusters)");
  }
  if (!WithinDepth(body, kMaxExtenderJsonDepth)) {
    return InvalidArgument("request body nests JSON deeper than " + std::to_string(kMaxExtenderJsonDepth) +
                           " levels; Kubernetes objects never do");
  }
  json doc;
  try {
    doc = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("request body is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) {
    return InvalidArgument("request body must be a JSON object ExtenderArgs {\"Pod\", \"Nodes\" or \"NodeNames\"}");
  }
  ExtenderArgs args;
  json* pod = GoField(doc, "Pod");
  if (pod == nullptr) return InvalidArgument("ExtenderArgs has no \"Pod\": kube-scheduler sends the pod to place");
  TENAX_ASSIGN_OR_RETURN(args.pod, ParsePod(*pod));

  json* nodes = GoField(doc, "Nodes");
  json* names = GoField(doc, "NodeNames");
  if (nodes == nullptr && names == nullptr) {
    return InvalidArgument(
        "ExtenderArgs has neither \"Nodes\" nor \"NodeNames\": kube-scheduler sends \"Nodes\" (a v1.NodeList), or "
        "\"NodeNames\" when the extender is registered with nodeCacheCapable: true");
  }
  if (nodes != nullptr && names != nullptr) {
    return InvalidArgument(
        "ExtenderArgs has both \"Nodes\" and \"NodeNames\"; send one (NodeNames only when "
        "nodeCacheCapable: true)");
  }
  if (names != nullptr) {
    if (!names->is_array()) return InvalidArgument("\"NodeNames\" must be an array of node names");
    args.by_name = true;
    size_t i = 0;
    for (const json& n : *names) {
      if (!n.is_string() || n.get_ref<const std::string&>().empty()) {
        return InvalidArgument("\"NodeNames\"[" + std::to_string(i) + "] must be a non-empty string");
      }
      args.nodes.push_back(ExtenderNode{n.get<std::string>(), "", false});
      ++i;
    }
    TENAX_RETURN_IF_ERROR(UniqueNames(args.nodes));
    return args;
  }
  if (!nodes->is_object()) return InvalidArgument("\"Nodes\" must be a v1.NodeList object {\"items\": [...]}");
  const json* items = Member(*nodes, "items");
  if (items != nullptr && !items->is_array()) return InvalidArgument("\"Nodes\".items must be an array of v1.Node");
  if (items != nullptr) {
    for (size_t i = 0; i < items->size(); ++i) {
      TENAX_ASSIGN_OR_RETURN(ExtenderNode n, ParseNode((*items)[i], i));
      args.nodes.push_back(std::move(n));
    }
  }
  TENAX_RETURN_IF_ERROR(UniqueNames(args.nodes));
  args.node_list = std::move(*nodes);  // doc dies here: no copy of a large list
  return args;
}

FilterOutcome FilterNodes(const ExtenderArgs& args, const ClusterSnapshot& state) {
  FilterOutcome out;
  const size_t n = args.nodes.size();
  auto fail = [&](size_t i, const std::string& reason) { out.failed.emplace(args.nodes[i].name, reason); };
  if (args.pod.job.empty()) {
    for (size_t i = 0; i < n; ++i) out.passed.push_back(i);
    return out;
  }
  if (!args.pod.problem.empty()) {
    for (size_t i = 0; i < n; ++i) fail(i, args.pod.problem);
    return out;
  }
  Universe u = Candidates(args, state);
  std::vector<int> peers = PlacedPeers(u, args, state);
  const std::string& job = args.pod.job;

  // Under hard, the zone of the placed pods (the one holding most of them
  // if they are split; ties by name). Peers of unknown zone do not vote.
  std::string zone;
  if (args.pod.zone == ZoneConstraint::kHard) {
    std::map<std::string, int> votes;
    for (int p : peers) {
      if (!u.nodes[p].zone.empty()) ++votes[u.nodes[p].zone];
    }
    int best = 0;
    for (const auto& [z, count] : votes) {
      if (count > best) {
        best = count;
        zone = z;
      }
    }
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());

  const LinkView& links = LinksOf(state);
  for (size_t i = 0; i < n; ++i) {
    const NodeState& c = u.nodes[i];
    if (!zone.empty() && c.zone != zone) {
      if (c.zone.empty()) {
        fail(i, std::string("tenax: node has no ") + kZoneLabel + " label (nor a zone in the cluster state); job " +
                    Quote(job) + " runs in zone " + Quote(zone) + " (" + kZoneConstraintAnnotation + ": hard)");
      } else {
        fail(i, "tenax: zone " + Quote(c.zone) + " is not " + Quote(zone) + ", where job " + Quote(job) +
                    " already runs (" + kZoneConstraintAnnotation + ": hard)");
      }
      continue;
    }
    std::string unreachable;
    for (int p : peers) {
      if (u.nodes[p].name == c.name) continue;
      std::optional<LinkMetrics> m = links.Link(c, u.nodes[p]);
      if (m && !m->reachable) {
        unreachable = u.nodes[p].name;
        break;
      }
    }
    if (!unreachable.empty()) {
      fail(i, "tenax: the link to " + Quote(unreachable) + ", where job " + Quote(job) +
                  " runs, is unreachable (the last probes got no answer)");
      continue;
    }
    out.passed.push_back(i);
  }
  return out;
}

std::string EncodeFilterResult(const ExtenderArgs& args, const FilterOutcome& outcome) {
  json r = json::object();
  if (args.by_name) {
    json names = json::array();
    for (size_t i : outcome.passed) names.push_back(args.nodes[i].name);
    r["Nodes"] = nullptr;
    r["NodeNames"] = std::move(names);
  } else {
    // The list's own fields as sent, then only the passing items (copying
    // the whole list first would double the work on large clusters).
    json list = json::object();
    json items = json::array();
    if (args.node_list.is_object()) {
      for (auto it = args.node_list.begin(); it != args.node_list.end(); ++it) {
        if (it.key() != "items") list[it.key()] = it.value();
      }
      if (auto it = args.node_list.find("items"); it != args.node_list.end() && it->is_array()) {
        for (size_t i : outcome.passed) {
          if (i < it->size()) items.push_back((*it)[i]);
        }
      }
    }
    list["items"] = std::move(items);
    r["Nodes"] = std::move(list);
    r["NodeNames"] = nullptr;
  }
  r["FailedNodes"] = json::object();
  json failed = json::object();
  for (const auto& [name, reason] : outcome.failed) failed[name] = reason;
  r["FailedAndUnresolvableNodes"] = std::move(failed);
  r["Error"] = "";
  return Dump(r);
}

std::vector<HostScore> PrioritizeNodes(const ExtenderArgs& args, const ClusterSnapshot& state,
                                       const ExtenderOptions& options) {
  std::vector<HostScore> out(args.nodes.size());
  for (size_t i = 0; i < out.size(); ++i) out[i].host = args.nodes[i].name;
  if (args.pod.job.empty() || !args.pod.problem.empty() || out.empty()) return out;

  Universe u = Candidates(args, state);
  std::vector<int> candidates(args.nodes.size());
  for (size_t i = 0; i < candidates.size(); ++i) candidates[i] = static_cast<int>(i);
  std::vector<int> peers = PlacedPeers(u, args, state);
  if (peers.empty()) {
    for (const std::string& s : args.pod.storage_nodes) peers.push_back(u.Intern(s, state));
  }
  if (peers.empty()) peers = CentralityPeers(candidates);

  const std::vector<ScoredNode> scored =
      ScoreNodes(u.nodes, candidates, peers, LinksOf(state), options.weights, options.unmeasured);
  for (size_t i = 0; i < out.size(); ++i) {
    const double raw = std::isfinite(scored[i].score) ? scored[i].score : 0.0;
    out[i].raw = raw;
    const long scaled = std::lround(std::clamp(raw, 0.0, 100.0) * kMaxExtenderPriority / 100.0);
    out[i].score = static_cast<int>(std::clamp<long>(scaled, 0, kMaxExtenderPriority));
  }
  return out;
}

std::string EncodeHostPriorityList(const std::vector<HostScore>& scores) {
  json list = json::array();
  for (const HostScore& s : scores) list.push_back({{"Host", s.host}, {"Score", s.score}});
  return Dump(list);
}

std::string EncodeExtenderError(std::string_view reason) { return Dump(json{{"Error", std::string(reason)}}); }

namespace {

// The common front of both verbs: the size limit (413), then the parse (400),
// then the pod the answer is about. Reasons quote the input (a parser's
// "last read" token, a node name), which may be megabytes long: answers and
// logs keep the first KiB. nullopt: `reply` is the refusal, send it.
std::optional<ExtenderArgs> Accepted(std::string_view body, const ExtenderOptions& options, ExtenderReply& reply) {
  constexpr size_t kMaxReason = 1024;
  Result<ExtenderArgs> args = ParseExtenderArgs(body, options.max_body_bytes);
  if (args.ok()) {
    reply.pod = args->pod.Id();
    reply.job = args->pod.job;
    return std::move(*args);
  }
  reply.http_status = body.size() > options.max_body_bytes ? 413 : 400;
  reply.summary = args.status().message();
  if (reply.summary.size() > kMaxReason) reply.summary = reply.summary.substr(0, kMaxReason) + "...";
  reply.body = EncodeExtenderError(reply.summary);
  return std::nullopt;
}

}  // namespace

ExtenderReply HandleFilter(std::string_view body, const ClusterSnapshot& state, const ExtenderOptions& options) {
  ExtenderReply reply;
  const std::optional<ExtenderArgs> args = Accepted(body, options, reply);
  if (!args) return reply;
  const FilterOutcome outcome = FilterNodes(*args, state);
  reply.body = EncodeFilterResult(*args, outcome);
  reply.summary = std::to_string(outcome.passed.size()) + " of " + std::to_string(args->nodes.size()) + " nodes pass";
  if (args->pod.job.empty()) reply.summary += " (not a tenax pod: no tenax.dev/job label)";
  if (!outcome.failed.empty()) {
    reply.summary += "; " + outcome.failed.begin()->first + ": " + outcome.failed.begin()->second;
    if (outcome.failed.size() > 1) reply.summary += " (and " + std::to_string(outcome.failed.size() - 1) + " more)";
  }
  return reply;
}

ExtenderReply HandlePrioritize(std::string_view body, const ClusterSnapshot& state, const ExtenderOptions& options) {
  ExtenderReply reply;
  const std::optional<ExtenderArgs> args = Accepted(body, options, reply);
  if (!args) return reply;
  const std::vector<HostScore> scores = PrioritizeNodes(*args, state, options);
  reply.body = EncodeHostPriorityList(scores);
  if (args->pod.job.empty()) {
    reply.summary = "not a tenax pod (no tenax.dev/job label): " + std::to_string(scores.size()) + " nodes score 0";
  } else if (!args->pod.problem.empty()) {
    reply.summary = args->pod.problem + ": " + std::to_string(scores.size()) + " nodes score 0";
  } else {
    const HostScore* best = nullptr;
    for (const HostScore& s : scores) {
      if (best == nullptr || s.raw > best->raw) best = &s;
    }
    reply.summary = std::to_string(scores.size()) + " nodes scored";
    if (best != nullptr) reply.summary += "; best " + best->host + " (" + std::to_string(best->score) + ")";
  }
  return reply;
}

}  // namespace tenax::sched

// The Kubernetes scheduler extender's request handling, without HTTP
// (layer `sched`, docs/placement.md "Kubernetes scheduler extender").
//
// Protocol: k8s.io/kube-scheduler/extender/v1. Its Go structs have no json
// tags, so the JSON keys are the Go field names. kube-scheduler POSTs
// ExtenderArgs {"Pod": v1.Pod, "Nodes": v1.NodeList | null,
// "NodeNames": [string] | null} (Nodes unless the extender is registered
// nodeCacheCapable, then NodeNames) to <urlPrefix>/filter and
// <urlPrefix>/prioritize. Filter answers ExtenderFilterResult {"Nodes",
// "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"} in the
// form it was asked (the passing node objects unchanged, or their names);
// prioritize answers HostPriorityList [{"Host", "Score" 0..10}].
//
// What the extender reads:
//   node label  topology.kubernetes.io/zone      the node's zone; a node
//               without it takes its zone from the cluster state's "zones",
//               else it has no zone ("" = unknown)
//   pod label   tenax.dev/job                     the job; a pod without it
//               is not tenax's: every node passes and scores 0
//   pod label   tenax.dev/role                    logged (worker, server, ...)
//   annotation  tenax.dev/zone-constraint         hard | soft (default soft)
//   annotation  tenax.dev/storage-nodes           node names, comma-separated
//
// Filter fails a node (FailedAndUnresolvableNodes: preempting pods cannot
// change a zone or a link) when (a) the job is `hard`, already has pods
// placed and the node is outside their zone (or has no zone), or (b) the
// node's measured link to any placed peer is unreachable. Prioritize scores
// with sched::ScoreNodes against the placed peers, else the storage nodes,
// else the other candidates (centrality), scaled 0..100 -> 0..10.
//
// Every function is pure over its arguments, deterministic, thread-safe and
// never throws; malformed input is an error value with the reason.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/sched/k8s/cluster_state.h"
#include "tenax/sched/probe/link_metrics.h"
#include "tenax/sched/place/placer.h"
#include "tenax/sched/place/scorer.h"

namespace tenax::sched {

inline constexpr size_t kDefaultMaxExtenderBodyBytes = size_t{16} << 20;
// extenderv1.MaxExtenderPriority.
inline constexpr int kMaxExtenderPriority = 10;
// Deepest JSON nesting accepted (Kubernetes objects nest ~15 deep); checked
// before parsing so a "[[[[..." body cannot exhaust the stack anywhere.
inline constexpr int kMaxExtenderJsonDepth = 128;

inline constexpr const char* kZoneLabel = "topology.kubernetes.io/zone";
inline constexpr const char* kJobLabel = "tenax.dev/job";
inline constexpr const char* kRoleLabel = "tenax.dev/role";
inline constexpr const char* kZoneConstraintAnnotation = "tenax.dev/zone-constraint";
inline constexpr const char* kStorageNodesAnnotation = "tenax.dev/storage-nodes";

struct ExtenderPod {
  std::string name_space, name;  // metadata.namespace ("" if absent), metadata.name
  std::string job;               // "" = not a tenax pod
  std::string role;
  ZoneConstraint zone = ZoneConstraint::kSoft;
  std::vector<std::string> storage_nodes;
  // Non-empty when a tenax annotation is invalid: filter fails every node
  // with this reason (kube-scheduler shows it in the pod's events, where the
  // user can act), prioritize scores every node 0.
  std::string problem;

  std::string Id() const { return (name_space.empty() ? "" : name_space + "/") + name; }
};

struct ExtenderNode {
  std::string name;
  std::string zone;  // the zone label's value; "" = no label (or NodeNames)
  bool zone_labelled = false;
};

struct ExtenderArgs {
  ExtenderPod pod;
  bool by_name = false;             // NodeNames was given (nodeCacheCapable)
  std::vector<ExtenderNode> nodes;  // the candidates, in request order
  // With Nodes: the NodeList as sent (its "items" are echoed unchanged for
  // the nodes that pass). Null with NodeNames.
  nlohmann::json node_list;
};

// Parses an ExtenderArgs body. InvalidArgument with the reason for a body
// over `max_body_bytes` (checked before parsing), nesting deeper than
// kMaxExtenderJsonDepth, bad JSON, a missing or ill-typed Pod, neither (or
// both) of Nodes and NodeNames, a node without metadata.name, a node named
// twice. Keys of
// ExtenderArgs match like Go's encoding/json: exactly, else ignoring case.
Result<ExtenderArgs> ParseExtenderArgs(std::string_view body, size_t max_body_bytes = kDefaultMaxExtenderBodyBytes);

struct ExtenderOptions {
  ScoreWeights weights;
  UnmeasuredLinks unmeasured;
  size_t max_body_bytes = kDefaultMaxExtenderBodyBytes;
};

struct FilterOutcome {
  std::vector<size_t> passed;                 // indices into args.nodes, in request order
  std::map<std::string, std::string> failed;  // node name -> reason
};
FilterOutcome FilterNodes(const ExtenderArgs& args, const ClusterSnapshot& state);
// ExtenderFilterResult JSON: Nodes (the list as sent, passing items only) or
// NodeNames, as the request had; FailedNodes {}; the failures in
// FailedAndUnresolvableNodes; Error "".
std::string EncodeFilterResult(const ExtenderArgs& args, const FilterOutcome& outcome);

struct HostScore {
  std::string host;
  int score = 0;   // 0..kMaxExtenderPriority
  double raw = 0;  // ScoreNodes' 0..100
};
// One entry per candidate, in request order. raw is ScoreNodes' score;
// score = round(raw / 10).
std::vector<HostScore> PrioritizeNodes(const ExtenderArgs& args, const ClusterSnapshot& state,
                                       const ExtenderOptions& options);
std::string EncodeHostPriorityList(const std::vector<HostScore>& scores);

// {"Error": reason}: the body of every refused request.
std::string EncodeExtenderError(std::string_view reason);

// One request end to end, for the HTTP server and the fuzzer.
struct ExtenderReply {
  int http_status = 200;  // 200; 400 malformed request; 413 body over the limit
  std::string body;       // JSON
  std::string pod;        // "namespace/name", "" when the body did not parse
  std::string job;        // "" when not a tenax pod
  std::string summary;    // one line for logs: the outcome or the reason refused
};
ExtenderReply HandleFilter(std::string_view body, const ClusterSnapshot& state, const ExtenderOptions& options);
ExtenderReply HandlePrioritize(std::string_view body, const ClusterSnapshot& state, const ExtenderOptions& options);

}  // namespace tenax::sched

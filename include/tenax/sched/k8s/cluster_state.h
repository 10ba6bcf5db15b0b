// What the Kubernetes extender knows about the cluster beyond one request
// (layer `sched`, docs/placement.md): the measured links between nodes,
// where each job's pods already run, and the zones of nodes a NodeNames
// request names without their labels.
//
// ClusterStateSource is the seam: the file source (file_state_source.h)
// today, a coordinator-backed source later. A source hands out immutable
// snapshots by shared_ptr, so a request keeps using the snapshot it started
// with while the source swaps in a newer one.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/sched/probe/link_metrics.h"

namespace tenax::sched {

struct ClusterSnapshot {
  // Never null in a snapshot a source returns (empty: nothing measured, the
  // scorer assumes UnmeasuredLinks by zone).
  std::shared_ptr<const LinkView> links;
  // Job name (the pod label tenax.dev/job) -> nodes where its pods already
  // run; a node repeats once per pod on it.
  std::map<std::string, std::vector<std::string>> jobs;
  // Node -> zone, for nodes whose labels the request does not carry
  // (NodeNames requests, placed peers outside the candidates).
  std::map<std::string, std::string> zones;
};

// An empty snapshot: no links measured, no jobs placed, no zones known.
std::shared_ptr<const ClusterSnapshot> EmptySnapshot();

// Parses the state file format (docs/placement.md):
//   {"half_life_seconds": 60,                      (optional)
//    "links": [...as LinkMatrix::ToJson...],        (optional, default none)
//    "jobs": {"job": ["node-a", "node-a", ...]},    (optional)
//    "zones": {"node-a": "zone-a", ...}}            (optional)
// InvalidArgument naming the key for anything else (unknown keys included,
// so a typo does not silently drop a section). Pure; never throws.
Result<ClusterSnapshot> ParseClusterState(const std::string& text);

class ClusterStateSource {
 public:
  virtual ~ClusterStateSource() = default;
  // The newest good snapshot; never null. Thread-safe: called concurrently
  // by the extender's request threads. Must not block for long (it runs
  // inside kube-scheduler's httpTimeout): a source that fetches remotely
  // refreshes in the background and returns what it has.
  virtual std::shared_ptr<const ClusterSnapshot> Snapshot() = 0;
};

// A source that always returns the same snapshot (no --state, and tests).
class StaticStateSource final : public ClusterStateSource {
 public:
  explicit StaticStateSource(std::shared_ptr<const ClusterSnapshot> snapshot) : snapshot_(std::move(snapshot)) {}
  std::shared_ptr<const ClusterSnapshot> Snapshot() override { return snapshot_; }

 private:
  std::shared_ptr<const ClusterSnapshot> snapshot_;
};

}  // namespace tenax::sched

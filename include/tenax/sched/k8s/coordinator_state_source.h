// The extender's cluster state from a coordinator's link book (layer
// sched, docs/placement.md): a background thread queries the coordinator
// for its probe-measured link matrix every `refresh` and swaps in a new
// snapshot (links, and the zones the probe agents report). Where the job's
// pods already run comes from an optional base source (the --state file),
// since the coordinator knows hosts, not Kubernetes nodes.
//
// Snapshot() never blocks on the network (kube-scheduler's httpTimeout):
// it returns the newest snapshot, the base's alone until the first answer.
// A coordinator that does not answer keeps the last good links and is
// retried every refresh (logged once per outage). Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tenax/sched/k8s/cluster_state.h"

namespace tenax::sched {

class CoordinatorStateSource final : public ClusterStateSource {
 public:
  // `base` may be null (no jobs known). Starts the refresh thread.
  CoordinatorStateSource(std::string host, uint16_t port, std::string secret, std::chrono::milliseconds refresh,
                         std::unique_ptr<ClusterStateSource> base);
  ~CoordinatorStateSource() override;

  std::shared_ptr<const ClusterSnapshot> Snapshot() override;
  uint64_t refreshes() const { return refreshes_.load(); }

 private:
  void Loop();

  const std::string host_, secret_;
  const uint16_t port_;
  const std::chrono::milliseconds refresh_;
  std::unique_ptr<ClusterStateSource> base_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::shared_ptr<const LinkView> links_;            // newest from the coordinator
  std::map<std::string, std::string> agent_zones_;   // from the probe agents
  std::atomic<uint64_t> refreshes_{0};
  std::thread thread_;
};

}  // namespace tenax::sched

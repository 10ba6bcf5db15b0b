// The store `tenax run` builds for a job with [storage] (docs/store.md,
// "A store per run"): storage.nodes `tenax storage` processes, each on its
// own directory under out_dir/store, the job's Fashion-MNIST splits put into
// them (`tenax store put`, RS data_chunks + parity_chunks), and the catalog
// (out_dir/store/catalog.db) that the workers' data.catalog points at.
// The fault plan's storage entries kill a node here (and wipe its disk).
// When the job recovers its store (data.recovery_policy), a resident
// recovery service (`tenax store serve`, store/recovery_service.h) starts
// beside the nodes and the workers' loaders ask it.
//
// Ownership: the processes belong to the launcher's ProcessSupervisor
// (borrowed; it stops them with the job). A node's death is expected (the
// job reads around it). Threading: the launcher's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tenax/core/deadline.h"
#include "tenax/core/process_supervisor.h"
#include "tenax/core/status.h"
#include "tenax/job/train_config.h"

namespace tenax {

class RunStorage {
 public:
  // Starts the nodes listening on `host`, waits for their ports and puts
  // both splits. Any failure names the node or the put and leaves the
  // started processes to the supervisor.
  static Result<RunStorage> Start(const TrainConfig& config, const std::string& self, const std::string& host,
                                  const std::string& out_dir, ProcessSupervisor& children, Deadline deadline);

  const std::string& catalog() const { return catalog_; }
  // The --set a child needs to read this store.
  std::string CatalogSet() const { return "data.catalog=" + catalog_; }
  // The resident recovery service started beside the nodes when the job
  // recovers its store (data.recovery_policy, no data.recovery_service of
  // its own): its HOST:PORT, "" when none was started.
  const std::string& recovery_service() const { return service_; }
  // The --set that points the workers' loaders at it (call only when there is one).
  std::string RecoveryServiceSet() const { return "data.recovery_service=\"" + service_ + "\""; }
  // The service's supervisor index (when there is one).
  std::optional<size_t> service_process() const { return service_process_; }
  const std::vector<size_t>& processes() const { return processes_; }  // supervisor index by node
  std::string NodeName(int64_t node) const { return "node-" + std::to_string(node); }
  std::string NodeDir(int64_t node) const { return root_ + "/" + NodeName(node); }
  // Bytes each split took ("train", "test") and how long the puts took.
  double put_seconds() const { return put_seconds_; }
  int64_t stored_bytes() const { return stored_bytes_; }

 private:
  std::string root_, catalog_, service_;
  std::vector<size_t> processes_;
  std::optional<size_t> service_process_;
  double put_seconds_ = 0;
  int64_t stored_bytes_ = 0;
};

}  // namespace tenax

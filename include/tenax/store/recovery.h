// Finding and rebuilding lost chunks (layer `store`, docs/store.md): the
// part of `tenax store scrub | recover` that moves bytes.
//
// - `FindLostChunks`: every chunk of a manifest that is on a failed node,
//   or (with `verify`) whose file is missing, corrupt or stale on a live
//   node. Each comes with the reason, for the operator.
// - `RecoverChunks`: plans with `PlanRecovery` (full / approx / prm) and
//   rebuilds the plan's `first` chunks (and `later` ones with
//   `rebuild_later`): per stripe, k verified survivors are read once, every
//   chunk to rebuild is decoded from them (one ISA-L call), checked against
//   the manifest's CRC and written durably to a node: back onto its own
//   node when that node is live (a repaired corrupt file), otherwise to a
//   replacement (placement.h). The manifest is updated for every chunk
//   written, so the caller stores it (catalog.h) even after an error.
//   A stripe with more than m chunks lost cannot be rebuilt: it is listed
//   (with the samples it held) and the others are still rebuilt.
//   Bytes read and written are counted as they pass through the ChunkStore
//   seam (for a network store: what crossed the network).
//   prm: the data chunks its plan leaves for later are marked `deferred`
//   in the manifest (loaders skip their samples: PRM's partial view); a
//   rebuilt chunk is never deferred.
//
// Threading: not thread-safe on one manifest; the stores must be usable
// from the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/store/dataset_store.h"
#include "tenax/store/recovery_plan.h"

namespace tenax::store {

inline constexpr int kParityTier = 1 << 20;

struct FoundLoss {
  LostChunk chunk;     // for PlanRecovery
  std::string reason;  // "data node 3 failed", "missing", the checksum error
};

// `alive[i]`: data node i is live. With `verify`, every chunk on a live
// node is read and checked (a scrub); otherwise only failed nodes count.
// `tier_of` gives approx's importance tier of a data chunk (default 0: all
// data is important); parity is always the last tier (kParityTier): it
// holds no samples, so the approx baseline rebuilds it in the background.
std::vector<FoundLoss> FindLostChunks(const DatasetManifest& manifest, const std::vector<ChunkStore*>& stores,
                                      const std::vector<bool>& alive, bool verify,
                                      const std::function<int(const StoredChunk&)>& tier_of = nullptr);

struct RecoveryOptions {
  std::string policy = "full";  // full | approx | prm
  PrmParams prm;
  bool rebuild_later = false;   // also rebuild the plan's `later` chunks now
  // > 0: after each stripe, wait until the bytes moved so far (read +
  // written) are at or under this rate since the start: a low-priority
  // pass that leaves the links to training.
  double pace_bytes_per_second = 0;
  // > 0 (StoreClient::Recover, without rebuild_later): once the first set
  // is in the catalog, rebuild the rest in a second pass paced at this
  // rate (PRM's background pass). 0 = the rest waits for a later
  // `recover --all` (or forever).
  double background_bytes_per_second = 0;
};

// The paced second pass of StoreClient::Recover (background_bytes_per_second).
struct BackgroundPass {
  bool ran = false;
  uint64_t chunks_rebuilt = 0, bytes_read = 0, bytes_written = 0;
  double seconds = 0;
};

struct RecoveryReport {
  std::string dataset;
  RecoveryPlan plan;
  std::vector<FoundLoss> lost;    // what was lost (plan indices point here)
  uint64_t chunks_rebuilt = 0;
  uint64_t bytes_read = 0;        // survivors read, payload bytes
  uint64_t bytes_written = 0;     // rebuilt chunks written
  double seconds = 0;
  bool shares_a_node = false;     // some stripe now has two chunks on one node
  std::vector<std::string> unrecoverable;  // "stripe S (samples A..B): only X of N chunks readable"
  uint64_t unrecoverable_samples = 0;
  BackgroundPass background;
};

// InvalidArgument for a bad policy or parameters (from PlanRecovery);
// FailedPrecondition when no node is live. A failed write stops the
// recovery with the error naming node and chunk (the manifest keeps what
// was written before it).
Result<RecoveryReport> RecoverChunks(DatasetManifest& manifest, const std::vector<ChunkStore*>& stores,
                                     const std::vector<DataNodeInfo>& nodes, const std::vector<bool>& alive,
                                     std::vector<FoundLoss> lost, const RecoveryOptions& options);

}  // namespace tenax::store

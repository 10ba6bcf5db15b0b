// The store's catalog (layer `store`, docs/store.md): the global view that
// degraded reads, scrubs and recovery plans work from, kept in SQLite.
//
// - Data nodes: id (their index in placements), name, location (a
//   directory: the node's disk), zone, and state (live / failed).
// - Datasets: their layout (records, record bytes, chunk bytes, k, m) and
//   class totals; for every chunk: its node, sample range, payload bytes,
//   CRC-32C and class histogram (the stripe map PRM plans with).
//
// The file is a tenax SQLite file (core/sqlite_db.h): it may be the
// coordinator's state file (`--state`), whose tables live next to these.
// Every write is one transaction (WAL), so a SIGKILL loses at most the
// write in flight. Reading checks what tenax writes: a row tenax never
// writes is DataLoss naming the dataset and chunk ("damaged catalog"),
// never a manifest with holes.
//
// Threading: one StoreCatalog per thread. Failures name the file: IoError
// for what SQLite reports, FailedPrecondition for another program's file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tenax/core/sqlite_db.h"
#include "tenax/core/status.h"
#include "tenax/store/dataset_store.h"

namespace tenax::store {

enum class NodeState { kLive, kFailed };
const char* ToString(NodeState s);

struct StoreNode {
  int id = 0;  // 0..N-1, the index placements use
  std::string name, location, zone;
  NodeState state = NodeState::kLive;
};

class StoreCatalog {
 public:
  static Result<std::unique_ptr<StoreCatalog>> Open(const std::string& path);

  // Every data node, by id.
  Result<std::vector<StoreNode>> Nodes();
  // Registers nodes 0..N-1 (ids are their positions). FailedPrecondition if
  // the catalog already has nodes; InvalidArgument for an empty or
  // duplicate name or location.
  Status AddNodes(const std::vector<StoreNode>& nodes);
  Status SetNodeState(int id, NodeState state);  // NotFound for an unknown id

  // Stores (or replaces) a dataset's manifest, in one transaction.
  // InvalidArgument for a chunk on a node the catalog does not have.
  Status PutManifest(const DatasetManifest& manifest);
  // NotFound naming the datasets there are.
  Result<DatasetManifest> Manifest(const std::string& dataset);
  Result<std::vector<std::string>> Datasets();

  // One recovery of `dataset` at a time across processes: the workers of
  // a job that all saw a node fail start one recovery, not one each.
  // Returns the owner holding the claim now: `owner` if this caller got
  // it (there was none, or one older than `stale_seconds`, whose owner
  // died), else the other owner. Release drops it if `owner` holds it.
  Result<std::string> ClaimRecovery(const std::string& dataset, const std::string& owner, int64_t stale_seconds);
  Status ReleaseRecovery(const std::string& dataset, const std::string& owner);

  const std::string& path() const { return db_.path(); }

 private:
  explicit StoreCatalog(SqliteDb db) : db_(std::move(db)) {}
  Status Damaged(const std::string& what) const;
  SqliteDb db_;
};

}  // namespace tenax::store

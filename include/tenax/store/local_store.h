// A store whose data nodes are local directories (layer `store`,
// docs/store.md): what `tenax store put|get|status|fail|scrub|recover`
// operate on until `tenax storage` nodes serve chunks over the transport.
//
// The catalog (catalog.h) names every data node with its directory (its
// "disk") and zone, and holds every dataset's manifest. A node is live
// while the catalog says so and its directory exists: a directory that
// vanished is a wiped disk, and the node is marked failed (its chunks are
// then rebuilt elsewhere by `Recover`; a failed node stays failed).
//
// Every operation that moves chunks stores the updated manifest in the
// catalog before it returns (also after a partial failure), so the catalog
// never points at a chunk that is not where it says.
//
// Threading: one LocalStore per thread; several processes may use one
// catalog (SQLite serialises their writes) but not ingest one dataset twice.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/store/catalog.h"
#include "tenax/store/dataset_store.h"
#include "tenax/store/recovery.h"

namespace tenax::store {

struct DatasetHealth {
  std::string dataset;
  uint64_t records = 0, stripes = 0, chunks = 0, bytes = 0;
  int k = 0, m = 0;
  std::vector<FoundLoss> lost;       // chunks not readable where the catalog says
  uint64_t degraded_stripes = 0;     // 1..m chunks lost: reads decode
  uint64_t lost_stripes = 0;         // more than m lost: samples unreadable
  uint64_t unreadable_samples = 0;
};

struct PutReport {
  DatasetManifest manifest;
  uint64_t bytes_written = 0;  // data and parity payloads
  double seconds = 0;
};

class LocalStore {
 public:
  static Result<std::unique_ptr<LocalStore>> Open(const std::string& catalog_path);

  // Creates `count` data nodes "node-0".. under `root` (directories
  // root/node-i, zones "zone-(i % zones)", or no zone when zones is 0).
  // FailedPrecondition when the catalog already has nodes; IoError naming
  // a directory that cannot be created.
  Status CreateNodes(const std::string& root, int count, int zones);
  const std::vector<StoreNode>& nodes() const { return nodes_; }

  // Marks live nodes whose directory vanished as failed; returns them.
  Result<std::vector<StoreNode>> DetectFailures();

  // Ingests records (see PutDataset) onto the live nodes and stores the
  // manifest with `sample_shape` (InvalidArgument unless its product + 1
  // is the record size). FailedPrecondition when the dataset exists already or fewer
  // than k+m nodes are live. Nothing enters the catalog unless every chunk
  // was written durably (a failed write names the node and chunk).
  Result<PutReport> Put(const std::string& dataset, std::span<const uint8_t> records, const LayoutParams& layout,
                        int classes, const std::function<int(uint64_t)>& label_of,
                        const std::vector<uint64_t>& sample_shape = {});

  Result<std::vector<uint8_t>> Get(const std::string& dataset, uint64_t first, uint64_t count, ReadStats* stats);
  // The same from a manifest the caller holds (a loader reads many ranges
  // of one dataset without reading the catalog each time).
  Result<std::vector<uint8_t>> Read(const DatasetManifest& manifest, uint64_t first, uint64_t count,
                                    ReadStats* stats) const {
    return ReadRecords(manifest, Stores(), first, count, stats);
  }
  Result<DatasetManifest> Manifest(const std::string& dataset) { return catalog_->Manifest(dataset); }
  Result<std::vector<std::string>> Datasets() { return catalog_->Datasets(); }

  // Wipes node `name_or_id`'s directory (a dead disk) and marks it failed.
  // NotFound for an unknown node.
  Result<StoreNode> Fail(const std::string& name_or_id);

  // What is lost per dataset: chunks on failed nodes, and with `verify`
  // every chunk on a live node read and checked.
  Result<std::vector<DatasetHealth>> Health(bool verify);

  // Recovers `dataset` (all datasets when empty): finds lost chunks
  // (verified reads when `verify`) and rebuilds them per `options`,
  // storing the manifest. `only_live_nodes`: rebuild only chunks whose own
  // node is live (a scrub's repair), leaving failed nodes to `recover`.
  Result<std::vector<RecoveryReport>> Recover(const std::string& dataset, const RecoveryOptions& options, bool verify,
                                              bool only_live_nodes = false,
                                              const std::function<int(const StoredChunk&)>& tier_of = nullptr);

 private:
  explicit LocalStore(std::unique_ptr<StoreCatalog> catalog) : catalog_(std::move(catalog)) {}
  Status Reload();  // nodes_, stores_ from the catalog
  std::vector<bool> Alive() const;
  std::vector<DataNodeInfo> Infos() const;
  std::vector<ChunkStore*> Stores() const;

  std::unique_ptr<StoreCatalog> catalog_;
  std::vector<StoreNode> nodes_;
  std::vector<std::unique_ptr<DirChunkStore>> stores_;
};

}  // namespace tenax::store

// The store as its users see it (layer `store`, docs/store.md): what
// `tenax store put|get|status|fail|scrub|recover` and the training loader
// operate on.
//
// The catalog (catalog.h) names every data node with its location and
// zone, and holds every dataset's manifest. A location is either a local
// directory (the node's "disk", read and written here) or
// "storage://HOST:PORT", a `tenax storage` process reached over the
// transport (NetChunkStore; the secret is $TENAX_SECRET). A node is live
// while the catalog says so and it is there: a directory that vanished is
// a wiped disk, a storage process that cannot be reached or stopped
// answering is a lost machine; either way the node is marked failed (its
// chunks are then rebuilt elsewhere by `Recover`; a failed node stays
// failed).
//
// Every operation that moves chunks stores the updated manifest in the
// catalog before it returns (also after a partial failure), so the catalog
// never points at a chunk that is not where it says.
//
// Threading: one StoreClient per thread; several processes may use one
// catalog (SQLite serialises their writes) but not ingest one dataset twice.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/store/catalog.h"
#include "tenax/net/node.h"
#include "tenax/store/dataset_store.h"
#include "tenax/store/net_chunk_store.h"
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
  std::vector<std::string> nodes_failed;  // failed a write during the ingest; their chunks went elsewhere
  uint64_t stripes_sharing_a_node = 0;     // only with allow_reduced_durability: stripes that survive fewer losses
};

inline constexpr const char* kStorageScheme = "storage://";

struct StoreClientOptions {
  std::string secret;                          // "" = $TENAX_SECRET (network nodes only)
  double link_bytes_per_second = 0;            // emulated rate of this client's writes to each node (0 = unshaped)
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{10000};
  // A node silent this long is lost to this client (net::NodeOptions). A
  // loader wants it short (a dead node is read around soon); a recovery
  // can wait out a node stalled in a slow fsync.
  std::chrono::milliseconds peer_timeout{3000};
};

struct TransportBytes {
  uint64_t read = 0, written = 0;  // chunk payload bytes to and from network nodes
};

class StoreClient {
 public:
  static Result<std::unique_ptr<StoreClient>> Open(const std::string& catalog_path, StoreClientOptions options = {});
  ~StoreClient();

  // Creates `count` data nodes "node-0".. under `root` (directories
  // root/node-i, zones "zone-(i % zones)", or no zone when zones is 0).
  // FailedPrecondition when the catalog already has nodes; IoError naming
  // a directory that cannot be created.
  Status CreateNodes(const std::string& root, int count, int zones);
  // Registers `tenax storage` processes at HOST:PORT as nodes "node-0"..,
  // zones as above. FailedPrecondition when the catalog already has nodes.
  Status CreateNetworkNodes(const std::vector<std::string>& addresses, int zones);
  const std::vector<StoreNode>& nodes() const { return nodes_; }
  // Live nodes this client can reach now (a directory, or a connection).
  size_t ReachableNodes() const;

  // Re-reads the nodes from the catalog (failed or added by others since)
  // and tries again the network nodes that were unreachable before;
  // connections that are up are kept. For a long-lived client (the
  // recovery service) before each operation.
  Status Refresh();

  // Marks live nodes whose directory vanished as failed; returns them.
  Result<std::vector<StoreNode>> DetectFailures();

  // Ingests records (see PutDataset) onto the live nodes and stores the
  // manifest with `sample_shape` (InvalidArgument unless its product + 1
  // is the record size). FailedPrecondition when the dataset exists already or fewer
  // than k+m nodes are live. Nothing enters the catalog unless every chunk
  // was written durably (a failed write names the node and chunk). Nodes
  // lost during the ingest that leave fewer than k+m: FailedPrecondition,
  // unless `allow_reduced_durability` (PutDataset; the report counts the
  // stripes that then share a node).
  Result<PutReport> Put(const std::string& dataset, std::span<const uint8_t> records, const LayoutParams& layout,
                        int classes, const std::function<int(uint64_t)>& label_of,
                        const std::vector<uint64_t>& sample_shape = {}, bool allow_reduced_durability = false);

  Result<std::vector<uint8_t>> Get(const std::string& dataset, uint64_t first, uint64_t count, ReadStats* stats);
  // The same from a manifest the caller holds (a loader reads many ranges
  // of one dataset without reading the catalog each time).
  Result<std::vector<uint8_t>> Read(const DatasetManifest& manifest, uint64_t first, uint64_t count,
                                    ReadStats* stats) const {
    return ReadRecords(manifest, stores_, first, count, stats);
  }
  Result<DatasetManifest> Manifest(const std::string& dataset) { return catalog_->Manifest(dataset); }
  Result<std::vector<std::string>> Datasets() { return catalog_->Datasets(); }

  // Marks node `name_or_id` failed; a local node's directory is wiped (a
  // dead disk; a network node's disk is its own machine's). NotFound for an
  // unknown node.
  Result<StoreNode> Fail(const std::string& name_or_id);

  // What is lost per dataset: chunks on failed nodes, and with `verify`
  // every chunk on a live node read and checked.
  Result<std::vector<DatasetHealth>> Health(bool verify);

  // Recovers `dataset` (all datasets when empty): finds lost chunks
  // (verified reads when `verify`) and rebuilds them per `options`,
  // storing the manifest. `only_live_nodes`: rebuild only chunks whose own
  // node is live (a scrub's repair), leaving failed nodes to `recover`.
  // Payload bytes moved to and from network nodes so far.
  TransportBytes transport_bytes() const;

  // Drives the transport once (heartbeats): a long-lived client that sits
  // idle between operations calls it more often than the nodes' peer
  // timeout, or they drop its connections (net::NodeOptions::peer_timeout).
  void KeepAlive();

  Result<std::vector<RecoveryReport>> Recover(const std::string& dataset, const RecoveryOptions& options, bool verify,
                                              bool only_live_nodes = false,
                                              const std::function<int(const StoredChunk&)>& tier_of = nullptr);

 private:
  StoreClient(std::unique_ptr<StoreCatalog> catalog, StoreClientOptions options);
  Status Reload();  // nodes_, stores_ from the catalog (network connections are kept)
  Status AddNodes(std::vector<StoreNode> nodes);
  // Why node n is not there right now ("" when it is).
  std::string Missing(const StoreNode& n);
  std::vector<bool> Alive() const;
  std::vector<DataNodeInfo> Infos() const;

  std::unique_ptr<StoreCatalog> catalog_;
  StoreClientOptions options_;
  std::vector<StoreNode> nodes_;
  std::vector<ChunkStore*> stores_;  // by node id; null for an unreachable network node
  std::map<std::string, std::unique_ptr<DirChunkStore>> dir_stores_;  // by location
  std::unique_ptr<net::Node> net_;   // created with the first network node
  std::map<std::string, std::unique_ptr<NetChunkStore>> net_stores_;  // by location
  std::map<std::string, std::string> unreachable_;  // location -> why
};

}  // namespace tenax::store

// Putting a dataset into the store and reading it back (layer `store`,
// docs/store.md), over a seam for the data nodes' disks.
//
// - `ChunkStore` is where a node's chunks live: `DirChunkStore` is a
//   directory (a data node's disk; a wiped disk is a vanished directory);
//   the network client of a data node will be another implementation.
// - `PutDataset` cuts records into chunks and stripes (stripe_layout.h),
//   encodes parity (reed_solomon.h), places chunks (placement.h) and writes
//   every chunk durably; it returns the manifest: the global view of every
//   chunk (node, sample range, class histogram, CRC) that degraded reads
//   and recovery plans work from. A node whose write fails is replaced for
//   the rest of the ingest (nothing is acknowledged that is not durable).
// - `ReadRecords` reads a range of records. A data chunk that is missing or
//   fails its checksum is decoded from k surviving chunks of its stripe (a
//   degraded read, counted); when fewer than k survive, DataLoss names the
//   stripe and the samples it held, never other bytes.
//
// Threading: a DirChunkStore may be used from several threads (one file
// per chunk, atomic renames); the functions hold no state.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/store/chunk_file.h"
#include "tenax/store/placement.h"
#include "tenax/store/stripe_layout.h"

namespace tenax::store {

class ChunkStore {
 public:
  virtual ~ChunkStore() = default;
  virtual std::string Describe() const = 0;  // "data node 3 (/path)" for errors
  // Durable before it returns Ok.
  virtual Status Put(const ChunkMeta& meta, std::span<const uint8_t> payload) = 0;
  // NotFound when absent, DataLoss when corrupt or another chunk's.
  virtual Result<Chunk> Get(const ChunkId& id) = 0;
};

class DirChunkStore : public ChunkStore {
 public:
  DirChunkStore(std::string name, std::string dir) : name_(std::move(name)), dir_(std::move(dir)) {}
  std::string Describe() const override { return name_ + " (" + dir_ + ")"; }
  Status Put(const ChunkMeta& meta, std::span<const uint8_t> payload) override;
  Result<Chunk> Get(const ChunkId& id) override;
  const std::string& dir() const { return dir_; }

 private:
  std::string name_, dir_;
};

struct StoredChunk {
  uint32_t index = 0;
  int node = -1;
  uint64_t first_record = 0, record_count = 0, payload_bytes = 0;
  uint32_t payload_crc32c = 0;
  std::vector<uint64_t> class_counts;  // data chunks; empty for parity
  // Lost and left for later by a recovery plan (PRM's partial view):
  // loaders skip its samples instead of decoding them.
  bool deferred = false;
};

struct DatasetManifest {
  std::string dataset;
  LayoutParams layout;
  int classes = 0;
  std::vector<uint64_t> class_totals;
  // One sample's shape as a loader builds tensors from it (e.g. {1, 28, 28}):
  // a record is prod(shape) bytes then the label byte. Empty = unknown.
  std::vector<uint64_t> sample_shape;
  std::vector<std::vector<StoredChunk>> stripes;  // [stripe][index]
};

// `records`: layout.records x layout.record_bytes bytes; `label_of(r)` the
// class of record r (< classes). InvalidArgument for a size mismatch, a
// label out of range or a bad dataset name; FailedPrecondition when there
// are fewer nodes than k+m. A node whose write fails (a lost machine, a
// dead disk) is left out from then on and its chunks are placed on others
// (`nodes_failed` lists it); when no node is left, Unavailable names the
// chunk and the stripes not written. When fewer than k+m nodes are left, a
// chunk would have to share a node with another chunk of its stripe (one
// node loss would then cost the stripe two chunks): FailedPrecondition says
// so and nothing is stored, unless `allow_reduced_durability`, which places
// it there anyway. InvalidArgument from a store (a chunk too large for it)
// stops at once.
Result<DatasetManifest> PutDataset(const std::string& dataset, std::span<const uint8_t> records,
                                   const LayoutParams& layout, int classes,
                                   const std::function<int(uint64_t)>& label_of,
                                   const std::vector<DataNodeInfo>& nodes, const std::vector<ChunkStore*>& stores,
                                   std::vector<int>* nodes_failed = nullptr, bool allow_reduced_durability = false);

// Stripes of `m` with two or more chunks on one node: each survives fewer
// node losses than its m parity chunks promise.
uint64_t StripesSharingANode(const DatasetManifest& m);

struct ReadStats {
  uint64_t chunks_read = 0;       // chunk files read (survivors of degraded reads too)
  uint64_t degraded_chunks = 0;   // data chunks rebuilt from their stripe
  uint64_t bytes_read = 0;        // payload bytes read from the stores
};

// The samples a stripe's data chunks hold: [first, first + count).
struct SampleRange {
  uint64_t first = 0, count = 0;
};
SampleRange StripeSamples(const DatasetManifest& manifest, uint64_t stripe);

// One chunk's payload from its node, verified: the chunk file's CRCs and
// the manifest's length and CRC (an intact but stale file is DataLoss).
// NotFound when no store holds it or the file is absent. Counts into `stats`.
Result<std::vector<uint8_t>> ReadStoredChunk(const DatasetManifest& manifest, const std::vector<ChunkStore*>& stores,
                                             uint64_t stripe, const StoredChunk& chunk, ReadStats& stats);

// Records [first, first + count) as bytes (count x record_bytes).
Result<std::vector<uint8_t>> ReadRecords(const DatasetManifest& manifest, const std::vector<ChunkStore*>& stores,
                                         uint64_t first, uint64_t count, ReadStats* stats = nullptr);

}  // namespace tenax::store

// A `tenax storage` data node as a ChunkStore (layer `store`): the network
// side of the seam DirChunkStore fills for local directories, so ingest,
// degraded reads and recovery work unchanged over the transport.
//
// Connect registers a receive region of `max_chunk_bytes` with the shared
// net::Node, sends it in a StorageHello and imports the node's staging
// region from the welcome. Get asks for a chunk and, once the reply says
// it was written into the receive region, copies it out and checks its CRC
// end to end; Put writes the payload one-sided into the node's staging
// region, flushes, and asks the node to store it durably. One request at a
// time; every wait has `request_timeout`.
//
// Failure: a node that is lost, times out or answers garbage makes the
// call fail (Unavailable / PeerLost / DeadlineExceeded / ProtocolError),
// which readers treat like a missing chunk (a degraded read). The store
// never hangs on a dead node longer than the timeout.
//
// Bytes: every payload byte moved through the transport is counted
// (bytes_read: node -> client; bytes_written: client -> node).
//
// Threading: the thread that owns the net::Node (shared with other
// NetChunkStores of the same client); the Node must outlive this.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tenax/core/deadline.h"
#include "tenax/net/node.h"
#include "tenax/store/dataset_store.h"

namespace tenax::store {

// The receive region a client registers per node: the largest chunk it reads.
inline constexpr size_t kMaxNetChunkBytes = size_t{16} << 20;

class NetChunkStore : public ChunkStore {
 public:
  static Result<std::unique_ptr<NetChunkStore>> Connect(net::Node* node, std::string name, const std::string& host,
                                                        uint16_t port, size_t max_chunk_bytes, Deadline deadline);
  std::string Describe() const override { return "data node " + name_ + " (" + address_ + ")"; }
  Status Put(const ChunkMeta& meta, std::span<const uint8_t> payload) override;
  Result<Chunk> Get(const ChunkId& id) override;

  struct NodeStatus {
    uint64_t chunks = 0, bytes = 0, bad_chunks = 0;
  };
  Result<NodeStatus> QueryStatus();

  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t bytes_written() const { return bytes_written_; }
  net::PeerId peer() const { return peer_; }
  void set_request_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 private:
  NetChunkStore(net::Node* node, std::string name, std::string address)
      : node_(node), name_(std::move(name)), address_(std::move(address)) {}
  // Sends a request and waits for its reply; a reply with an error code is
  // that error.
  Result<wire::ChunkReply> Call(wire::ChunkRequest& request);

  net::Node* node_;
  std::string name_, address_;
  net::PeerId peer_ = 0;
  net::MemoryRegion recv_;
  net::RemoteRegion staging_;
  uint64_t next_request_ = 1;
  uint64_t bytes_read_ = 0, bytes_written_ = 0;
  std::chrono::milliseconds timeout_{10000};
};

}  // namespace tenax::store

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
// Reconnect: a connection that was lost (an idle client whose node timed
// it out, a node restarted on the same address) is made again on the next
// call, and a call that failed because the connection broke is retried
// once on the new one. A node that cannot be reached is not tried again
// for `kReconnectBackoff`: calls meanwhile fail at once (Unavailable,
// with the last error), so a dead node costs a reader one connect attempt
// per back-off, not one per chunk.
//
// Bytes: every payload byte moved through the transport is counted
// (bytes_read: node -> client; bytes_written: client -> node).
//
// Threading: the thread that owns the net::Node (shared with other
// NetChunkStores of the same client); the Node must outlive this.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "tenax/core/deadline.h"
#include "tenax/net/node.h"
#include "tenax/store/dataset_store.h"

namespace tenax::store {

// The receive region a client registers per node: the largest chunk it reads.
inline constexpr size_t kMaxNetChunkBytes = size_t{16} << 20;

inline constexpr std::chrono::milliseconds kReconnectBackoff{2000};

class NetChunkStore : public ChunkStore {
 public:
  // `connect_timeout` also bounds each later reconnect.
  static Result<std::unique_ptr<NetChunkStore>> Connect(net::Node* node, std::string name, const std::string& host,
                                                        uint16_t port, size_t max_chunk_bytes,
                                                        std::chrono::milliseconds connect_timeout);
  std::string Describe() const override { return "data node " + name_ + " (" + address_ + ")"; }
  Status Put(const ChunkMeta& meta, std::span<const uint8_t> payload) override;
  Result<Chunk> Get(const ChunkId& id) override;

  struct NodeStatus {
    uint64_t chunks = 0, bytes = 0, bad_chunks = 0;
  };
  Result<NodeStatus> QueryStatus();

  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t bytes_written() const { return bytes_written_; }
  // The current connection (changes when the store connects again).
  net::PeerId peer() const { return peer_; }
  uint64_t reconnects() const { return reconnects_; }
  void set_request_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  // The emulated rate of this client's writes to the node (kept across
  // reconnects); zero = unshaped.
  void set_link_shape(const net::LinkShape& shape);

 private:
  NetChunkStore(net::Node* node, std::string name, std::string host, uint16_t port)
      : node_(node), name_(std::move(name)), host_(std::move(host)), port_(port),
        address_(host_ + ":" + std::to_string(port)) {}
  // Connects, shares the receive region, exchanges hello/welcome.
  Status Handshake(Deadline deadline);
  // Ok when the connection is up or was made again now (see Reconnect).
  Status EnsureConnected();
  // Runs `attempt` on a live connection; once more on a new one when it
  // failed because the connection broke.
  template <typename T, typename F>
  Result<T> WithConnection(F attempt);
  // Sends a request and waits for its reply; a reply with an error code is
  // that error.
  Result<wire::ChunkReply> Call(wire::ChunkRequest& request);
  Status PutOnce(const ChunkMeta& meta, std::span<const uint8_t> payload);
  Result<Chunk> GetOnce(const ChunkId& id);

  net::Node* node_;
  std::string name_, host_;
  uint16_t port_;
  std::string address_;
  std::chrono::milliseconds connect_timeout_{5000};
  std::optional<net::LinkShape> shape_;
  bool connected_ = false;
  std::chrono::steady_clock::time_point retry_after_{};
  std::string last_error_;
  uint64_t reconnects_ = 0;
  net::PeerId peer_ = 0;
  net::MemoryRegion recv_;
  net::RemoteRegion staging_;
  uint64_t next_request_ = 1;
  uint64_t bytes_read_ = 0, bytes_written_ = 0;
  std::chrono::milliseconds timeout_{10000};
};

}  // namespace tenax::store

// The `tenax storage` data-node role (layer `store`, docs/store.md): one
// directory (the node's disk) of chunk files, served over the transport.
//
// - Start: every chunk file under the directory is read and verified (both
//   CRCs, and that it is the chunk its name says). A bad file is moved to
//   DIR/quarantine/ (never deleted: nothing is lost) and counted; the node
//   then serves what verified. A missing directory is created empty (a
//   replaced disk).
// - Reads: a client's GET is answered by writing the payload one-sided into
//   the client's registered receive region (re-verified from disk on every
//   read), then a ChunkReply with the header. Writes: the client puts the
//   payload into this node's staging region, and PUT writes it durably
//   (chunk_file.h: tmp, fsync, rename, fsync dir) after checking its CRC;
//   only then is it acknowledged.
// - Scrub: in the background one chunk per `scrub_interval` is re-read and
//   verified; a bad one is quarantined and counted.
// - Health: the transport's heartbeats (a node that stops answering is lost
//   to its clients within the peer timeout), and STATUS replies with what
//   the node holds and how many chunks went bad.
// - Link emulation: replies to every client are shaped to
//   `link.bandwidth_bytes_per_second` (a cloud node's NIC), and clients
//   shape their writes the same way, so recovery is network-bound.
//
// Threading: RunStorageNode owns its thread and its net::Node. Failures:
// a client that breaks the protocol is disconnected and logged; the node
// keeps serving the others.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "tenax/core/status.h"
#include "tenax/net/link_shaper.h"

namespace tenax::store {

struct StorageNodeOptions {
  std::string name = "storage";
  std::string dir;
  std::string listen_host = "127.0.0.1";
  uint16_t port = 0;
  std::string secret;
  std::string transports;
  size_t max_chunk_bytes = size_t{16} << 20;  // the staging region's size
  std::chrono::milliseconds scrub_interval{100};
  net::LinkShape link;                        // applied to replies to every client
  std::chrono::milliseconds peer_timeout{10000};
  // Called once the node listens (with the bound port) and once start-up
  // verification is done.
  std::function<void(uint16_t port, uint64_t chunks, uint64_t quarantined)> on_ready;
  std::function<bool()> stop;                 // polled between messages
};

struct StorageNodeReport {
  uint64_t chunks = 0, bytes = 0, bad_chunks = 0;
  uint64_t gets = 0, puts = 0, bytes_sent = 0, bytes_received = 0;
};

// Serves until `stop` returns true. IoError naming the directory if it
// cannot be created or read; Unavailable if the transport cannot start.
Result<StorageNodeReport> RunStorageNode(const StorageNodeOptions& options);

}  // namespace tenax::store

// A tenax process's endpoint on the remote-memory transport (UCX UCP).
//
// A Node owns one UCP context and one worker. It listens and connects by
// host:port; every new connection runs the authenticated handshake (see
// auth.h) before anything else, and a peer that fails it is refused and
// disconnected before it can learn a remote key, so it can never touch a
// memory region. Data moves by one-sided Put/Get into regions whose keys
// peers exchange once; small typed control messages and (for baselines)
// bulk messages travel as UCX active messages.
//
// Threading: a Node is single-threaded. All calls, including the waits that
// drive UCX progress, must come from the thread that created it.
//
// Failures: nothing here throws or aborts on peer misbehaviour. A peer that
// dies, resets, sends bytes that break the protocol or floods us with control
// messages nobody reads becomes "lost" with a typed Status (PeerLost,
// Refused, ProtocolError) and a log line naming it; the Node keeps serving
// its other peers. Every wait takes a Deadline and returns DeadlineExceeded
// when it passes.
//
// Transports: UCX picks shared memory between processes on one host and TCP
// across hosts (RDMA verbs where present). NodeOptions::transports = "tcp"
// forces TCP, our stand-in for a cross-host link.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tenax/core/deadline.h"
#include "tenax/core/status.h"
#include "tenax/net/emulated_links.h"
#include "tenax/net/link_shaper.h"

namespace tenax::net {

using PeerId = uint64_t;

inline constexpr int kMaxTcpStreams = 16;

struct NodeOptions {
  std::string name = "node";  // in logs and in the peer's logs
  std::string secret;         // the cluster secret (see ResolveSecret)
  std::string transports;     // UCX_TLS; "" = UCX's choice, "tcp" = force TCP
  std::string net_devices;    // UCX_NET_DEVICES; "" = all, "lo" = loopback only
  // With transports = "tcp": data connections per peer (1-16). A put's
  // 256 KiB pieces go round-robin over them, so a lossy or long link's
  // TCP windows add up; each piece carries the count of pieces sent
  // before the sender's last Fence, and the receiver applies a piece only
  // once that many are applied, so data still lands before the signal
  // after it. Both sides of a pair must use the same value (the data
  // connections pair up in creation order).
  int tcp_streams = 1;  // 1 to kMaxTcpStreams, else Create fails (InvalidArgument)
  std::chrono::milliseconds handshake_timeout{5000};
  // Each ready peer's control connection is written to at least this often,
  // so that a peer that died without closing is detected within about one
  // interval plus a TCP reset.
  std::chrono::milliseconds heartbeat_interval{200};
  // A ready peer from which nothing (not even a heartbeat) arrived for this
  // long is lost (PeerLost). This is what detects a SIGKILLed peer on shared
  // memory, where writes into its mapping still succeed. Contract: every
  // Node must be driven (any wait, or Progress()) more often than this, or
  // its peers will declare it lost. A Node that itself went undriven for
  // more than half of this (its process SIGSTOPped, its thread in a slow
  // fsync, the machine frozen) does not count that excess against its
  // peers' silence: it logs the stall and gives them the rest of their
  // timeout to be heard again.
  std::chrono::milliseconds peer_timeout{10000};
  // Connections this Node should hold at once; 0: what UCX and the process
  // allow by default (about 1000 here). Servers that face a fleet (the
  // coordinator, parameter-server shards) set it, and Create raises UCX's
  // async event limit and the soft open-file limit for it (process-wide,
  // never lowered: net/many_connections.h).
  size_t max_peers = 0;
  size_t max_control_bytes = 1 << 20;
  // Per peer: control messages received and not yet taken by ReceiveControl.
  // A peer that would exceed either bound is lost with ProtocolError naming
  // it ("flooded this node"), and its unread messages are discarded: a
  // bounded queue that silently dropped messages would instead hang whoever
  // waits for one of them. Generous on purpose: every tenax protocol reads
  // what it is sent, so only a runaway or hostile peer gets near them.
  size_t max_unread_control_messages = 4096;
  size_t max_unread_control_bytes = size_t{64} << 20;
  size_t max_bulk_bytes = size_t{1} << 30;
  // Emulated topology (emulated_links.h): this node's host and the links.
  // Left empty, Create reads them from TENAX_EMULATED_HOST/_LINKS. A ready
  // peer on another emulated host gets the shape between the two hosts.
  std::string emulated_host;
  std::shared_ptr<const EmulatedLinks> emulated_links;
  // Link faults (link_faults.h): the launcher's file of faults in force,
  // re-read when it changes. Left empty, Create takes TENAX_LINK_FAULTS;
  // only a node on an emulated host follows it.
  std::string link_faults_file;
  // A wait idle for over 50 ms sleeps 0.5 ms per look instead of spinning
  // (a warm spare, a joiner, a coordinator between reports): on a host
  // shared with training members an idle spinner costs them CPU. Off for a
  // node that times round trips (the link probes), where a late wake-up
  // would be measured as latency.
  bool sleep_when_idle = true;
};

// Describes a region to a peer: where it lives in the owner's address space,
// how long it is, and the packed UCX key that grants access.
struct RegionDescriptor {
  uint64_t address = 0;
  uint64_t length = 0;
  std::string rkey;
};

class Node;

// Memory registered with the Node's UCP context, readable and writable by
// peers that were given its descriptor (Node::Share). Move-only. Must not
// outlive its Node.
//
// Lifetime: a peer may still read or write a region after we drop it (its
// operations were in flight, or it is slow or hostile), and UCX serves some
// of those operations inside our own progress loop. So dropping a region
// whose key a live peer holds only hands it to the Node, which unregisters
// (and, for Allocate()d memory, frees) it once every peer that was given
// the key is gone (lost, and its data endpoint closed: until then a put it
// sent may still land); a region whose key no such peer holds is
// unregistered at once. Memory passed to Register() belongs to the caller, who must keep it
// alive as long as peers may access it.
class MemoryRegion {
 public:
  MemoryRegion() = default;
  MemoryRegion(MemoryRegion&& other) noexcept;
  MemoryRegion& operator=(MemoryRegion&& other) noexcept;
  ~MemoryRegion();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  friend class Node;
  void Reset();
  void* owner_ = nullptr;  // Node::Impl
  void* memh_ = nullptr;   // ucp_mem_h
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  RegionDescriptor descriptor_;  // handed out only by Node::Share
};

// A peer's region as seen from here: its descriptor plus the unpacked key,
// valid while the peer's connection lives.
class RemoteRegion {
 public:
  RemoteRegion() = default;
  RemoteRegion(RemoteRegion&& other) noexcept;
  RemoteRegion& operator=(RemoteRegion&& other) noexcept;
  ~RemoteRegion();

  PeerId peer() const { return peer_; }
  uint64_t address() const { return address_; }
  size_t size() const { return size_; }

 private:
  friend class Node;
  void Reset();
  PeerId peer_ = 0;
  uint64_t address_ = 0;
  size_t size_ = 0;
  void* rkey_ = nullptr;  // ucp_rkey_h
};

// An operation in flight. Complete it with Node::Wait; dropping it early is
// allowed (UCX finishes and frees it).
class Op {
 public:
  Op() = default;
  Op(Op&& other) noexcept;
  Op& operator=(Op&& other) noexcept;
  ~Op();

 private:
  friend class Node;
  void Release();
  void* request_ = nullptr;  // ucs_status_ptr_t still in progress, or null
  std::vector<void*> more_requests_;  // a put over several TCP streams: each stream's last piece
  Status status_;            // the immediate outcome when request_ is null
  PeerId peer_ = 0;
  SteadyClock::time_point complete_at_{};  // link emulation
};

struct ControlMessage {
  PeerId from = 0;
  uint32_t kind = 0;
  std::string payload;
};

struct BulkMessage {
  PeerId from = 0;
  std::vector<uint8_t> data;  // copied out of UCX on receipt
};

struct PeerInfo {
  std::string name;     // the peer's NodeOptions::name
  std::string address;  // host:port as connected or accepted
  bool ready = false;   // handshake done
  Status lost;          // OK unless the peer is lost
  std::string emulated_host;  // the peer's emulated host from its handshake ("" = none; emulated_links.h)
};

class Node {
 public:
  // InvalidArgument for a missing/short secret, Unavailable if UCX cannot
  // start.
  static Result<std::unique_ptr<Node>> Create(NodeOptions options);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Starts accepting connections on host:port (port 0 = any free port) and
  // returns the bound port.
  Result<uint16_t> Listen(const std::string& host, uint16_t port);

  // Connects and completes the handshake. Refused when the server does not
  // accept our secret (or we not its), DeadlineExceeded/Unavailable when
  // nothing answers.
  Result<PeerId> Connect(const std::string& host, uint16_t port, Deadline deadline);

  // Waits for the next peer that connected to us and passed the handshake.
  Result<PeerId> Accept(Deadline deadline);

  // Registers caller memory (which must outlive the region) or allocates
  // registered memory.
  Result<MemoryRegion> Register(void* data, size_t size);
  Result<MemoryRegion> Allocate(size_t size);

  // The descriptor of `region` to send to `peer` (the only way to get a
  // region's key): records that `peer` holds the key, so that dropping the
  // region keeps it registered until `peer` is gone. Send it to that peer
  // only. InvalidArgument for an empty region or another Node's, the peer's
  // status when it is not usable.
  Result<RegionDescriptor> Share(const MemoryRegion& region, PeerId peer);
  // Regions registered with UCX right now: live ones plus dropped ones kept
  // for the peers holding their keys. For tests and leak checks.
  size_t RegisteredRegions() const;

  // Makes a peer's region usable here. ProtocolError for an unusable key.
  Result<RemoteRegion> Import(PeerId peer, const RegionDescriptor& descriptor);

  // One-sided writes and reads. `local` needs no registration, but
  // registered memory avoids a bounce copy. Bounds are checked against the
  // remote region: an out-of-range access fails with InvalidArgument before
  // anything is sent.
  Op Put(const void* local, size_t size, const RemoteRegion& remote, size_t remote_offset);
  Op Get(void* local, size_t size, const RemoteRegion& remote, size_t remote_offset);

  // Direct load/store access to a peer's region, when the transport maps
  // it into this process (shared memory on one host, memory the peer got
  // from Allocate). Unavailable otherwise, and for peers with an emulated
  // link shape (which plain stores would bypass). The pointer stays valid
  // while `remote` lives; stores into it need no progress and are ordered
  // like any stores to memory (x86: TSO; use release/acquire atomics for
  // flags).
  Result<uint8_t*> MapRemote(const RemoteRegion& remote);

  // Orders later operations to `peer` after earlier ones (no completion wait).
  Status Fence(PeerId peer);
  // Waits until every operation issued to `peer` is complete at the target.
  Status Flush(PeerId peer, Deadline deadline);

  Status Wait(Op& op, Deadline deadline);
  Status WaitAll(std::vector<Op>& ops, Deadline deadline);

  // Control messages: small (max_control_bytes), typed by `kind`, only to
  // and from peers that passed the handshake. `kind` must be in the registry
  // (message_kinds.h), else InvalidArgument. Send returns once the message
  // left (its buffer is reusable).
  Status SendControl(PeerId peer, uint32_t kind, std::string_view payload, Deadline deadline);
  // The next message from any peer (or from `from`, when given), of any
  // kind (or of `kind`); other messages stay queued for their readers, up to
  // NodeOptions::max_unread_control_* per peer.
  Result<ControlMessage> ReceiveControl(Deadline deadline, std::optional<PeerId> from = std::nullopt,
                                        std::optional<uint32_t> kind = std::nullopt);

  // Bulk messages (the RPC-style baseline): arbitrary size up to
  // max_bulk_bytes, copied out on receipt.
  Status SendBulk(PeerId peer, const void* data, size_t size, Deadline deadline);
  // Starts a bulk send and returns at once; `data` must stay valid until
  // the Op completes (Wait).
  Op StartBulk(PeerId peer, const void* data, size_t size);
  Result<BulkMessage> ReceiveBulk(Deadline deadline, std::optional<PeerId> from = std::nullopt);

  // Emulated link conditions for operations to `peer` (see link_shaper.h).
  void SetLinkShape(PeerId peer, LinkShape shape);

  // OK while the peer is usable, else why it is not. NotFound for an unknown id.
  Status PeerStatus(PeerId peer) const;
  Result<PeerInfo> Info(PeerId peer) const;
  // Closes the connection (waits up to `deadline` for a clean close).
  void Disconnect(PeerId peer, Deadline deadline);

  // Drives UCX once and runs the handshake state machine. The waits above
  // call it; call it in idle loops to keep serving handshakes.
  void Progress();

  const NodeOptions& options() const { return options_; }

  struct Impl;

 private:
  explicit Node(NodeOptions options);
  Op Rma(bool put, void* local, size_t size, const RemoteRegion& remote, size_t remote_offset);
  Result<MemoryRegion> MapRegion(void* data, size_t size, bool allocate);
  std::unique_ptr<Impl> impl_;
  NodeOptions options_;
};

}  // namespace tenax::net

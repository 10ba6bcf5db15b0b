// Private to net: the state of a Node (Node::Impl) shared by the translation
// units that implement it, one per concern:
//   node.cc           the two UCX planes (create, destroy) and the progress loop
//   node_handshake.cc control plane: listen/connect/accept and the handshake
//   node_messages.cc  active-message receipt, control messages (bounded queue,
//                     registered kinds) and bulk messages
//   node_data.cc      data plane: regions (register, allocate, share, graveyard),
//                     import/map, put/get, fence/flush/wait, link emulation
//   node_peers.cc     peer life cycle: peer table, heartbeats, timeouts, lost
//                     peers, disconnecting and closing endpoints
// Threading: everything here runs on the Node's one thread; UCX callbacks run
// inside ucp_worker_progress on that thread and only copy and queue.
#pragma once

#include <ucp/api/ucp.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "net_wire.pb.h"
#include "tenax/net/link_faults.h"
#include "tenax/net/node.h"

namespace tenax::net {

inline constexpr uint16_t kControlAm = 1;
inline constexpr uint16_t kBulkAm = 2;
// One-sided traffic to TCP peers, carried as our own active messages
// (Impl::message_rma): a put (header PutHeader, payload the bytes), a flush
// request and its answer (payload: the token).
inline constexpr uint16_t kPutAm = 3;
inline constexpr uint16_t kFlushAm = 4;
inline constexpr uint16_t kFlushAckAm = 5;

struct PutHeader {
  uint64_t address = 0;  // where the bytes go in the receiver's memory
  // Applied only once the receiver has applied this many of the sender's
  // puts (the count sent before the sender's last Fence): pieces on other
  // TCP streams may arrive later than this one.
  uint64_t barrier = 0;
};
// A flush request: answered once `barrier` puts are applied.
struct FlushRequest {
  uint64_t token = 0;
  uint64_t barrier = 0;
};

inline std::string UcxError(ucs_status_t s) { return ucs_status_string(s); }

enum class Phase {
  kAwaitHello,      // server: connection accepted, waiting for Hello
  kAwaitChallenge,  // client: Hello sent
  kAwaitAuth,       // server: Challenge sent
  kAwaitWelcome,    // client: Auth sent
  kReady,
  kLost,
};

// A message received by a UCX callback, processed later in Progress():
// callbacks only copy and queue, they never send.
struct Frame {
  ucp_ep_h ep = nullptr;
  uint16_t am_id = 0;
  std::vector<uint8_t> data;
};

struct PeerState {
  PeerId id = 0;
  ucp_ep_h ep = nullptr;       // control: handshake, messages, failure detection (error mode PEER)
  ucp_ep_h data_ep = nullptr;  // one-sided traffic (error mode NONE: UCX keeps its fast shm lanes)
  // Data connections both sides agreed on in the handshake: the smaller of
  // the two NodeOptions::tcp_streams (an old or hostile value counts as 1
  // or is capped by ours).
  int tcp_streams = 1;
  std::vector<ucp_ep_h> stream_eps;  // message RMA: TCP streams 1..tcp_streams-1
  uint64_t next_stream = 0;          // round-robin over data_ep and stream_eps
  // Message RMA ordering: puts sent to it, and that count at our last
  // Fence (the barrier of the puts after it); puts from it applied here.
  uint64_t puts_sent = 0, fence_barrier = 0, puts_applied = 0;
  std::string name;            // the peer's own name, once known
  std::string emulated_host;   // the peer's emulated host ("" = none)
  std::string address;         // host:port
  Phase phase = Phase::kAwaitHello;
  std::string my_nonce;
  std::string their_nonce;
  SteadyClock::time_point started;
  SteadyClock::time_point last_heartbeat;  // last one we sent
  SteadyClock::time_point last_heard;      // last frame from the peer
  Status lost;
  // Its data endpoint's close is in flight: until it completes, a put the
  // peer sent may still be written into our memory (software puts over TCP
  // are applied by our progress), so regions it holds keys to stay mapped.
  int data_closing = 0;  // data endpoint closes in flight (one per stream)
  // Message RMA (Impl::message_rma): flush tokens sent to it and answered.
  uint64_t flush_sent = 0;
  uint64_t flush_answered = 0;
  std::optional<LinkShaper> shaper;
  // Message RMA over an emulated link with a delay: its puts (and flush
  // requests, which must not overtake them) arrive here and are applied
  // one delay later, in order, from Progress. The delay is then in when
  // the data becomes visible, as on a real link, not only in when the
  // sender's operation completes.
  struct Held {
    SteadyClock::time_point due;
    uint64_t address = 0;       // a put: where its bytes go
    std::vector<uint8_t> data;
    bool flush = false;         // a flush request: answer `token` once the puts before it are applied
    uint64_t token = 0;
    uint64_t barrier = 0;       // apply (or answer) once this many puts from the peer are applied
  };
  std::deque<Held> held;
  // Link faults in force on the link to this peer (link_faults.h), from
  // the launcher's file: while dropped, nothing from it is taken in (its
  // frames wait in held_frames, its puts in `held`) and our puts to it
  // complete no earlier than drop_until; while slowed, fault_shaper
  // replaces `shaper`. link_fault describes it for logs ("" = none).
  SteadyClock::time_point drop_until{};
  std::optional<LinkShaper> fault_shaper;
  std::deque<Frame> held_frames;
  std::string link_fault;
  bool Dropped(SteadyClock::time_point now) const { return drop_until > now; }
  // The shaper of one-sided traffic to it now (nullptr: an ideal link).
  LinkShaper* ActiveShaper() { return fault_shaper ? &*fault_shaper : shaper ? &*shaper : nullptr; }
  // Its control messages queued and not yet read (bounded by NodeOptions).
  size_t unread_messages = 0;
  size_t unread_bytes = 0;

  std::string Label() const { return address + (name.empty() ? "" : " (" + name + ")"); }
};

// A rendezvous receive in flight (large active messages).
struct RndvReceive {
  Frame frame;
  bool done = false;
  ucs_status_t status = UCS_OK;
};

// A send whose buffer must stay alive until UCX is done with it.
struct PendingSend {
  void* request = nullptr;
  std::string buffer;
};

struct Node::Impl {
  NodeOptions options;
  // Data plane: memory regions, one-sided traffic and bulk messages, on the
  // transports UCX picks (shared memory on one host).
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  // Control plane: handshake, control messages and failure detection, on TCP
  // only: the kernel resets a dead process's sockets, so a SIGKILLed peer is
  // noticed at once, which shared-memory lanes cannot promise.
  ucp_context_h ctrl_context = nullptr;
  ucp_worker_h ctrl_worker = nullptr;
  ucp_listener_h listener = nullptr;
  uint16_t listen_port = 0;  // the listener's bound port (its sockets are fenced by port at teardown)

  PeerId next_id = 1;
  std::unordered_map<PeerId, PeerState> peers;
  std::unordered_map<ucp_ep_h, PeerId> by_ep;
  std::unordered_map<ucp_ep_h, PeerId> by_data_ep;
  std::string worker_address;  // ours, handed to peers in the handshake
  std::deque<ucp_conn_request_h> conn_requests;
  std::deque<Frame> frames;
  std::deque<std::unique_ptr<RndvReceive>> rndv;
  std::vector<PendingSend> pending_sends;
  // Bytes of data-plane messages (put headers, flush answers) UCX still
  // sends from: freed by the send's callback, or by ~Node for those whose
  // callback never ran (ucp_worker_destroy runs none; LeakSanitizer found
  // them after a peer was killed mid-put).
  struct SendBuffer;  // node_data.cc
  std::unordered_set<SendBuffer*> data_send_buffers;
  void FreeDataSendBuffers();  // ~Node, after the data worker is gone
  std::vector<void*> closing;       // control ep close requests in flight
  std::vector<std::pair<void*, PeerId>> closing_data;  // data ep close requests in flight, by peer
  // Endpoints to close from Progress; `flush` closes deliver what was sent
  // first (a refusal must reach the refused), force closes are for the dead.
  // Data endpoints (error mode NONE) are always flush-closed: UCX refuses to
  // force-close them, and one left open after its peer failed keeps its id,
  // so a software put arriving for it later makes UCX 1.13 abort the process
  // (ucp_put_handler answers through the failed endpoint: "unexpected error").
  struct Closing {
    ucp_ep_h ep;
    bool flush;
    bool data = false;  // a data endpoint: its close completes with the data plane's progress
    PeerId peer = 0;    // whose data endpoint (PeerState::data_closing)
  };
  std::vector<Closing> to_close;
  std::deque<PeerId> accepted;
  std::deque<ControlMessage> control;
  std::deque<BulkMessage> bulk;
  size_t idle_spins = 0;
  SteadyClock::time_point idle_since;  // the first idle look of this idle streak ({} while busy)
  bool sleep_when_idle = true;         // NodeOptions::sleep_when_idle
  SteadyClock::time_point last_progress;
  static constexpr std::chrono::milliseconds kIdleSleepAfter{50};
  static constexpr std::chrono::microseconds kIdleSleep{500};
  static constexpr std::chrono::milliseconds kNewWaitGap{2};  // longer than kIdleSleep plus a look

  // Regions registered with UCX. A live region maps to the peers that were
  // given its key (Node::Share); a dropped one moves to the graveyard while
  // any of those peers may still write into it (MayWrite: connected, or its
  // data endpoint still closing; see MemoryRegion in node.h).
  std::unordered_map<ucp_mem_h, std::vector<PeerId>> key_holders;
  struct Retired {
    ucp_mem_h memh;
    std::vector<PeerId> peers;
  };
  std::vector<Retired> graveyard;
  // Where each registered region lives, for checking a message put's range.
  std::unordered_map<ucp_mem_h, std::pair<uint64_t, size_t>> spans;

  // Over TCP, UCX emulates put with messages whose handler answers the
  // putter through the endpoint the put names; when that endpoint has
  // failed (the putter was SIGKILLed, its RST already here) the answer
  // fails and UCX 1.13 aborts the process (ucs_fatal "unexpected error" in
  // ucp_rma_sw_send_cmpl). So with transports "tcp", puts travel as our own
  // eager active messages (kPutAm), applied in order by OnPutAm after their
  // range is checked against the regions shared with the sender, and Flush
  // is a token answered from Progress (never from a UCX handler). Gets still
  // use UCX's emulation.
  bool message_rma = false;
  std::vector<std::pair<PeerId, uint64_t>> flush_answers;  // to send from Progress

  // --- node.cc: the progress loop ---
  void Progress();
  // The control plane alone (no handlers of the data plane run): teardown.
  void ProgressControl();
  // Operations that complete inline (shared memory) never need a wait, but
  // the Node must still run heartbeats and notice lost peers: drive progress
  // at least once per millisecond of such traffic.
  void MaybeProgress() {
    if (SteadyClock::now() - last_progress > std::chrono::milliseconds(1)) Progress();
  }
  template <typename T, typename Get>
  static void ReapRequests(std::vector<T>& v, Get get) {
    for (size_t i = 0; i < v.size();) {
      void* req = get(v[i]);
      if (ucp_request_check_status(req) != UCS_INPROGRESS) {
        ucp_request_free(req);
        v[i] = std::move(v.back());
        v.pop_back();
      } else {
        ++i;
      }
    }
  }

  // --- node_handshake.cc: control plane and handshake ---
  static void OnConnRequest(ucp_conn_request_h request, void* arg);
  void AcceptConnection(ucp_conn_request_h request);
  void Refuse(PeerState& p, const std::string& reason, Status why);
  // Runs the handshake state machine on a control frame; a ready peer's user
  // messages go to QueueControl.
  void HandleControl(PeerState& p, const std::vector<uint8_t>& bytes);
  // Shapes a peer on another emulated host (emulated_links.h); no-op otherwise.
  void ShapeEmulatedLink(PeerState& p);

  // --- node_messages.cc: active messages, control and bulk ---
  static ucs_status_t OnAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                           const ucp_am_recv_param_t* param, uint16_t am_id);
  static ucs_status_t OnControlAm(void* arg, const void* h, size_t hl, void* d, size_t l, const ucp_am_recv_param_t* p);
  static ucs_status_t OnBulkAm(void* arg, const void* h, size_t hl, void* d, size_t l, const ucp_am_recv_param_t* p);
  static void OnRndvDone(void* request, ucs_status_t status, size_t length, void* user_data);
  Status SendEnvelope(PeerState& p, wire::Envelope env);
  // Starts an active-message send; the buffer is kept until UCX is done.
  Status SendRaw(PeerState& p, uint16_t am_id, std::string buffer, void** request_out = nullptr);
  bool StillPending(void* request) const;
  // Attributes a received frame to its peer and dispatches it (or holds it
  // while the peer's link drops everything).
  void HandleFrame(Frame& f);
  void DispatchFrame(PeerState& p, Frame& f);
  // Frames held while a link dropped, handled in order once it is back
  // (after the puts held with them are applied).
  size_t ReleaseHeldFrames();
  bool holding_frames = false;  // some peer has held_frames (skip the walk otherwise)
  bool holding_puts = false;    // some peer has held puts or flushes (ApplyHeld walks only then)

  // --- link faults (link_faults.h), node_link_faults.cc ---
  std::optional<LinkFaultWatcher> link_faults;
  SteadyClock::time_point next_link_fault_check{};
  // Re-reads the launcher's file now and then and applies what is in force
  // to every ready peer on another emulated host.
  void UpdateLinkFaults();
  void ApplyLinkFault(PeerState& p, const std::optional<LinkFault>& fault, int64_t now_ms);
  // Queues a ready peer's message for ReceiveControl. A peer whose unread
  // messages would exceed the bounds in NodeOptions is lost instead
  // (ProtocolError) and its unread messages are discarded.
  void QueueControl(PeerState& p, uint32_t kind, std::string payload);
  void DropUnreadControl(PeerId id);

  // --- node_data.cc: data plane and regions ---
  static void OnDataEpError(void* arg, ucp_ep_h ep, ucs_status_t status);
  Status CreateDataEp(PeerState& p, const std::string& address);
  // A dropped region: unregistered at once unless a live peer holds its key.
  void Retire(ucp_mem_h memh);
  void SweepGraveyard();

  // --- node_peers.cc: peer life cycle and failure detection ---
  static void OnEpError(void* arg, ucp_ep_h ep, ucs_status_t status);
  PeerState* Find(PeerId id);
  bool Live(PeerId id) {
    PeerState* p = Find(id);
    return p && p->phase != Phase::kLost;
  }
  // Whether the peer may still write into our regions: live, or lost with
  // its data endpoint still closing.
  bool MayWrite(PeerId id) {
    PeerState* p = Find(id);
    return p && (p->phase != Phase::kLost || p->data_closing > 0);
  }
  // Message RMA: the region shared with `peer` that holds [address,
  // address + length), if any.
  bool SharedRange(PeerId peer, uint64_t address, size_t length) const;
  // Sends a small message on the peer's data endpoint; the bytes live until
  // UCX is done with them. False if the send failed at once.
  bool SendDataAm(PeerState& p, uint16_t am_id, std::string bytes);
  // A put as kPutAm messages (eager pieces, round-robin over the peer's
  // TCP streams); the last piece's request (null or an error), and in
  // `more` the last request of every other stream the put used.
  ucs_status_ptr_t SendPut(PeerState& p, const void* local, size_t size, uint64_t address, std::vector<void*>& more);
  // Applies a put from `p` now (its range is checked again) and counts it.
  void ApplyPut(PeerState& p, uint64_t address, const void* data, size_t length);
  void SendFlushAnswers();
  // Applies held puts and flush requests whose delay has passed (PeerState::held).
  size_t ApplyHeld();
  // The receive-side delay of message RMA from `p` (0: apply at once).
  static std::chrono::microseconds HeldDelay(const PeerState& p) {
    return p.fault_shaper ? p.fault_shaper->shape().delay
           : p.shaper     ? p.shaper->shape().delay
                          : std::chrono::microseconds(0);
  }
  static ucs_status_t OnPutAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                              const ucp_am_recv_param_t* param);
  static ucs_status_t OnFlushAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                const ucp_am_recv_param_t* param);
  static ucs_status_t OnFlushAckAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                   const ucp_am_recv_param_t* param);
  PeerId DataPeerOf(const ucp_am_recv_param_t* param) const;
  std::optional<std::pair<PeerId, uint64_t>> FlushTokenOf(const void* data, size_t length,
                                                          const ucp_am_recv_param_t* param) const;
  // The streams to use with a peer that asked for `theirs`.
  int AgreedStreams(uint32_t theirs) const {
    return static_cast<int>(std::min<uint32_t>(std::max<uint32_t>(theirs, 1), static_cast<uint32_t>(options.tcp_streams)));
  }
  // Creates the peer's extra TCP streams (message RMA, tcp_streams > 1).
  Status CreateStreamEps(PeerState& p, const ucp_ep_params_t& params);
  // Queues the peer's data endpoint for a (flushing) close.
  void CloseDataEp(PeerState& p);
  // Frees finished data endpoint closes and clears their peers' data_closing.
  void ReapDataCloses();
  PeerId AddPeer(ucp_ep_h ep, std::string address, Phase phase);
  // Marks the peer lost with `why` (logged, naming it). Messages it sent
  // before are still delivered unless `deliver` is false.
  void LosePeer(PeerId id, Status why, bool close_ep, bool flush_close = false, bool deliver = true);
  // Heartbeats to ready peers, and loss of silent peers and stalled handshakes.
  void CheckPeers();
  // CheckPeers' previous run. Progress runs it at most every
  // kPeerCheckEvery: it walks every peer, which at a thousand peers was
  // most of a busy loop's time; timeouts and heartbeats are coarser.
  SteadyClock::time_point last_peer_check;
  static constexpr std::chrono::milliseconds kPeerCheckEvery{5};
  // Called by CheckPeers at its start (`now`); updates last_peer_check. A
  // gap since the previous check longer than half the peer timeout means
  // this node itself was not
  // running (its process stopped, its thread blocked in a slow fsync, the
  // whole machine frozen): what its peers sent meanwhile still waits unread,
  // and a peer that was itself frozen has not been scheduled to send yet.
  // Judging their silence across the gap would drop every peer at once, so
  // the excess over that half moves every silence and handshake clock
  // forward (logged once per stall). A node driven as its contract asks
  // (more often than the timeout) is unaffected.
  void ExcuseOwnStall(SteadyClock::time_point now);
  // Starts the closes queued in to_close.
  void CloseEndpoints();
  Status PeerUsable(PeerId id);
};

}  // namespace tenax::net

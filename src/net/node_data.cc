// The data plane: memory regions (registration, keys handed to peers, the
// graveyard of dropped regions), remote regions, one-sided put/get, fences,
// flushes, waits and link emulation.
#include <algorithm>
#include <cstring>

#include "node_internal.h"

namespace tenax::net {

// A UCX worker address is a few hundred bytes; more is not one.
constexpr size_t kMaxWorkerAddressBytes = 64 << 10;

// ---------------------------------------------------------------- handles

MemoryRegion::MemoryRegion(MemoryRegion&& o) noexcept { *this = std::move(o); }
MemoryRegion& MemoryRegion::operator=(MemoryRegion&& o) noexcept {
  if (this != &o) {
    Reset();
    owner_ = std::exchange(o.owner_, nullptr);
    memh_ = std::exchange(o.memh_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    descriptor_ = std::move(o.descriptor_);
  }
  return *this;
}
MemoryRegion::~MemoryRegion() { Reset(); }
void MemoryRegion::Reset() {
  if (memh_) static_cast<Node::Impl*>(owner_)->Retire(static_cast<ucp_mem_h>(memh_));
  memh_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

RemoteRegion::RemoteRegion(RemoteRegion&& o) noexcept { *this = std::move(o); }
RemoteRegion& RemoteRegion::operator=(RemoteRegion&& o) noexcept {
  if (this != &o) {
    Reset();
    peer_ = o.peer_;
    address_ = o.address_;
    size_ = o.size_;
    rkey_ = std::exchange(o.rkey_, nullptr);
  }
  return *this;
}
RemoteRegion::~RemoteRegion() { Reset(); }
void RemoteRegion::Reset() {
  if (rkey_) ucp_rkey_destroy(static_cast<ucp_rkey_h>(rkey_));
  rkey_ = nullptr;
}

Op::Op(Op&& o) noexcept { *this = std::move(o); }
Op& Op::operator=(Op&& o) noexcept {
  if (this != &o) {
    Release();
    request_ = std::exchange(o.request_, nullptr);
    more_requests_ = std::move(o.more_requests_);
    o.more_requests_.clear();
    status_ = std::move(o.status_);
    peer_ = o.peer_;
    complete_at_ = o.complete_at_;
  }
  return *this;
}
Op::~Op() { Release(); }
void Op::Release() {
  if (request_) ucp_request_free(request_);  // UCX completes and frees it
  request_ = nullptr;
  for (void* r : more_requests_) ucp_request_free(r);
  more_requests_.clear();
}

// ------------------------------------------------------- data endpoints

void Node::Impl::OnDataEpError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* self = static_cast<Impl*>(arg);
  auto it = self->by_data_ep.find(ep);
  if (it == self->by_data_ep.end()) return;
  self->LosePeer(it->second, PeerLost("data connection lost (" + UcxError(status) + ")"), /*close_ep=*/true);
}

// The data endpoint: created from the peer's worker address once the
// handshake has authenticated it. Error mode NONE keeps UCX's shared-memory
// RMA lanes (with mode PEER, UCX 1.13 moves 64 MiB puts at ~26 MB/s instead
// of ~12 GB/s); the handler still reports what UCX notices, and the control
// endpoint detects a dead peer.
Status Node::Impl::CreateDataEp(PeerState& p, const std::string& address) {
  // UCX unpacks a worker address without a length and aborts the process on
  // a header it does not know (ucp_address_unpack's assertion: seen with a
  // peer that passed the handshake and sent garbage). Its layout starts with
  // a header byte (version and flags) and a 64-bit uuid; peers run the same
  // UCX, so their header byte equals ours. This keeps a malformed address
  // from reaching UCX; one forged past the header still can (UCX 1.13 has no
  // call that checks an address), but only from a peer that knows the secret.
  if (address.size() < 1 + 8 + 1 || address.size() > kMaxWorkerAddressBytes) {
    return ProtocolError("a worker address of " + std::to_string(address.size()) + " bytes");
  }
  if (worker_address.empty() || address[0] != worker_address[0]) {
    return ProtocolError("a worker address whose header is not UCX's (" + std::to_string(static_cast<uint8_t>(address[0])) +
                         ", ours is " + std::to_string(worker_address.empty() ? 0 : static_cast<uint8_t>(worker_address[0])) +
                         "): another UCX version, or not an address");
  }
  ucp_ep_params_t params{};
  params.field_mask =
      UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = OnDataEpError;
  params.err_handler.arg = this;
  ucs_status_t s = ucp_ep_create(worker, &params, &p.data_ep);
  if (s != UCS_OK) return ProtocolError("cannot open a data endpoint to the peer's address: " + UcxError(s));
  by_data_ep[p.data_ep] = p.id;
  if (message_rma && p.tcp_streams > 1) return CreateStreamEps(p, params);
  return Status::Ok();
}

// Streams 1..N-1: more endpoints to the same worker address. UCX matches
// the k-th endpoint each side creates towards the other (its connection
// sequence number), so the receiver's reply endpoint of a message on
// stream k is its own stream k, registered here as the same peer; each has
// its own TCP connection.
Status Node::Impl::CreateStreamEps(PeerState& p, const ucp_ep_params_t& params) {
  for (int k = 1; k < p.tcp_streams; ++k) {
    ucp_ep_h ep = nullptr;
    if (ucs_status_t s = ucp_ep_create(worker, &params, &ep); s != UCS_OK) {
      return ProtocolError("cannot open TCP stream " + std::to_string(k) + " to the peer: " + UcxError(s));
    }
    by_data_ep[ep] = p.id;
    p.stream_eps.push_back(ep);
  }
  return Status::Ok();
}

// ------------------------------------------------- message RMA (TCP peers)

namespace {

// Frees a message's bytes (header or payload) once UCX is done with them.
void FreeAfterSend(void* request, ucs_status_t, void* user_data);

}  // namespace

// A data-plane message's bytes, kept until UCX is done with them.
struct Node::Impl::SendBuffer {
  Node::Impl* impl;
  std::string bytes;
};

void Node::Impl::FreeDataSendBuffers() {
  for (SendBuffer* b : data_send_buffers) delete b;
  data_send_buffers.clear();
}

namespace {

void FreeAfterSend(void* request, ucs_status_t, void* user_data) {
  auto* b = static_cast<Node::Impl::SendBuffer*>(user_data);
  b->impl->data_send_buffers.erase(b);
  delete b;
  (void)request;
}

}  // namespace

PeerId Node::Impl::DataPeerOf(const ucp_am_recv_param_t* param) const {
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) return 0;
  auto it = by_data_ep.find(param->reply_ep);
  return it == by_data_ep.end() ? 0 : it->second;
}

bool Node::Impl::SharedRange(PeerId peer, uint64_t address, size_t length) const {
  auto inside = [&](ucp_mem_h memh) {
    auto s = spans.find(memh);
    return s != spans.end() && address >= s->second.first && length <= s->second.second &&
           address - s->second.first <= s->second.second - length;
  };
  for (const auto& [memh, holders] : key_holders) {
    if (std::find(holders.begin(), holders.end(), peer) != holders.end() && inside(memh)) return true;
  }
  for (const Retired& r : graveyard) {
    if (std::find(r.peers.begin(), r.peers.end(), peer) != r.peers.end() && inside(r.memh)) return true;
  }
  return false;
}

ucs_status_ptr_t Node::Impl::SendPut(PeerState& p, const void* local, size_t size, uint64_t address,
                                     std::vector<void*>& more) {
  // Pieces of at most kPutPiece bytes, each one eager message of one
  // fragment (UCX_TCP_*_SEG_SIZE is 512 KiB): the receiver copies each
  // straight from UCX's receive buffer. One message for the whole put would
  // be reassembled in a fresh buffer first, 5-8x slower for 64 MiB.
  constexpr size_t kPutPiece = 256 << 10;
  const auto* bytes = static_cast<const uint8_t*>(local);
  // The last request on each stream this put used (index 0 = data_ep);
  // sends on one endpoint complete in order.
  const size_t streams = 1 + p.stream_eps.size();
  std::vector<ucs_status_ptr_t> last_on(streams, nullptr);
  auto free_all = [&] {
    for (ucs_status_ptr_t r : last_on) {
      if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
    }
  };
  size_t off = 0;
  size_t stream = 0;
  do {
    const size_t n = std::min(kPutPiece, size - off);
    auto* owner = new SendBuffer{this, std::string(sizeof(PutHeader), '\0')};
    std::string* header = &owner->bytes;
    PutHeader h;
    h.address = address + off;
    h.barrier = p.fence_barrier;
    std::memcpy(header->data(), &h, sizeof h);
    stream = p.next_stream++ % streams;
    ucp_ep_h ep = stream == 0 ? p.data_ep : p.stream_eps[stream - 1];
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    // Eager only: a rendezvous message lands after later eager ones, and a
    // signal must never overtake its data (Fence relies on the order).
    param.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
    param.cb.send = FreeAfterSend;
    param.user_data = owner;
    ucs_status_ptr_t req = ucp_am_send_nbx(ep, kPutAm, header->data(), header->size(), bytes + off, n, &param);
    if (UCS_PTR_IS_PTR(req)) {
      data_send_buffers.insert(owner);
    } else {  // done (or failed) at once: no callback
      delete owner;
    }
    if (UCS_PTR_IS_ERR(req)) {
      free_all();
      return req;
    }
    ++p.puts_sent;
    if (UCS_PTR_IS_PTR(last_on[stream])) ucp_request_free(last_on[stream]);
    last_on[stream] = req;
    off += n;
  } while (off < size);
  // The last piece's stream stands for the put with its own request; the
  // others' last requests complete it too.
  for (size_t k = 0; k < streams; ++k) {
    if (k != stream && UCS_PTR_IS_PTR(last_on[k])) more.push_back(last_on[k]);
  }
  return last_on[stream];
}

bool Node::Impl::SendDataAm(PeerState& p, uint16_t am_id, std::string bytes) {
  if (!p.data_ep) return false;
  auto* owner = new SendBuffer{this, std::move(bytes)};
  std::string* payload = &owner->bytes;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
  param.cb.send = FreeAfterSend;
  param.user_data = owner;
  ucs_status_ptr_t req = ucp_am_send_nbx(p.data_ep, am_id, nullptr, 0, payload->data(), payload->size(), &param);
  if (!UCS_PTR_IS_PTR(req)) {
    delete owner;
    return !UCS_PTR_IS_ERR(req);
  }
  data_send_buffers.insert(owner);
  ucp_request_free(req);  // completes (and frees the payload) in the background
  return true;
}

void Node::Impl::SendFlushAnswers() {
  std::vector<std::pair<PeerId, uint64_t>> answers;
  answers.swap(flush_answers);
  for (const auto& [peer, token] : answers) {
    PeerState* p = Find(peer);
    if (!p || p->phase != Phase::kReady) continue;  // gone: its flush fails on its side
    (void)SendDataAm(*p, kFlushAckAm, std::string(reinterpret_cast<const char*>(&token), sizeof token));
  }
}

ucs_status_t Node::Impl::OnPutAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                 const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Impl*>(arg);
  const PeerId peer = self->DataPeerOf(param);
  if (peer == 0) return UCS_OK;  // unattributable (a peer already lost): drop
  PutHeader h;
  if (header_length != sizeof h || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    self->LosePeer(peer, ProtocolError("malformed put message"), true);
    return UCS_OK;
  }
  std::memcpy(&h, header, sizeof h);
  if (!self->SharedRange(peer, h.address, length)) {
    self->LosePeer(peer,
                   ProtocolError("put of " + std::to_string(length) + " bytes outside every region shared with it"),
                   true);
    return UCS_OK;
  }
  PeerState* p = self->Find(peer);
  if (!p) return UCS_OK;
  // Held while the link has a delay (puts from one peer then apply in
  // order, one delay late), or until the puts before the sender's last
  // Fence are applied (they may still be on another TCP stream). A put
  // whose barrier is met applies at once even when later ones wait: it
  // was sent before them.
  // A link that drops everything (a link fault) holds it to the fault's end.
  const auto now = SteadyClock::now();
  const bool dropped = p->Dropped(now);
  const bool delayed =
      dropped || HeldDelay(*p).count() > 0 || (!p->held.empty() && p->held.back().due > now);
  if (delayed || h.barrier > p->puts_applied) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    auto due = now + HeldDelay(*p);
    if (dropped) due = std::max(due, p->drop_until);
    if (!p->held.empty()) due = std::max(due, p->held.back().due);
    PeerState::Held held{due, h.address, std::vector<uint8_t>(bytes, bytes + length)};
    held.barrier = h.barrier;
    p->held.push_back(std::move(held));
    self->holding_puts = true;
    return UCS_OK;
  }
  if (length > 0) std::memcpy(reinterpret_cast<void*>(h.address), data, length);
  ++p->puts_applied;
  return UCS_OK;
}

size_t Node::Impl::ApplyHeld() {
  if (!holding_puts) return 0;  // the common case: no delay, no fault, no put ahead of its barrier
  size_t applied = 0;
  const auto now = SteadyClock::now();
  bool still_holding = false;
  for (auto& [id, p] : peers) {
    if (p.held.empty()) continue;
    if (p.phase == Phase::kLost) {  // a lost peer's writes are void, as its later ones would be
      p.held.clear();
      continue;
    }
    // In arrival order, each once it is due (dues never decrease along the
    // queue) and its barrier is met; applying one may meet another's
    // barrier, so go round until nothing moves.
    for (bool moved = true; moved;) {
      moved = false;
      for (auto it = p.held.begin(); it != p.held.end() && it->due <= now;) {
        if (it->barrier > p.puts_applied) {
          ++it;
          continue;
        }
        if (it->flush) {
          flush_answers.emplace_back(id, it->token);
        } else {
          if (SharedRange(id, it->address, it->data.size()) && !it->data.empty()) {  // not retired meanwhile
            std::memcpy(reinterpret_cast<void*>(it->address), it->data.data(), it->data.size());
          }
          ++p.puts_applied;
        }
        it = p.held.erase(it);
        ++applied;
        moved = true;
      }
    }
    still_holding = still_holding || !p.held.empty();
  }
  holding_puts = still_holding;
  return applied;
}

// A flush message's sender and token, if well formed.
std::optional<std::pair<PeerId, uint64_t>> Node::Impl::FlushTokenOf(const void* data, size_t length,
                                                                    const ucp_am_recv_param_t* param) const {
  const PeerId peer = DataPeerOf(param);
  uint64_t token = 0;
  if (peer == 0 || length != sizeof token || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) return std::nullopt;
  std::memcpy(&token, data, sizeof token);
  return std::make_pair(peer, token);
}

ucs_status_t Node::Impl::OnFlushAm(void* arg, const void*, size_t, void* data, size_t length,
                                   const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Impl*>(arg);
  // Answered from Progress, not from this handler, once the puts sent
  // before it are applied: behind them when they are held (an emulated
  // delay, or pieces still on another TCP stream).
  const PeerId peer = self->DataPeerOf(param);
  FlushRequest f;
  if (peer == 0 || length != sizeof f || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) return UCS_OK;
  std::memcpy(&f, data, sizeof f);
  PeerState* p = self->Find(peer);
  if (!p) return UCS_OK;
  const auto now = SteadyClock::now();
  if (!p->held.empty() || f.barrier > p->puts_applied || p->Dropped(now)) {
    PeerState::Held h;
    h.due = p->held.empty() ? now : p->held.back().due;
    if (p->Dropped(now)) h.due = std::max(h.due, p->drop_until);
    h.flush = true;
    h.token = f.token;
    h.barrier = f.barrier;
    p->held.push_back(std::move(h));
    self->holding_puts = true;
  } else {
    self->flush_answers.emplace_back(peer, f.token);
  }
  return UCS_OK;
}

ucs_status_t Node::Impl::OnFlushAckAm(void* arg, const void*, size_t, void* data, size_t length,
                                      const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Impl*>(arg);
  if (auto t = self->FlushTokenOf(data, length, param)) {
    if (PeerState* p = self->Find(t->first)) p->flush_answered = std::max(p->flush_answered, t->second);
  }
  return UCS_OK;
}

// ---------------------------------------------------------------- regions

void Node::Impl::Retire(ucp_mem_h memh) {
  Retired r{memh, {}};
  if (auto it = key_holders.find(memh); it != key_holders.end()) {
    for (PeerId id : it->second) {
      if (MayWrite(id)) r.peers.push_back(id);
    }
    key_holders.erase(it);
  }
  if (r.peers.empty()) {
    spans.erase(memh);
    ucp_mem_unmap(context, memh);
  } else {
    graveyard.push_back(std::move(r));
  }
}

void Node::Impl::SweepGraveyard() {
  for (size_t i = 0; i < graveyard.size();) {
    const bool live =
        std::any_of(graveyard[i].peers.begin(), graveyard[i].peers.end(), [this](PeerId id) { return MayWrite(id); });
    if (live) {
      ++i;
    } else {
      spans.erase(graveyard[i].memh);
      ucp_mem_unmap(context, graveyard[i].memh);
      graveyard[i] = std::move(graveyard.back());
      graveyard.pop_back();
    }
  }
}

Result<MemoryRegion> Node::Register(void* data, size_t size) {
  if (size == 0) return InvalidArgument("cannot register an empty region");
  return MapRegion(data, size, /*allocate=*/false);
}

Result<MemoryRegion> Node::Allocate(size_t size) {
  if (size == 0) return InvalidArgument("cannot allocate an empty region");
  return MapRegion(nullptr, size, /*allocate=*/true);
}

Result<MemoryRegion> Node::MapRegion(void* data, size_t size, bool allocate) {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.address = data;
  mp.length = size;
  mp.flags = allocate ? UCP_MEM_MAP_ALLOCATE : 0;
  ucp_mem_h memh = nullptr;
  if (ucs_status_t s = ucp_mem_map(impl_->context, &mp, &memh); s != UCS_OK) {
    return Unavailable(std::string("cannot ") + (allocate ? "allocate " : "register ") + std::to_string(size) +
                       " bytes: " + UcxError(s));
  }
  impl_->key_holders[memh];  // registered, its key given to nobody yet
  MemoryRegion r;            // owns memh from here on, also on the error paths below
  r.owner_ = impl_.get();
  r.memh_ = memh;
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  if (ucs_status_t s = ucp_mem_query(memh, &attr); s != UCS_OK) return Internal("mem query: " + UcxError(s));
  r.data_ = static_cast<uint8_t*>(attr.address);
  r.size_ = size;
  impl_->spans[memh] = {reinterpret_cast<uint64_t>(r.data_), size};
  void* rkey = nullptr;
  size_t rkey_size = 0;
  if (ucs_status_t s = ucp_rkey_pack(impl_->context, memh, &rkey, &rkey_size); s != UCS_OK) {
    return Internal("rkey pack: " + UcxError(s));
  }
  r.descriptor_.address = reinterpret_cast<uint64_t>(r.data_);
  r.descriptor_.length = size;
  r.descriptor_.rkey.assign(static_cast<char*>(rkey), rkey_size);
  ucp_rkey_buffer_release(rkey);
  return r;
}

Result<RegionDescriptor> Node::Share(const MemoryRegion& region, PeerId peer) {
  if (!region.memh_ || region.owner_ != impl_.get()) {
    return InvalidArgument("[" + options_.name + "] cannot share a region that is empty or belongs to another node");
  }
  TENAX_RETURN_IF_ERROR(impl_->PeerUsable(peer));
  std::vector<PeerId>& holders = impl_->key_holders[static_cast<ucp_mem_h>(region.memh_)];
  std::erase_if(holders, [this](PeerId id) { return !impl_->Live(id); });  // elastic groups: keep it short
  if (std::find(holders.begin(), holders.end(), peer) == holders.end()) holders.push_back(peer);
  return region.descriptor_;
}

size_t Node::RegisteredRegions() const { return impl_->key_holders.size() + impl_->graveyard.size(); }

// ------------------------------------------------------ remote regions

Result<RemoteRegion> Node::Import(PeerId peer, const RegionDescriptor& d) {
  TENAX_RETURN_IF_ERROR(impl_->PeerUsable(peer));
  PeerState& p = impl_->peers[peer];
  if (d.rkey.empty() || d.length == 0) return ProtocolError("peer " + p.Label() + ": empty region descriptor");
  ucp_rkey_h rkey = nullptr;
  if (ucs_status_t s = ucp_ep_rkey_unpack(p.data_ep, d.rkey.data(), &rkey); s != UCS_OK) {
    return ProtocolError("peer " + p.Label() + ": unusable remote key: " + UcxError(s));
  }
  RemoteRegion r;
  r.peer_ = peer;
  r.address_ = d.address;
  r.size_ = d.length;
  r.rkey_ = rkey;
  return r;
}

Result<uint8_t*> Node::MapRemote(const RemoteRegion& remote) {
  TENAX_RETURN_IF_ERROR(impl_->PeerUsable(remote.peer()));
  if (impl_->peers[remote.peer()].ActiveShaper()) return Unavailable("link emulation is on for this peer");
  void* ptr = nullptr;
  ucs_status_t s = ucp_rkey_ptr(static_cast<ucp_rkey_h>(remote.rkey_), remote.address(), &ptr);
  if (s != UCS_OK || ptr == nullptr) return Unavailable("region not mappable here: " + UcxError(s));
  return static_cast<uint8_t*>(ptr);
}

// --------------------------------------------------- one-sided traffic

Op Node::Put(const void* local, size_t size, const RemoteRegion& remote, size_t remote_offset) {
  return Rma(/*put=*/true, const_cast<void*>(local), size, remote, remote_offset);
}

Op Node::Get(void* local, size_t size, const RemoteRegion& remote, size_t remote_offset) {
  return Rma(/*put=*/false, local, size, remote, remote_offset);
}

Op Node::Rma(bool put, void* local, size_t size, const RemoteRegion& remote, size_t remote_offset) {
  const char* what = put ? "put" : "get";
  Op op;
  op.peer_ = remote.peer();
  if (Status st = impl_->PeerUsable(remote.peer()); !st.ok()) {
    op.status_ = st;
    return op;
  }
  if (remote_offset > remote.size() || size > remote.size() - remote_offset) {
    op.status_ = InvalidArgument(std::string(what) + " of " + std::to_string(size) + " bytes at offset " +
                                 std::to_string(remote_offset) + " overruns a remote region of " +
                                 std::to_string(remote.size()) + " bytes");
    return op;
  }
  PeerState& p = impl_->peers[remote.peer()];
  int transmissions = 1;
  const auto now = SteadyClock::now();
  if (LinkShaper* shaper = p.ActiveShaper()) {
    auto plan = shaper->Schedule(size, now);
    if (plan.failed) {
      op.status_ = PeerLost("peer " + p.Label() + ": emulated link dropped every retransmission");
      return op;
    }
    transmissions = plan.transmissions;
    op.complete_at_ = plan.complete_at;
  }
  // A link that drops everything: done once it is back (and the bytes
  // delivered, as a real transport's retransmission would).
  if (p.Dropped(now)) op.complete_at_ = std::max(op.complete_at_, p.drop_until);
  ucp_request_param_t param{};
  ucs_status_ptr_t req = nullptr;
  auto rkey = static_cast<ucp_rkey_h>(remote.rkey_);
  for (int i = 0; i < transmissions; ++i) {  // lost transmissions really move the bytes again
    if (req && !UCS_PTR_IS_ERR(req)) ucp_request_free(req);
    if (put && impl_->message_rma) {
      for (void* r : op.more_requests_) ucp_request_free(r);
      op.more_requests_.clear();
      req = impl_->SendPut(p, local, size, remote.address() + remote_offset, op.more_requests_);
    } else {
      req = put ? ucp_put_nbx(p.data_ep, local, size, remote.address() + remote_offset, rkey, &param)
                : ucp_get_nbx(p.data_ep, local, size, remote.address() + remote_offset, rkey, &param);
    }
  }
  if (UCS_PTR_IS_ERR(req)) {
    op.Release();
    op.status_ = PeerLost("peer " + p.Label() + ": " + what + " failed: " + UcxError(UCS_PTR_STATUS(req)));
  } else {
    op.request_ = req;
  }
  return op;
}

Status Node::Fence(PeerId peer) {
  TENAX_RETURN_IF_ERROR(impl_->PeerUsable(peer));
  if (impl_->message_rma) {
    // Puts sent from now on apply only after every put sent so far (their
    // barrier), whichever TCP stream each took.
    PeerState& p = impl_->peers[peer];
    p.fence_barrier = p.puts_sent;
    return Status::Ok();
  }
  ucs_status_t s = ucp_worker_fence(impl_->worker);
  return s == UCS_OK ? Status::Ok() : Internal("fence: " + UcxError(s));
}

Status Node::Wait(Op& op, Deadline deadline) {
  impl_->MaybeProgress();
  while (true) {
    // A put over several streams: its other streams' last pieces first.
    while (!op.more_requests_.empty()) {
      void* r = op.more_requests_.back();
      ucs_status_t s = ucp_request_check_status(r);
      if (s == UCS_INPROGRESS) break;
      ucp_request_free(r);
      op.more_requests_.pop_back();
      if (s != UCS_OK && op.status_.ok()) {
        PeerState* p = impl_->Find(op.peer_);
        op.status_ = (p && !p->lost.ok()) ? p->lost
                                          : PeerLost("peer " + (p ? p->Label() : std::to_string(op.peer_)) +
                                                     ": operation failed: " + UcxError(s));
      }
    }
    if (op.request_) {
      ucs_status_t s = ucp_request_check_status(op.request_);
      if (s != UCS_INPROGRESS) {
        ucp_request_free(op.request_);
        op.request_ = nullptr;
        if (s != UCS_OK) {
          PeerState* p = impl_->Find(op.peer_);
          op.status_ = (p && !p->lost.ok()) ? p->lost
                                            : PeerLost("peer " + (p ? p->Label() : std::to_string(op.peer_)) +
                                                       ": operation failed: " + UcxError(s));
        }
      }
    }
    if (!op.request_ && op.more_requests_.empty()) {
      if (!op.status_.ok()) return op.status_;
      if (SteadyClock::now() >= op.complete_at_) return Status::Ok();
    }
    if (PeerState* p = impl_->Find(op.peer_); p && p->phase == Phase::kLost) {
      op.Release();
      op.status_ = p->lost;
      return p->lost;
    }
    if (deadline.Expired()) {
      PeerState* p = impl_->Find(op.peer_);
      return DeadlineExceeded("operation on peer " + (p ? p->Label() : std::to_string(op.peer_)) +
                              " did not complete before the deadline");
    }
    impl_->Progress();
  }
}

Status Node::WaitAll(std::vector<Op>& ops, Deadline deadline) {
  for (auto& op : ops) TENAX_RETURN_IF_ERROR(Wait(op, deadline));
  return Status::Ok();
}

Status Node::Flush(PeerId peer, Deadline deadline) {
  TENAX_RETURN_IF_ERROR(impl_->PeerUsable(peer));
  PeerState& p = impl_->peers[peer];
  if (impl_->message_rma) {
    // A token after the puts: the peer answers it once it has applied
    // every earlier message from us (they are handled in order).
    FlushRequest f;
    f.token = ++p.flush_sent;
    f.barrier = p.puts_sent;
    const uint64_t token = f.token;
    if (!impl_->SendDataAm(p, kFlushAm, std::string(reinterpret_cast<const char*>(&f), sizeof f))) {
      return PeerLost("peer " + p.Label() + ": flush request not sent");
    }
    while (true) {
      PeerState* q = impl_->Find(peer);
      if (!q) return NotFound("unknown peer " + std::to_string(peer));
      if (q->flush_answered >= token) return Status::Ok();
      if (q->phase == Phase::kLost) return q->lost;
      if (deadline.Expired()) return DeadlineExceeded("flush of peer " + q->Label() + " not answered before the deadline");
      impl_->Progress();
    }
  }
  ucp_request_param_t param{};
  ucs_status_ptr_t req = ucp_ep_flush_nbx(p.data_ep, &param);  // one-sided traffic rides the data endpoint
  Op op;
  op.peer_ = peer;
  if (UCS_PTR_IS_ERR(req)) return PeerLost("peer " + p.Label() + ": flush failed: " + UcxError(UCS_PTR_STATUS(req)));
  op.request_ = req;
  return Wait(op, deadline);
}

void Node::SetLinkShape(PeerId peer, LinkShape shape) {
  if (PeerState* p = impl_->Find(peer)) {
    if (shape.is_ideal()) {
      p->shaper.reset();
    } else {
      p->shaper.emplace(shape, peer);
    }
  }
}

}  // namespace tenax::net

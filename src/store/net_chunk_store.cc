#include "tenax/store/net_chunk_store.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "tenax/core/checksum.h"
#include "tenax/store/storage_codec.h"

namespace tenax::store {

Result<std::unique_ptr<NetChunkStore>> NetChunkStore::Connect(net::Node* node, std::string name,
                                                              const std::string& host, uint16_t port,
                                                              size_t max_chunk_bytes,
                                                              std::chrono::milliseconds connect_timeout) {
  std::unique_ptr<NetChunkStore> s(new NetChunkStore(node, std::move(name), host, port));
  s->connect_timeout_ = connect_timeout;
  auto recv = node->Allocate(max_chunk_bytes);
  if (!recv.ok()) return Status(recv.status().code(), s->Describe() + ": " + recv.status().message());
  s->recv_ = std::move(*recv);
  TENAX_RETURN_IF_ERROR(s->Handshake(Deadline::After(connect_timeout)));
  return s;
}

Status NetChunkStore::Handshake(Deadline deadline) {
  auto fail = [&](const Status& st) { return Status(st.code(), Describe() + ": " + st.message()); };
  auto peer = node_->Connect(host_, port_, deadline);
  if (!peer.ok()) return fail(peer.status());
  peer_ = *peer;
  auto desc = node_->Share(recv_, peer_);
  if (!desc.ok()) return fail(desc.status());
  wire::StorageHello hello;
  hello.set_client(node_->options().name);
  hello.set_recv_address(desc->address);
  hello.set_recv_length(desc->length);
  hello.set_recv_rkey(desc->rkey);
  if (Status st = node_->SendControl(peer_, kStorageHelloKind, hello.SerializeAsString(), deadline); !st.ok()) {
    return fail(st);
  }
  auto msg = node_->ReceiveControl(deadline, peer_, kStorageWelcomeKind);
  if (!msg.ok()) return fail(msg.status());
  auto welcome = DecodeStorageWelcome(msg->payload, Describe());
  if (!welcome.ok()) return welcome.status();
  if (!welcome->error().empty()) return Unavailable(welcome->error());
  auto staging = node_->Import(peer_, {welcome->staging_address(), welcome->staging_length(), welcome->staging_rkey()});
  if (!staging.ok()) return fail(staging.status());
  staging_ = std::move(*staging);
  if (shape_) node_->SetLinkShape(peer_, *shape_);
  connected_ = true;
  return Status::Ok();
}

void NetChunkStore::set_link_shape(const net::LinkShape& shape) {
  shape_ = shape;
  if (connected_) node_->SetLinkShape(peer_, shape);
}

Status NetChunkStore::EnsureConnected() {
  if (connected_ && node_->PeerStatus(peer_).ok()) return Status::Ok();
  const auto now = std::chrono::steady_clock::now();
  if (now < retry_after_) {
    return Unavailable(Describe() + ": not reachable (" + last_error_ + "); next attempt in " +
                       std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(retry_after_ - now).count()) +
                       " ms");
  }
  if (connected_) {
    node_->Disconnect(peer_, Deadline::At(now));
    connected_ = false;
  }
  if (Status st = Handshake(Deadline::After(connect_timeout_)); !st.ok()) {
    if (connected_) node_->Disconnect(peer_, Deadline::At(std::chrono::steady_clock::now()));
    connected_ = false;
    retry_after_ = std::chrono::steady_clock::now() + kReconnectBackoff;
    last_error_ = st.message();
    return st;
  }
  ++reconnects_;
  spdlog::info("{}: connected again (reconnect {})", Describe(), reconnects_);
  return Status::Ok();
}

template <typename T, typename F>
Result<T> NetChunkStore::WithConnection(F attempt) {
  for (int i = 0;; ++i) {
    TENAX_RETURN_IF_ERROR(EnsureConnected());
    Result<T> r = attempt();
    // Retry only when the connection itself broke (not on an answer).
    if (r.ok() || i == 1 || node_->PeerStatus(peer_).ok()) return r;
    spdlog::warn("{}: {}; connecting again", Describe(), r.status().message());
  }
}

Result<wire::ChunkReply> NetChunkStore::Call(wire::ChunkRequest& request) {
  const uint64_t id = next_request_++;
  request.set_request_id(id);
  const Deadline deadline = Deadline::After(timeout_);
  if (Status st = node_->SendControl(peer_, kChunkRequestKind, request.SerializeAsString(), deadline); !st.ok()) {
    return Status(st.code(), Describe() + ": " + st.message());
  }
  while (true) {
    auto msg = node_->ReceiveControl(deadline, peer_, kChunkReplyKind);
    if (!msg.ok()) return Status(msg.status().code(), Describe() + ": " + msg.status().message());
    TENAX_ASSIGN_OR_RETURN(wire::ChunkReply reply, DecodeChunkReply(msg->payload, Describe()));
    if (reply.request_id() < id) continue;  // the late answer to a request that timed out
    if (reply.request_id() != id) return ProtocolError(Describe() + ": a reply to request " + std::to_string(reply.request_id()));
    if (reply.code() != 0) return Status(static_cast<StatusCode>(reply.code()), reply.error());
    return reply;
  }
}

Status NetChunkStore::Put(const ChunkMeta& meta, std::span<const uint8_t> payload) {
  return WithConnection<bool>([&]() -> Result<bool> {
           TENAX_RETURN_IF_ERROR(PutOnce(meta, payload));
           return true;
         })
      .status();
}

Result<Chunk> NetChunkStore::Get(const ChunkId& id) {
  return WithConnection<Chunk>([&] { return GetOnce(id); });
}

Status NetChunkStore::PutOnce(const ChunkMeta& meta, std::span<const uint8_t> payload) {
  if (payload.size() > staging_.size()) {
    return InvalidArgument(meta.id.Describe() + ": " + std::to_string(payload.size()) + " bytes exceed " + Describe() +
                           "'s staging region of " + std::to_string(staging_.size()));
  }
  const Deadline deadline = Deadline::After(timeout_);
  net::Op op = node_->Put(payload.data(), payload.size(), staging_, 0);
  if (Status st = node_->Wait(op, deadline); !st.ok()) return Status(st.code(), Describe() + ": " + st.message());
  if (Status st = node_->Flush(peer_, deadline); !st.ok()) return Status(st.code(), Describe() + ": " + st.message());
  bytes_written_ += payload.size();
  ChunkMeta full = meta;
  full.payload_bytes = payload.size();
  full.payload_crc32c = Crc32c(payload);
  wire::ChunkRequest req;
  req.set_op(wire::ChunkRequest::PUT);
  *req.mutable_chunk() = HeaderOf(full);
  return Call(req).status();
}

Result<Chunk> NetChunkStore::GetOnce(const ChunkId& id) {
  wire::ChunkRequest req;
  req.set_op(wire::ChunkRequest::GET);
  ChunkMeta want;
  want.id = id;
  *req.mutable_chunk() = HeaderOf(want);
  TENAX_ASSIGN_OR_RETURN(wire::ChunkReply reply, Call(req));
  const ChunkMeta meta = MetaOf(reply.chunk());
  if (!(meta.id == id) || meta.payload_bytes > recv_.size()) {
    return ProtocolError(Describe() + ": asked for " + id.Describe() + ", the reply describes " + meta.id.Describe());
  }
  Chunk c;
  c.meta = meta;
  c.payload.assign(recv_.data(), recv_.data() + meta.payload_bytes);
  bytes_read_ += meta.payload_bytes;
  if (Crc32c(c.payload) != meta.payload_crc32c) {
    return DataLoss(Describe() + ": " + id.Describe() + " arrived with bytes that fail its CRC-32C");
  }
  return c;
}

Result<NetChunkStore::NodeStatus> NetChunkStore::QueryStatus() {
  return WithConnection<NodeStatus>([&]() -> Result<NodeStatus> {
    wire::ChunkRequest req;
    req.set_op(wire::ChunkRequest::STATUS);
    TENAX_ASSIGN_OR_RETURN(wire::ChunkReply reply, Call(req));
    return NodeStatus{reply.chunks_held(), reply.bytes_held(), reply.bad_chunks()};
  });
}

}  // namespace tenax::store

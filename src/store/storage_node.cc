#include "tenax/store/storage_node.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include "tenax/core/checksum.h"
#include "tenax/core/files.h"
#include "tenax/net/node.h"
#include "tenax/store/chunk_file.h"
#include "tenax/store/storage_codec.h"

namespace tenax::store {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct Client {
  std::string name;
  net::RemoteRegion recv;   // the client's receive region
  net::MemoryRegion staging;  // ours, for its writes
};

class StorageServer {
 public:
  StorageServer(const StorageNodeOptions& o, std::unique_ptr<net::Node> node) : o_(o), node_(std::move(node)) {}

  // Verifies every chunk file; quarantines bad ones.
  Status VerifyAll() {
    TENAX_RETURN_IF_ERROR(EnsureWritableDir(o_.dir));
    std::error_code ec;
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(o_.dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->path().parent_path().filename() == "quarantine") continue;
      if (it->is_regular_file() && it->path().extension() == ".chunk") files.push_back(it->path());
    }
    if (ec) return IoError("data node " + o_.name + ": cannot list " + o_.dir + ": " + ec.message());
    for (const fs::path& p : files) {
      auto meta = Verify(p);
      if (!meta.ok()) {
        Quarantine(p, meta.status());
        continue;
      }
      held_[meta->id.FileName()] = meta->payload_bytes;
    }
    return Status::Ok();
  }

  Status Serve() {
    auto last_scrub = SteadyClock::now();
    // An idle node sleeps between polls instead of spinning: six data nodes
    // and a trainer share two cores, and a spinning node takes the
    // trainer's. A request then waits at most one nap (kIdleNap) more;
    // while requests keep coming the node polls without sleeping.
    constexpr int kSpinPolls = 2000;
    constexpr auto kIdleNap = 200us;
    int idle_polls = 0;
    while (!(o_.stop && o_.stop())) {
      node_->Progress();
      while (true) {
        auto peer = node_->Accept(Deadline::At(SteadyClock::now()));
        if (!peer.ok()) break;
        if (o_.link.bandwidth_bytes_per_second > 0 || o_.link.delay.count() > 0) node_->SetLinkShape(*peer, o_.link);
      }
      auto msg = node_->ReceiveControl(Deadline::At(SteadyClock::now()));
      if (msg.ok()) {
        Handle(*msg);
        idle_polls = 0;
      } else if (++idle_polls > kSpinPolls) {
        std::this_thread::sleep_for(kIdleNap);
      }
      if (SteadyClock::now() - last_scrub >= o_.scrub_interval) {
        ScrubOne();
        last_scrub = SteadyClock::now();
      }
      // Forget clients that are gone.
      for (auto it = clients_.begin(); it != clients_.end();) {
        it = node_->PeerStatus(it->first).ok() ? std::next(it) : clients_.erase(it);
      }
    }
    return Status::Ok();
  }

  StorageNodeReport report() const {
    StorageNodeReport r = stats_;
    r.chunks = held_.size();
    r.bytes = 0;
    for (const auto& [name, bytes] : held_) r.bytes += bytes;
    return r;
  }

 private:
  std::string Label(net::PeerId peer) const {
    auto info = node_->Info(peer);
    return info.ok() ? info->name + " (" + info->address + ")" : "peer " + std::to_string(peer);
  }

  Result<ChunkMeta> Verify(const fs::path& p) {
    auto bytes = ReadFileBytes(p.string(), kMaxChunkPayloadBytes + kMaxChunkHeaderBytes + 16);
    if (!bytes.ok()) return bytes.status();
    TENAX_ASSIGN_OR_RETURN(ChunkView v, DecodeChunkFile(*bytes, p.string()));
    if ((fs::path(o_.dir) / v.meta.id.FileName()).lexically_normal() != p.lexically_normal()) {
      return DataLoss(p.string() + " holds " + v.meta.id.Describe() + " under another chunk's name");
    }
    return v.meta;
  }

  void Quarantine(const fs::path& p, const Status& why) {
    std::error_code ec;
    const fs::path q = fs::path(o_.dir) / "quarantine";
    fs::create_directories(q, ec);
    const fs::path to = q / (p.parent_path().filename().string() + "." + p.filename().string());
    fs::rename(p, to, ec);
    ++stats_.bad_chunks;
    const std::string rel = fs::relative(p, o_.dir, ec).string();
    held_.erase(rel);
    spdlog::warn("data node {}: chunk file {} is bad, moved to {}: {}", o_.name, p.string(), to.string(), why.message());
  }

  void ScrubOne() {
    if (held_.empty()) return;
    auto it = held_.upper_bound(scrub_cursor_);
    if (it == held_.end()) it = held_.begin();
    scrub_cursor_ = it->first;
    const fs::path p = fs::path(o_.dir) / it->first;
    auto meta = Verify(p);
    if (meta.ok()) return;
    if (meta.status().code() == StatusCode::kNotFound) {
      held_.erase(it);
      spdlog::warn("data node {}: chunk file {} vanished", o_.name, p.string());
      return;
    }
    Quarantine(p, meta.status());
  }

  void Reply(net::PeerId peer, const wire::ChunkReply& r) {
    if (Status st = node_->SendControl(peer, kChunkReplyKind, r.SerializeAsString(), Deadline::After(2s)); !st.ok()) {
      spdlog::warn("data node {}: cannot answer {}: {}", o_.name, Label(peer), st.message());
    }
  }

  void Drop(net::PeerId peer, const std::string& why) {
    spdlog::warn("data node {}: dropping {}: {}", o_.name, Label(peer), why);
    clients_.erase(peer);
    node_->Disconnect(peer, Deadline::After(500ms));
  }

  void Handle(const net::ControlMessage& m) {
    const std::string label = Label(m.from);
    if (m.kind == kStorageHelloKind) return OnHello(m, label);
    if (m.kind != kChunkRequestKind) return Drop(m.from, "a message of kind " + std::to_string(m.kind));
    auto it = clients_.find(m.from);
    if (it == clients_.end()) return Drop(m.from, "a request before its hello");
    auto req = DecodeChunkRequest(m.payload, label);
    if (!req.ok()) return Drop(m.from, req.status().message());
    wire::ChunkReply r;
    r.set_request_id(req->request_id());
    Status st;
    if (req->op() == wire::ChunkRequest::GET) {
      st = OnGet(m.from, it->second, *req, r);
    } else if (req->op() == wire::ChunkRequest::PUT) {
      st = OnPut(it->second, *req);
    } else {
      const StorageNodeReport now = report();
      r.set_chunks_held(now.chunks);
      r.set_bytes_held(now.bytes);
      r.set_bad_chunks(now.bad_chunks);
    }
    if (!st.ok()) {
      r.set_code(static_cast<uint32_t>(st.code()));
      r.set_error("data node " + o_.name + ": " + st.message());
    }
    Reply(m.from, r);
  }

  void OnHello(const net::ControlMessage& m, const std::string& label) {
    auto hello = DecodeStorageHello(m.payload, label);
    if (!hello.ok()) return Drop(m.from, hello.status().message());
    net::RegionDescriptor d{hello->recv_address(), hello->recv_length(), hello->recv_rkey()};
    auto recv = node_->Import(m.from, d);
    auto staging = node_->Allocate(o_.max_chunk_bytes);
    wire::StorageWelcome w;
    w.set_node(o_.name);
    if (!recv.ok() || !staging.ok()) {
      w.set_error("data node " + o_.name + " cannot serve: " +
                  (!recv.ok() ? recv.status().message() : staging.status().message()));
    } else if (auto desc = node_->Share(*staging, m.from); !desc.ok()) {
      w.set_error("data node " + o_.name + " cannot share its staging region: " + desc.status().message());
    } else {
      w.set_staging_address(desc->address);
      w.set_staging_length(desc->length);
      w.set_staging_rkey(desc->rkey);
      clients_[m.from] = Client{hello->client(), std::move(*recv), std::move(*staging)};
      spdlog::info("data node {}: serving {}", o_.name, label);
    }
    if (Status st = node_->SendControl(m.from, kStorageWelcomeKind, w.SerializeAsString(), Deadline::After(2s));
        !st.ok()) {
      clients_.erase(m.from);
    }
  }

  Status OnGet(net::PeerId peer, Client& c, const wire::ChunkRequest& req, wire::ChunkReply& r) {
    const ChunkId id{req.chunk().dataset(), req.chunk().stripe(), req.chunk().index()};
    const fs::path p = fs::path(o_.dir) / id.FileName();
    auto chunk = ReadChunkFile(p.string(), id);
    if (!chunk.ok()) {
      if (chunk.status().code() == StatusCode::kDataLoss) Quarantine(p, chunk.status());
      return chunk.status();
    }
    if (chunk->payload.size() > c.recv.size()) {
      return FailedPrecondition(id.Describe() + " has " + std::to_string(chunk->payload.size()) +
                                " bytes, more than the client's receive region");
    }
    net::Op op = node_->Put(chunk->payload.data(), chunk->payload.size(), c.recv, 0);
    TENAX_RETURN_IF_ERROR(node_->Wait(op, Deadline::After(60s)));
    TENAX_RETURN_IF_ERROR(node_->Flush(peer, Deadline::After(60s)));
    *r.mutable_chunk() = HeaderOf(chunk->meta);
    ++stats_.gets;
    stats_.bytes_sent += chunk->payload.size();
    return Status::Ok();
  }

  Status OnPut(Client& c, const wire::ChunkRequest& req) {
    const ChunkMeta meta = MetaOf(req.chunk());
    if (meta.payload_bytes > c.staging.size()) {
      return InvalidArgument(meta.id.Describe() + " has " + std::to_string(meta.payload_bytes) +
                             " bytes, more than this node's staging region (" + std::to_string(c.staging.size()) + ")");
    }
    const std::span<const uint8_t> payload(c.staging.data(), meta.payload_bytes);
    if (Crc32c(payload) != meta.payload_crc32c) {
      return DataLoss(meta.id.Describe() + ": the bytes that arrived fail their CRC-32C (damaged in transit)");
    }
    TENAX_ASSIGN_OR_RETURN(std::string path, WriteChunkFile(o_.dir, meta, payload));
    held_[meta.id.FileName()] = meta.payload_bytes;
    ++stats_.puts;
    stats_.bytes_received += meta.payload_bytes;
    return Status::Ok();
  }

  const StorageNodeOptions& o_;
  std::unique_ptr<net::Node> node_;
  std::map<net::PeerId, Client> clients_;
  std::map<std::string, uint64_t> held_;  // chunk file name (relative) -> payload bytes
  std::string scrub_cursor_;
  StorageNodeReport stats_;
};

}  // namespace

Result<StorageNodeReport> RunStorageNode(const StorageNodeOptions& o) {
  net::NodeOptions no;
  no.name = o.name;
  no.secret = o.secret;
  no.transports = o.transports;
  no.peer_timeout = o.peer_timeout;
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(uint16_t port, node->Listen(o.listen_host, o.port));
  StorageServer server(o, std::move(node));
  TENAX_RETURN_IF_ERROR(server.VerifyAll());
  const StorageNodeReport start = server.report();
  spdlog::info("data node {}: {} chunks ({} bytes) verified in {}, {} quarantined; listening on {}:{}", o.name,
               start.chunks, start.bytes, o.dir, start.bad_chunks, o.listen_host, port);
  if (o.on_ready) o.on_ready(port, start.chunks, start.bad_chunks);
  TENAX_RETURN_IF_ERROR(server.Serve());
  return server.report();
}

}  // namespace tenax::store

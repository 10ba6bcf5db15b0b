#include "tenax/store/store_client.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include "tenax/core/files.h"
#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"

namespace tenax::store {

StoreClient::StoreClient(std::unique_ptr<StoreCatalog> catalog, StoreClientOptions options)
    : catalog_(std::move(catalog)), options_(std::move(options)) {}

StoreClient::~StoreClient() {
  // Stores use net_: drop them first.
  net_stores_.clear();
}

Result<std::unique_ptr<StoreClient>> StoreClient::Open(const std::string& catalog_path, StoreClientOptions options) {
  TENAX_ASSIGN_OR_RETURN(auto catalog, StoreCatalog::Open(catalog_path));
  std::unique_ptr<StoreClient> s(new StoreClient(std::move(catalog), std::move(options)));
  TENAX_RETURN_IF_ERROR(s->Reload());
  return s;
}

Status StoreClient::Reload() {
  TENAX_ASSIGN_OR_RETURN(nodes_, catalog_->Nodes());
  stores_.assign(nodes_.size(), nullptr);
  for (const StoreNode& n : nodes_) {
    ChunkStore*& slot = stores_[static_cast<size_t>(n.id)];
    if (n.location.rfind(kStorageScheme, 0) != 0) {
      auto& dir = dir_stores_[n.location];
      if (!dir) dir = std::make_unique<DirChunkStore>("data node " + n.name, n.location);
      slot = dir.get();
      continue;
    }
    if (n.state != NodeState::kLive) continue;  // a failed node is never asked again
    if (auto it = net_stores_.find(n.location); it != net_stores_.end()) {
      slot = it->second.get();
      continue;
    }
    if (unreachable_.count(n.location)) continue;
    auto hp = net::ParseHostPort(n.location.substr(std::string(kStorageScheme).size()));
    if (!hp.ok()) return InvalidArgument("data node " + n.name + ": location " + n.location + ": " + hp.status().message());
    if (!net_) {
      net::NodeOptions no;
      no.name = "store-client";
      TENAX_ASSIGN_OR_RETURN(no.secret, net::ResolveSecret(options_.secret));
      no.peer_timeout = options_.peer_timeout;
      TENAX_ASSIGN_OR_RETURN(net_, net::Node::Create(no));
    }
    auto store =
        NetChunkStore::Connect(net_.get(), n.name, hp->host, hp->port, kMaxNetChunkBytes, options_.connect_timeout);
    if (!store.ok()) {
      unreachable_[n.location] = store.status().message();
      continue;
    }
    (*store)->set_request_timeout(options_.request_timeout);
    if (options_.link_bytes_per_second > 0) {
      net::LinkShape shape;
      shape.bandwidth_bytes_per_second = options_.link_bytes_per_second;
      (*store)->set_link_shape(shape);
    }
    slot = store->get();
    net_stores_[n.location] = std::move(*store);
  }
  return Status::Ok();
}

void StoreClient::KeepAlive() {
  if (net_) net_->Progress();
}

Status StoreClient::Refresh() {
  unreachable_.clear();
  return Reload();
}

size_t StoreClient::ReachableNodes() const {
  size_t n = 0;
  for (const StoreNode& node : nodes_) n += node.state == NodeState::kLive && stores_[static_cast<size_t>(node.id)] != nullptr;
  return n;
}

std::string StoreClient::Missing(const StoreNode& n) {
  if (n.location.rfind(kStorageScheme, 0) != 0) {
    std::error_code ec;
    return std::filesystem::is_directory(n.location, ec) ? "" : "its directory " + n.location + " is gone (wiped disk?)";
  }
  if (auto it = unreachable_.find(n.location); it != unreachable_.end()) return "unreachable: " + it->second;
  auto it = net_stores_.find(n.location);
  if (it == net_stores_.end()) return "not connected";
  // A STATUS round trip (which reconnects a connection that was only
  // idle too long).
  auto st = it->second->QueryStatus();
  return st.ok() ? "" : "stopped answering: " + st.status().message();
}

Status StoreClient::AddNodes(std::vector<StoreNode> nodes) {
  TENAX_ASSIGN_OR_RETURN(auto existing, catalog_->Nodes());
  if (!existing.empty()) {
    return FailedPrecondition("store catalog " + catalog_->path() + " already has " +
                              std::to_string(existing.size()) + " data nodes (leave out --root / --node)");
  }
  TENAX_RETURN_IF_ERROR(catalog_->AddNodes(nodes));
  return Reload();
}

namespace {

Status CheckCounts(size_t count, int zones) {
  if (count < 1 || count > 255) return InvalidArgument("a store needs 1..255 data nodes, not " + std::to_string(count));
  if (zones < 0 || static_cast<size_t>(zones) > count) {
    return InvalidArgument(std::to_string(zones) + " zones for " + std::to_string(count) + " data nodes: use 0.." +
                           std::to_string(count));
  }
  return Status::Ok();
}

StoreNode NewNode(int i, int zones, std::string location) {
  StoreNode n;
  n.id = i;
  n.name = "node-" + std::to_string(i);
  n.location = std::move(location);
  n.zone = zones > 0 ? "zone-" + std::to_string(i % zones) : "";
  return n;
}

}  // namespace

Status StoreClient::CreateNodes(const std::string& root, int count, int zones) {
  TENAX_RETURN_IF_ERROR(CheckCounts(static_cast<size_t>(std::max(count, 0)), zones));
  std::vector<StoreNode> nodes;
  const std::string base = std::filesystem::absolute(root).lexically_normal().string();
  for (int i = 0; i < count; ++i) nodes.push_back(NewNode(i, zones, base + "/node-" + std::to_string(i)));
  for (const StoreNode& n : nodes) TENAX_RETURN_IF_ERROR(EnsureWritableDir(n.location));
  return AddNodes(std::move(nodes));
}

Status StoreClient::CreateNetworkNodes(const std::vector<std::string>& addresses, int zones) {
  TENAX_RETURN_IF_ERROR(CheckCounts(addresses.size(), zones));
  std::vector<StoreNode> nodes;
  for (size_t i = 0; i < addresses.size(); ++i) {
    TENAX_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(addresses[i]));
    if (hp.port == 0) return InvalidArgument("data node address " + addresses[i] + " needs a port");
    nodes.push_back(NewNode(static_cast<int>(i), zones, kStorageScheme + hp.host + ":" + std::to_string(hp.port)));
  }
  return AddNodes(std::move(nodes));
}

std::vector<bool> StoreClient::Alive() const {
  std::vector<bool> alive;
  for (const StoreNode& n : nodes_) alive.push_back(n.state == NodeState::kLive && stores_[static_cast<size_t>(n.id)]);
  return alive;
}

std::vector<DataNodeInfo> StoreClient::Infos() const {
  std::vector<DataNodeInfo> out;
  for (const StoreNode& n : nodes_) out.push_back({n.name, n.zone});
  return out;
}

TransportBytes StoreClient::transport_bytes() const {
  TransportBytes t;
  for (const auto& [location, s] : net_stores_) {
    t.read += s->bytes_read();
    t.written += s->bytes_written();
  }
  return t;
}

Result<std::vector<StoreNode>> StoreClient::DetectFailures() {
  std::vector<StoreNode> failed;
  for (const StoreNode& n : nodes_) {
    if (n.state != NodeState::kLive) continue;
    const std::string why = Missing(n);
    if (why.empty()) continue;
    spdlog::warn("data node {} ({}): marked failed: {}", n.name, n.location, why);
    TENAX_RETURN_IF_ERROR(catalog_->SetNodeState(n.id, NodeState::kFailed));
    failed.push_back(n);
    failed.back().state = NodeState::kFailed;
  }
  if (!failed.empty()) TENAX_RETURN_IF_ERROR(Reload());
  return failed;
}

Result<PutReport> StoreClient::Put(const std::string& dataset, std::span<const uint8_t> records,
                                  const LayoutParams& layout, int classes,
                                  const std::function<int(uint64_t)>& label_of,
                                  const std::vector<uint64_t>& sample_shape, bool allow_reduced_durability) {
  const auto start = std::chrono::steady_clock::now();
  TENAX_RETURN_IF_ERROR(CheckDatasetName(dataset));
  uint64_t sample_bytes = 1;
  for (uint64_t d : sample_shape) sample_bytes *= d;
  if (!sample_shape.empty() && (sample_shape.size() > 8 || sample_bytes + 1 != layout.record_bytes)) {
    return InvalidArgument(dataset + ": a sample shape of " + std::to_string(sample_bytes) + " bytes for records of " +
                           std::to_string(layout.record_bytes) + " bytes (a record is the sample, then its label byte)");
  }
  TENAX_ASSIGN_OR_RETURN(auto names, catalog_->Datasets());
  for (const auto& n : names) {
    if (n == dataset) {
      return FailedPrecondition("dataset '" + dataset + "' is already in store catalog " + catalog_->path() +
                                " (choose another --dataset)");
    }
  }
  TENAX_RETURN_IF_ERROR(DetectFailures().status());
  // Ingest places chunks on the live nodes only.
  std::vector<int> live_ids;
  std::vector<DataNodeInfo> infos;
  std::vector<ChunkStore*> stores;
  for (const StoreNode& n : nodes_) {
    if (n.state != NodeState::kLive || !stores_[static_cast<size_t>(n.id)]) continue;
    live_ids.push_back(n.id);
    infos.push_back({n.name, n.zone});
    stores.push_back(stores_[static_cast<size_t>(n.id)]);
  }
  if (nodes_.empty()) {
    return FailedPrecondition("store catalog " + catalog_->path() + " has no data nodes (give --root DIR --nodes N)");
  }
  std::vector<int> failed;
  auto put = PutDataset(dataset, records, layout, classes, label_of, infos, stores, &failed, allow_reduced_durability);
  // Nodes that failed a write are failed in the catalog, whatever the outcome.
  for (int f : failed) TENAX_RETURN_IF_ERROR(catalog_->SetNodeState(live_ids[static_cast<size_t>(f)], NodeState::kFailed));
  if (!failed.empty()) TENAX_RETURN_IF_ERROR(Reload());
  if (!put.ok()) return put.status();
  DatasetManifest m = std::move(*put);
  m.sample_shape = sample_shape;
  PutReport report;
  for (int f : failed) report.nodes_failed.push_back(infos[static_cast<size_t>(f)].name);
  report.stripes_sharing_a_node = StripesSharingANode(m);
  for (auto& stripe : m.stripes) {
    for (StoredChunk& c : stripe) {
      c.node = live_ids[static_cast<size_t>(c.node)];
      report.bytes_written += c.payload_bytes;
    }
  }
  TENAX_RETURN_IF_ERROR(catalog_->PutManifest(m));
  report.manifest = std::move(m);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

Result<std::vector<uint8_t>> StoreClient::Get(const std::string& dataset, uint64_t first, uint64_t count,
                                             ReadStats* stats) {
  TENAX_ASSIGN_OR_RETURN(DatasetManifest m, catalog_->Manifest(dataset));
  return ReadRecords(m, stores_, first, count, stats);
}

Result<StoreNode> StoreClient::Fail(const std::string& name_or_id) {
  for (const StoreNode& found : nodes_) {
    if (found.name != name_or_id && std::to_string(found.id) != name_or_id) continue;
    const StoreNode n = found;  // Reload below replaces nodes_
    if (n.location.rfind(kStorageScheme, 0) != 0) {
      std::error_code ec;
      std::filesystem::remove_all(n.location, ec);
      if (ec) return IoError("data node " + n.name + ": cannot wipe " + n.location + ": " + ec.message());
    }
    TENAX_RETURN_IF_ERROR(catalog_->SetNodeState(n.id, NodeState::kFailed));
    TENAX_RETURN_IF_ERROR(Reload());
    return nodes_[static_cast<size_t>(n.id)];
  }
  std::string known;
  for (const StoreNode& n : nodes_) known += (known.empty() ? "" : ", ") + n.name;
  return NotFound("no data node '" + name_or_id + "' (the store has: " + (known.empty() ? "none" : known) + ")");
}

Result<std::vector<DatasetHealth>> StoreClient::Health(bool verify) {
  TENAX_RETURN_IF_ERROR(DetectFailures().status());
  TENAX_ASSIGN_OR_RETURN(auto names, catalog_->Datasets());
  std::vector<DatasetHealth> out;
  for (const auto& name : names) {
    TENAX_ASSIGN_OR_RETURN(DatasetManifest m, catalog_->Manifest(name));
    DatasetHealth h;
    h.dataset = name;
    h.records = m.layout.records;
    h.stripes = m.stripes.size();
    h.k = m.layout.k;
    h.m = m.layout.m;
    for (const auto& stripe : m.stripes) {
      h.chunks += stripe.size();
      for (const StoredChunk& c : stripe) h.bytes += c.payload_bytes;
    }
    h.lost = FindLostChunks(m, stores_, Alive(), verify);
    std::map<uint64_t, int> per_stripe;
    for (const FoundLoss& f : h.lost) ++per_stripe[f.chunk.stripe];
    for (auto [s, n] : per_stripe) {
      if (n > m.layout.m) {
        ++h.lost_stripes;
        h.unreadable_samples += StripeSamples(m, s).count;
      } else {
        ++h.degraded_stripes;
      }
    }
    out.push_back(std::move(h));
  }
  return out;
}

Result<std::vector<RecoveryReport>> StoreClient::Recover(const std::string& dataset, const RecoveryOptions& options,
                                                        bool verify, bool only_live_nodes,
                                                        const std::function<int(const StoredChunk&)>& tier_of) {
  TENAX_RETURN_IF_ERROR(DetectFailures().status());
  std::vector<std::string> names;
  if (dataset.empty()) {
    TENAX_ASSIGN_OR_RETURN(names, catalog_->Datasets());
  } else {
    names.push_back(dataset);
  }
  std::vector<RecoveryReport> out;
  const std::vector<bool> alive = Alive();
  for (const auto& name : names) {
    TENAX_ASSIGN_OR_RETURN(DatasetManifest m, catalog_->Manifest(name));
    std::vector<FoundLoss> lost = FindLostChunks(m, stores_, alive, verify, tier_of);
    if (only_live_nodes) {
      std::erase_if(lost, [&](const FoundLoss& f) {
        const int node = m.stripes[static_cast<size_t>(f.chunk.stripe)][f.chunk.index].node;
        return !alive[static_cast<size_t>(node)];
      });
    }
    auto report = RecoverChunks(m, stores_, Infos(), alive, std::move(lost), options);
    // The chunks written so far are where the manifest says: store it even
    // when the recovery stopped early.
    TENAX_RETURN_IF_ERROR(catalog_->PutManifest(m));
    if (!report.ok()) return Status(report.status().code(), name + ": " + report.status().message());
    if (options.background_bytes_per_second > 0 && !options.rebuild_later && !report->plan.later.empty()) {
      // Training already reads the first set; the rest comes back slowly.
      RecoveryOptions later;
      later.policy = "full";
      later.pace_bytes_per_second = options.background_bytes_per_second;
      std::vector<FoundLoss> rest = FindLostChunks(m, stores_, alive, /*verify=*/false, tier_of);
      auto pass = RecoverChunks(m, stores_, Infos(), alive, std::move(rest), later);
      TENAX_RETURN_IF_ERROR(catalog_->PutManifest(m));
      if (!pass.ok()) return Status(pass.status().code(), name + ": background pass: " + pass.status().message());
      report->background = {true, pass->chunks_rebuilt, pass->bytes_read, pass->bytes_written, pass->seconds};
      report->unrecoverable.insert(report->unrecoverable.end(), pass->unrecoverable.begin(), pass->unrecoverable.end());
    }
    out.push_back(std::move(*report));
  }
  return out;
}

}  // namespace tenax::store

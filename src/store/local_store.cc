#include "tenax/store/local_store.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include "tenax/core/files.h"

namespace tenax::store {

Result<std::unique_ptr<LocalStore>> LocalStore::Open(const std::string& catalog_path) {
  TENAX_ASSIGN_OR_RETURN(auto catalog, StoreCatalog::Open(catalog_path));
  std::unique_ptr<LocalStore> s(new LocalStore(std::move(catalog)));
  TENAX_RETURN_IF_ERROR(s->Reload());
  return s;
}

Status LocalStore::Reload() {
  TENAX_ASSIGN_OR_RETURN(nodes_, catalog_->Nodes());
  stores_.clear();
  for (const StoreNode& n : nodes_) {
    stores_.push_back(std::make_unique<DirChunkStore>("data node " + n.name, n.location));
  }
  return Status::Ok();
}

Status LocalStore::CreateNodes(const std::string& root, int count, int zones) {
  if (count < 1 || count > 255) return InvalidArgument("a store needs 1..255 data nodes, not " + std::to_string(count));
  if (zones < 0 || zones > count) {
    return InvalidArgument(std::to_string(zones) + " zones for " + std::to_string(count) + " data nodes: use 0.." +
                           std::to_string(count));
  }
  std::vector<StoreNode> nodes;
  const std::string base = std::filesystem::absolute(root).lexically_normal().string();
  for (int i = 0; i < count; ++i) {
    StoreNode n;
    n.id = i;
    n.name = "node-" + std::to_string(i);
    n.location = base + "/" + n.name;
    n.zone = zones > 0 ? "zone-" + std::to_string(i % zones) : "";
    nodes.push_back(std::move(n));
  }
  TENAX_ASSIGN_OR_RETURN(auto existing, catalog_->Nodes());
  if (!existing.empty()) {
    return FailedPrecondition("store catalog " + catalog_->path() + " already has " +
                              std::to_string(existing.size()) + " data nodes (leave out --root)");
  }
  for (const StoreNode& n : nodes) TENAX_RETURN_IF_ERROR(EnsureWritableDir(n.location));
  TENAX_RETURN_IF_ERROR(catalog_->AddNodes(nodes));
  return Reload();
}

std::vector<bool> LocalStore::Alive() const {
  std::vector<bool> alive;
  for (const StoreNode& n : nodes_) alive.push_back(n.state == NodeState::kLive);
  return alive;
}

std::vector<DataNodeInfo> LocalStore::Infos() const {
  std::vector<DataNodeInfo> out;
  for (const StoreNode& n : nodes_) out.push_back({n.name, n.zone});
  return out;
}

std::vector<ChunkStore*> LocalStore::Stores() const {
  std::vector<ChunkStore*> out;
  for (const auto& s : stores_) out.push_back(s.get());
  return out;
}

Result<std::vector<StoreNode>> LocalStore::DetectFailures() {
  std::vector<StoreNode> failed;
  for (const StoreNode& n : nodes_) {
    std::error_code ec;
    if (n.state == NodeState::kLive && !std::filesystem::is_directory(n.location, ec)) {
      TENAX_RETURN_IF_ERROR(catalog_->SetNodeState(n.id, NodeState::kFailed));
      failed.push_back(n);
      failed.back().state = NodeState::kFailed;
    }
  }
  if (!failed.empty()) TENAX_RETURN_IF_ERROR(Reload());
  return failed;
}

Result<PutReport> LocalStore::Put(const std::string& dataset, std::span<const uint8_t> records,
                                  const LayoutParams& layout, int classes,
                                  const std::function<int(uint64_t)>& label_of,
                                  const std::vector<uint64_t>& sample_shape) {
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
    if (n.state != NodeState::kLive) continue;
    live_ids.push_back(n.id);
    infos.push_back({n.name, n.zone});
    stores.push_back(stores_[static_cast<size_t>(n.id)].get());
  }
  if (nodes_.empty()) {
    return FailedPrecondition("store catalog " + catalog_->path() + " has no data nodes (give --root DIR --nodes N)");
  }
  TENAX_ASSIGN_OR_RETURN(DatasetManifest m, PutDataset(dataset, records, layout, classes, label_of, infos, stores));
  m.sample_shape = sample_shape;
  PutReport report;
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

Result<std::vector<uint8_t>> LocalStore::Get(const std::string& dataset, uint64_t first, uint64_t count,
                                             ReadStats* stats) {
  TENAX_ASSIGN_OR_RETURN(DatasetManifest m, catalog_->Manifest(dataset));
  return ReadRecords(m, Stores(), first, count, stats);
}

Result<StoreNode> LocalStore::Fail(const std::string& name_or_id) {
  for (const StoreNode& found : nodes_) {
    if (found.name != name_or_id && std::to_string(found.id) != name_or_id) continue;
    const StoreNode n = found;  // Reload below replaces nodes_
    std::error_code ec;
    std::filesystem::remove_all(n.location, ec);
    if (ec) return IoError("data node " + n.name + ": cannot wipe " + n.location + ": " + ec.message());
    TENAX_RETURN_IF_ERROR(catalog_->SetNodeState(n.id, NodeState::kFailed));
    TENAX_RETURN_IF_ERROR(Reload());
    return nodes_[static_cast<size_t>(n.id)];
  }
  std::string known;
  for (const StoreNode& n : nodes_) known += (known.empty() ? "" : ", ") + n.name;
  return NotFound("no data node '" + name_or_id + "' (the store has: " + (known.empty() ? "none" : known) + ")");
}

Result<std::vector<DatasetHealth>> LocalStore::Health(bool verify) {
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
    h.lost = FindLostChunks(m, Stores(), Alive(), verify);
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

Result<std::vector<RecoveryReport>> LocalStore::Recover(const std::string& dataset, const RecoveryOptions& options,
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
    std::vector<FoundLoss> lost = FindLostChunks(m, Stores(), alive, verify, tier_of);
    if (only_live_nodes) {
      std::erase_if(lost, [&](const FoundLoss& f) {
        const int node = m.stripes[static_cast<size_t>(f.chunk.stripe)][f.chunk.index].node;
        return !alive[static_cast<size_t>(node)];
      });
    }
    auto report = RecoverChunks(m, Stores(), Infos(), alive, std::move(lost), options);
    // The chunks written so far are where the manifest says: store it even
    // when the recovery stopped early.
    TENAX_RETURN_IF_ERROR(catalog_->PutManifest(m));
    if (!report.ok()) return Status(report.status().code(), name + ": " + report.status().message());
    out.push_back(std::move(*report));
  }
  return out;
}

}  // namespace tenax::store

#include "tenax/store/recovery.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "tenax/core/checksum.h"
#include "tenax/store/reed_solomon.h"

namespace tenax::store {

std::vector<FoundLoss> FindLostChunks(const DatasetManifest& m, const std::vector<ChunkStore*>& stores,
                                      const std::vector<bool>& alive, bool verify,
                                      const std::function<int(const StoredChunk&)>& tier_of) {
  std::vector<FoundLoss> out;
  ReadStats ignored;
  for (uint64_t s = 0; s < m.stripes.size(); ++s) {
    for (const StoredChunk& c : m.stripes[static_cast<size_t>(s)]) {
      std::string reason;
      const bool node_live = c.node >= 0 && static_cast<size_t>(c.node) < alive.size() && alive[static_cast<size_t>(c.node)];
      if (!node_live) {
        reason = "data node " + std::to_string(c.node) + " failed";
      } else if (verify) {
        auto bytes = ReadStoredChunk(m, stores, s, c, ignored);
        if (!bytes.ok()) reason = bytes.status().message();
      }
      if (reason.empty()) continue;
      FoundLoss f;
      f.chunk.stripe = s;
      f.chunk.index = c.index;
      f.chunk.parity = static_cast<int>(c.index) >= m.layout.k;
      f.chunk.bytes = c.payload_bytes;
      f.chunk.class_counts = c.class_counts;
      f.chunk.tier = f.chunk.parity ? kParityTier : tier_of ? tier_of(c) : 0;
      f.reason = std::move(reason);
      out.push_back(std::move(f));
    }
  }
  return out;
}

Result<RecoveryReport> RecoverChunks(DatasetManifest& m, const std::vector<ChunkStore*>& stores,
                                     const std::vector<DataNodeInfo>& nodes, const std::vector<bool>& alive,
                                     std::vector<FoundLoss> lost, const RecoveryOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  RecoveryReport report;
  report.dataset = m.dataset;
  std::vector<LostChunk> plain;
  for (const FoundLoss& f : lost) plain.push_back(f.chunk);
  TENAX_ASSIGN_OR_RETURN(report.plan, PlanRecovery(options.policy, m.class_totals, plain, options.prm));
  report.lost = std::move(lost);
  if (stores.size() != nodes.size() || alive.size() != nodes.size()) {
    return InvalidArgument("recovery needs one chunk store and one liveness flag per data node");
  }
  if (std::none_of(alive.begin(), alive.end(), [](bool b) { return b; })) {
    return FailedPrecondition(m.dataset + ": no data node is live, nothing can be rebuilt");
  }
  TENAX_ASSIGN_OR_RETURN(ReedSolomon rs, ReedSolomon::Create(m.layout.k, m.layout.m));
  const int k = m.layout.k, n = m.layout.k + m.layout.m;

  // What to rebuild now, by stripe; every lost chunk of a stripe (rebuilt
  // now or not) is never used as a survivor.
  std::vector<size_t> now = report.plan.first;
  if (options.rebuild_later) now.insert(now.end(), report.plan.later.begin(), report.plan.later.end());
  std::map<uint64_t, std::vector<uint32_t>> todo;
  std::map<uint64_t, std::set<uint32_t>> lost_in;
  for (size_t i : now) todo[report.lost[i].chunk.stripe].push_back(report.lost[i].chunk.index);
  for (const FoundLoss& f : report.lost) lost_in[f.chunk.stripe].insert(f.chunk.index);

  std::vector<uint64_t> load(nodes.size(), 0);
  for (const auto& stripe : m.stripes) {
    for (const StoredChunk& c : stripe) {
      if (c.node >= 0 && static_cast<size_t>(c.node) < load.size()) ++load[static_cast<size_t>(c.node)];
    }
  }

  ReadStats reads;
  for (auto& [s, indices] : todo) {
    std::vector<StoredChunk>& chunks = m.stripes[static_cast<size_t>(s)];
    const std::set<uint32_t>& gone = lost_in[s];
    uint64_t coded = 0;
    for (const StoredChunk& c : chunks) coded = std::max(coded, c.payload_bytes);
    std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(n), std::vector<uint8_t>(coded, 0));
    std::vector<bool> present(static_cast<size_t>(n), false);
    int have = 0;
    for (int i = 0; i < n && have < k; ++i) {
      if (gone.count(static_cast<uint32_t>(i))) continue;
      auto payload = ReadStoredChunk(m, stores, s, chunks[static_cast<size_t>(i)], reads);
      if (!payload.ok()) continue;  // lost since it was found: not a survivor
      std::memcpy(buffers[static_cast<size_t>(i)].data(), payload->data(), payload->size());
      present[static_cast<size_t>(i)] = true;
      ++have;
    }
    if (have < k) {
      const SampleRange r = StripeSamples(m, s);
      report.unrecoverable.push_back("stripe " + std::to_string(s) + " (samples " + std::to_string(r.first) + ".." +
                                     std::to_string(r.first + r.count - 1) + "): only " + std::to_string(have) +
                                     " of its " + std::to_string(n) + " chunks are readable, " + std::to_string(k) +
                                     " are needed");
      report.unrecoverable_samples += r.count;
      continue;
    }
    std::vector<uint8_t*> pointers(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) pointers[static_cast<size_t>(i)] = buffers[static_cast<size_t>(i)].data();
    TENAX_RETURN_IF_ERROR(rs.Reconstruct(coded, present, pointers.data()));

    // Where the stripe's chunks sit now (-1 for the lost ones).
    std::vector<int> stripe_nodes(static_cast<size_t>(n), -1);
    for (int i = 0; i < n; ++i) {
      if (!gone.count(static_cast<uint32_t>(i))) stripe_nodes[static_cast<size_t>(i)] = chunks[static_cast<size_t>(i)].node;
    }
    std::sort(indices.begin(), indices.end());
    for (uint32_t index : indices) {
      StoredChunk& c = chunks[index];
      const std::span<const uint8_t> payload(buffers[index].data(), c.payload_bytes);
      const ChunkId id{m.dataset, s, index};
      if (Crc32c(payload) != c.payload_crc32c) {
        return DataLoss(id.Describe() + ": the rebuilt bytes fail the manifest's CRC (a survivor is corrupt "
                        "beyond what its checksums caught)");
      }
      int target = c.node;
      const bool own_node_live = c.node >= 0 && static_cast<size_t>(c.node) < alive.size() &&
                                 alive[static_cast<size_t>(c.node)] &&
                                 std::count(stripe_nodes.begin(), stripe_nodes.end(), c.node) == 0;
      if (!own_node_live) {
        TENAX_ASSIGN_OR_RETURN(Replacement r, PlaceReplacement(stripe_nodes, nodes, alive, load));
        target = r.node;
        report.shares_a_node = report.shares_a_node || r.shares_a_node;
      }
      ChunkMeta meta;
      meta.id = id;
      meta.k = static_cast<uint32_t>(k);
      meta.m = static_cast<uint32_t>(m.layout.m);
      ChunkStore* store = stores[static_cast<size_t>(target)];
      if (Status st = store->Put(meta, payload); !st.ok()) {
        return Status(st.code(), "rebuild " + id.Describe() + " onto " + store->Describe() + ": " + st.message());
      }
      if (c.node != target) {
        if (c.node >= 0 && static_cast<size_t>(c.node) < load.size()) --load[static_cast<size_t>(c.node)];
        ++load[static_cast<size_t>(target)];
      }
      c.node = target;
      c.deferred = false;
      stripe_nodes[index] = target;
      ++report.chunks_rebuilt;
      report.bytes_written += payload.size();
    }
    if (options.pace_bytes_per_second > 0) {
      const double moved = static_cast<double>(reads.bytes_read + report.bytes_written);
      std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                std::chrono::duration<double>(moved / options.pace_bytes_per_second)));
    }
  }
  // What the plan leaves for later stays lost: loaders skip its samples
  // (PRM's partial view) until a later pass rebuilds it.
  if (!options.rebuild_later) {
    for (size_t i : report.plan.later) {
      const LostChunk& c = report.lost[i].chunk;
      StoredChunk& sc = m.stripes[static_cast<size_t>(c.stripe)][c.index];
      sc.deferred = !c.parity && options.policy == "prm";
    }
  }
  report.bytes_read = reads.bytes_read;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace tenax::store

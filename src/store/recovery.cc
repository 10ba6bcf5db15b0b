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

namespace {

// Chunks held by each data node: replacements go to the least loaded.
std::vector<uint64_t> ChunksPerNode(const DatasetManifest& m, size_t nodes) {
  std::vector<uint64_t> load(nodes, 0);
  for (const auto& stripe : m.stripes) {
    for (const StoredChunk& c : stripe) {
      if (c.node >= 0 && static_cast<size_t>(c.node) < load.size()) ++load[static_cast<size_t>(c.node)];
    }
  }
  return load;
}

// What one recovery works with; `load` and `reads` change as it goes.
struct Rebuild {
  DatasetManifest& m;
  const std::vector<ChunkStore*>& stores;
  const std::vector<DataNodeInfo>& nodes;
  const std::vector<bool>& alive;
  const ReedSolomon& rs;
  const int k, n;
  std::vector<uint64_t> load;
  ReadStats reads;
  RecoveryReport& report;
};

// A stripe's n coded chunks in memory: up to k survivors read, the rest zeroed.
struct StripeBuffers {
  uint64_t coded = 0;
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<bool> present;
  int have = 0;
};

// Reads survivors of stripe `s` until k are in hand; chunks in `gone` are
// never survivors.
StripeBuffers ReadSurvivors(Rebuild& r, uint64_t s, const std::set<uint32_t>& gone) {
  const std::vector<StoredChunk>& chunks = r.m.stripes[static_cast<size_t>(s)];
  StripeBuffers b;
  for (const StoredChunk& c : chunks) b.coded = std::max(b.coded, c.payload_bytes);
  b.buffers.assign(static_cast<size_t>(r.n), std::vector<uint8_t>(b.coded, 0));
  b.present.assign(static_cast<size_t>(r.n), false);
  for (int i = 0; i < r.n && b.have < r.k; ++i) {
    if (gone.count(static_cast<uint32_t>(i))) continue;
    auto payload = ReadStoredChunk(r.m, r.stores, s, chunks[static_cast<size_t>(i)], r.reads);
    if (!payload.ok()) continue;  // lost since it was found: not a survivor
    std::memcpy(b.buffers[static_cast<size_t>(i)].data(), payload->data(), payload->size());
    b.present[static_cast<size_t>(i)] = true;
    ++b.have;
  }
  return b;
}

void RecordUnrecoverable(Rebuild& r, uint64_t s, int have) {
  const SampleRange range = StripeSamples(r.m, s);
  r.report.unrecoverable.push_back("stripe " + std::to_string(s) + " (samples " + std::to_string(range.first) + ".." +
                                   std::to_string(range.first + range.count - 1) + "): only " + std::to_string(have) +
                                   " of its " + std::to_string(r.n) + " chunks are readable, " + std::to_string(r.k) +
                                   " are needed");
  r.report.unrecoverable_samples += range.count;
}

// Checks rebuilt chunk `index` of stripe `s` against the manifest's CRC and
// writes it to its own node, or, if that is down or already holds a chunk
// of the stripe, to a replacement; updates the manifest, `load` and
// `stripe_nodes`.
Status WriteRebuiltChunk(Rebuild& r, uint64_t s, uint32_t index, const std::vector<uint8_t>& buffer,
                         std::vector<int>& stripe_nodes) {
  StoredChunk& c = r.m.stripes[static_cast<size_t>(s)][index];
  const std::span<const uint8_t> payload(buffer.data(), c.payload_bytes);
  const ChunkId id{r.m.dataset, s, index};
  if (Crc32c(payload) != c.payload_crc32c) {
    return DataLoss(id.Describe() + ": the rebuilt bytes fail the manifest's CRC (a survivor is corrupt "
                    "beyond what its checksums caught)");
  }
  int target = c.node;
  const bool own_node_live = c.node >= 0 && static_cast<size_t>(c.node) < r.alive.size() &&
                             r.alive[static_cast<size_t>(c.node)] &&
                             std::count(stripe_nodes.begin(), stripe_nodes.end(), c.node) == 0;
  if (!own_node_live) {
    TENAX_ASSIGN_OR_RETURN(Replacement rep, PlaceReplacement(stripe_nodes, r.nodes, r.alive, r.load));
    target = rep.node;
    r.report.shares_a_node = r.report.shares_a_node || rep.shares_a_node;
  }
  ChunkMeta meta;
  meta.id = id;
  meta.k = static_cast<uint32_t>(r.k);
  meta.m = static_cast<uint32_t>(r.m.layout.m);
  ChunkStore* store = r.stores[static_cast<size_t>(target)];
  if (Status st = store->Put(meta, payload); !st.ok()) {
    return Status(st.code(), "rebuild " + id.Describe() + " onto " + store->Describe() + ": " + st.message());
  }
  if (c.node != target) {
    if (c.node >= 0 && static_cast<size_t>(c.node) < r.load.size()) --r.load[static_cast<size_t>(c.node)];
    ++r.load[static_cast<size_t>(target)];
  }
  c.node = target;
  c.deferred = false;
  stripe_nodes[index] = target;
  ++r.report.chunks_rebuilt;
  r.report.bytes_written += payload.size();
  return Status::Ok();
}

// Rebuilds chunks `indices` of stripe `s` from its survivors; false (the
// stripe recorded as unrecoverable) when fewer than k can be read.
Result<bool> RebuildStripe(Rebuild& r, uint64_t s, std::vector<uint32_t>& indices, const std::set<uint32_t>& gone) {
  StripeBuffers b = ReadSurvivors(r, s, gone);
  if (b.have < r.k) {
    RecordUnrecoverable(r, s, b.have);
    return false;
  }
  std::vector<uint8_t*> pointers(static_cast<size_t>(r.n));
  for (int i = 0; i < r.n; ++i) pointers[static_cast<size_t>(i)] = b.buffers[static_cast<size_t>(i)].data();
  TENAX_RETURN_IF_ERROR(r.rs.Reconstruct(b.coded, b.present, pointers.data()));

  // Where the stripe's chunks sit now (-1 for the lost ones).
  const std::vector<StoredChunk>& chunks = r.m.stripes[static_cast<size_t>(s)];
  std::vector<int> stripe_nodes(static_cast<size_t>(r.n), -1);
  for (int i = 0; i < r.n; ++i) {
    if (!gone.count(static_cast<uint32_t>(i))) {
      stripe_nodes[static_cast<size_t>(i)] = chunks[static_cast<size_t>(i)].node;
    }
  }
  std::sort(indices.begin(), indices.end());
  for (uint32_t index : indices) {
    TENAX_RETURN_IF_ERROR(WriteRebuiltChunk(r, s, index, b.buffers[index], stripe_nodes));
  }
  return true;
}

// Waits until `moved` bytes since `start` are at or under the pace.
void WaitForPace(std::chrono::steady_clock::time_point start, double moved, double bytes_per_second) {
  std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                            std::chrono::duration<double>(moved / bytes_per_second)));
}

// What the plan leaves for later stays lost: loaders skip its samples
// (PRM's partial view) until a later pass rebuilds it.
void DeferLaterChunks(DatasetManifest& m, const RecoveryReport& report, const std::string& policy) {
  for (size_t i : report.plan.later) {
    const LostChunk& c = report.lost[i].chunk;
    StoredChunk& sc = m.stripes[static_cast<size_t>(c.stripe)][c.index];
    sc.deferred = !c.parity && policy == "prm";
  }
}

}  // namespace

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

  // What to rebuild now, by stripe; every lost chunk of a stripe (rebuilt
  // now or not) is never used as a survivor.
  std::vector<size_t> now = report.plan.first;
  if (options.rebuild_later) now.insert(now.end(), report.plan.later.begin(), report.plan.later.end());
  std::map<uint64_t, std::vector<uint32_t>> todo;
  std::map<uint64_t, std::set<uint32_t>> lost_in;
  for (size_t i : now) todo[report.lost[i].chunk.stripe].push_back(report.lost[i].chunk.index);
  for (const FoundLoss& f : report.lost) lost_in[f.chunk.stripe].insert(f.chunk.index);

  Rebuild r{m, stores, nodes, alive, rs, m.layout.k, m.layout.k + m.layout.m, ChunksPerNode(m, nodes.size()),
            ReadStats{}, report};
  for (auto& [s, indices] : todo) {
    TENAX_ASSIGN_OR_RETURN(const bool rebuilt, RebuildStripe(r, s, indices, lost_in[s]));
    if (rebuilt && options.pace_bytes_per_second > 0) {
      WaitForPace(start, static_cast<double>(r.reads.bytes_read + report.bytes_written), options.pace_bytes_per_second);
    }
  }
  if (!options.rebuild_later) DeferLaterChunks(m, report, options.policy);
  report.bytes_read = r.reads.bytes_read;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace tenax::store

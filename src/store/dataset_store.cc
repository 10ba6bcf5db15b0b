#include "tenax/store/dataset_store.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "tenax/core/checksum.h"
#include "tenax/store/reed_solomon.h"

namespace tenax::store {

Status DirChunkStore::Put(const ChunkMeta& meta, std::span<const uint8_t> payload) {
  auto path = WriteChunkFile(dir_, meta, payload);
  return path.ok() ? Status::Ok() : path.status();
}

Result<Chunk> DirChunkStore::Get(const ChunkId& id) { return ReadChunkFile(dir_ + "/" + id.FileName(), id); }

Result<DatasetManifest> PutDataset(const std::string& dataset, std::span<const uint8_t> records,
                                   const LayoutParams& layout, int classes,
                                   const std::function<int(uint64_t)>& label_of,
                                   const std::vector<DataNodeInfo>& nodes, const std::vector<ChunkStore*>& stores,
                                   std::vector<int>* nodes_failed, bool allow_reduced_durability) {
  TENAX_RETURN_IF_ERROR(CheckDatasetName(dataset));
  TENAX_ASSIGN_OR_RETURN(StripeLayout plan, StripeLayout::Create(layout));
  if (records.size() != layout.records * layout.record_bytes) {
    return InvalidArgument(dataset + ": " + std::to_string(records.size()) + " bytes for " +
                           std::to_string(layout.records) + " records of " + std::to_string(layout.record_bytes) +
                           " bytes");
  }
  if (classes < 1) return InvalidArgument(dataset + ": a dataset needs at least one class");
  if (stores.size() != nodes.size()) return InvalidArgument(dataset + ": one chunk store per data node is needed");
  TENAX_ASSIGN_OR_RETURN(ReedSolomon rs, ReedSolomon::Create(layout.k, layout.m));
  TENAX_ASSIGN_OR_RETURN(auto placement, PlaceStripes(plan.stripes(), layout.k + layout.m, layout.k, nodes));

  DatasetManifest manifest;
  manifest.dataset = dataset;
  manifest.layout = layout;
  manifest.classes = classes;
  manifest.class_totals.assign(static_cast<size_t>(classes), 0);
  const int n = layout.k + layout.m;
  // A node whose write fails is taken out for the rest of the ingest and
  // its chunks go to replacements (placement.h), so ingest completes on the
  // live nodes; with none left it stops, naming what is not stored.
  std::vector<bool> alive(nodes.size(), true);
  std::vector<uint64_t> load(nodes.size(), 0);
  std::string failures;
  for (uint64_t s = 0; s < plan.stripes(); ++s) {
    const std::vector<ChunkRange> ranges = plan.ChunksOf(s);
    const uint64_t coded = plan.CodedBytes(s);
    std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(n), std::vector<uint8_t>(coded, 0));
    std::vector<StoredChunk> stored(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const ChunkRange& r = ranges[static_cast<size_t>(i)];
      StoredChunk& c = stored[static_cast<size_t>(i)];
      c.index = r.index;
      c.node = placement[static_cast<size_t>(s)][static_cast<size_t>(i)];
      c.first_record = r.first_record;
      c.record_count = r.record_count;
      c.payload_bytes = r.payload_bytes;
      if (i >= layout.k) continue;
      c.class_counts.assign(static_cast<size_t>(classes), 0);
      for (uint64_t rec = r.first_record; rec < r.first_record + r.record_count; ++rec) {
        const int label = label_of(rec);
        if (label < 0 || label >= classes) {
          return InvalidArgument(dataset + ": record " + std::to_string(rec) + " has label " + std::to_string(label) +
                                 ", outside 0.." + std::to_string(classes - 1));
        }
        ++c.class_counts[static_cast<size_t>(label)];
        ++manifest.class_totals[static_cast<size_t>(label)];
      }
      std::memcpy(buffers[static_cast<size_t>(i)].data(), records.data() + r.first_record * layout.record_bytes,
                  r.payload_bytes);
    }
    std::vector<uint8_t*> pointers(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) pointers[static_cast<size_t>(i)] = buffers[static_cast<size_t>(i)].data();
    rs.Encode(coded, pointers.data(), pointers.data() + layout.k);
    std::vector<int> stripe_nodes(static_cast<size_t>(n), -1);
    for (int i = 0; i < n; ++i) {
      StoredChunk& c = stored[static_cast<size_t>(i)];
      const std::span<const uint8_t> payload(buffers[static_cast<size_t>(i)].data(), c.payload_bytes);
      c.payload_crc32c = Crc32c(payload);
      ChunkMeta meta;
      meta.id = {dataset, s, c.index};
      meta.k = static_cast<uint32_t>(layout.k);
      meta.m = static_cast<uint32_t>(layout.m);
      while (true) {
        if (!alive[static_cast<size_t>(c.node)]) {
          auto r = PlaceReplacement(stripe_nodes, nodes, alive, load);
          if (!r.ok()) {
            return Unavailable(dataset + " was not stored: no live data node is left for " + meta.id.Describe() +
                               " (stripes " + std::to_string(s) + ".." + std::to_string(plan.stripes() - 1) +
                               " are not written; nothing is in the catalog)" + failures);
          }
          if (r->shares_a_node && !allow_reduced_durability) {
            return FailedPrecondition(
                dataset + " was not stored: fewer than k+m = " + std::to_string(n) +
                " data nodes are live, so " + meta.id.Describe() + " would share data node " +
                nodes[static_cast<size_t>(r->node)].name +
                " with another chunk of its stripe, and one more node loss would cost that stripe two chunks; "
                "nothing is in the catalog (bring a node back, add one, lower k + m, or accept the reduced "
                "durability with --allow-reduced-durability)" + failures);
          }
          c.node = r->node;
        }
        ChunkStore* store = stores[static_cast<size_t>(c.node)];
        Status st = store ? store->Put(meta, payload) : Unavailable("not connected");
        if (st.ok()) break;
        if (st.code() == StatusCode::kInvalidArgument) {
          return Status(st.code(), "put " + meta.id.Describe() + " on " + (store ? store->Describe() : "?") + ": " + st.message());
        }
        alive[static_cast<size_t>(c.node)] = false;
        if (nodes_failed) nodes_failed->push_back(c.node);
        failures += "; " + nodes[static_cast<size_t>(c.node)].name + ": " + st.message();
      }
      stripe_nodes[static_cast<size_t>(i)] = c.node;
      ++load[static_cast<size_t>(c.node)];
    }
    manifest.stripes.push_back(std::move(stored));
  }
  return manifest;
}

SampleRange StripeSamples(const DatasetManifest& m, uint64_t stripe) {
  SampleRange r;
  const std::vector<StoredChunk>& chunks = m.stripes[static_cast<size_t>(stripe)];
  for (int i = 0; i < m.layout.k; ++i) {
    const StoredChunk& c = chunks[static_cast<size_t>(i)];
    if (i == 0) r.first = c.first_record;
    r.count += c.record_count;
  }
  return r;
}

Result<std::vector<uint8_t>> ReadStoredChunk(const DatasetManifest& m, const std::vector<ChunkStore*>& stores,
                                             uint64_t stripe, const StoredChunk& c, ReadStats& stats) {
  const ChunkId id{m.dataset, stripe, c.index};
  if (c.node < 0 || static_cast<size_t>(c.node) >= stores.size() || stores[static_cast<size_t>(c.node)] == nullptr) {
    return NotFound(id.Describe() + ": no data node holds it");
  }
  TENAX_ASSIGN_OR_RETURN(Chunk chunk, stores[static_cast<size_t>(c.node)]->Get(id));
  ++stats.chunks_read;
  stats.bytes_read += chunk.payload.size();
  // The chunk file's own CRC was verified against these bytes on reading;
  // the manifest's must be that same CRC (a stale but intact file is not).
  if (chunk.payload.size() != c.payload_bytes || chunk.meta.payload_crc32c != c.payload_crc32c) {
    return DataLoss(id.Describe() + " on " + stores[static_cast<size_t>(c.node)]->Describe() +
                    ": not the bytes the manifest records");
  }
  return std::move(chunk.payload);
}

namespace {

// Data chunk `index` of `stripe`, decoded from k other chunks of it.
Result<std::vector<uint8_t>> Degraded(const DatasetManifest& m, const std::vector<ChunkStore*>& stores,
                                      uint64_t stripe, uint32_t index, const Status& why, ReadStats& stats) {
  const int k = m.layout.k, n = m.layout.k + m.layout.m;
  const std::vector<StoredChunk>& chunks = m.stripes[static_cast<size_t>(stripe)];
  uint64_t coded = 0;
  for (const StoredChunk& c : chunks) coded = std::max(coded, c.payload_bytes);
  std::vector<std::vector<uint8_t>> buffers(static_cast<size_t>(n), std::vector<uint8_t>(coded, 0));
  std::vector<bool> present(static_cast<size_t>(n), false);
  int have = 0;
  std::string failures;
  for (int i = 0; i < n && have < k; ++i) {
    if (static_cast<uint32_t>(i) == index) continue;
    auto payload = ReadStoredChunk(m, stores, stripe, chunks[static_cast<size_t>(i)], stats);
    if (!payload.ok()) {
      failures += "; chunk " + std::to_string(i) + ": " + payload.status().message();
      continue;
    }
    std::memcpy(buffers[static_cast<size_t>(i)].data(), payload->data(), payload->size());
    present[static_cast<size_t>(i)] = true;
    ++have;
  }
  const StoredChunk& lost = chunks[static_cast<size_t>(index)];
  if (have < k) {
    const auto [first, count] = StripeSamples(m, stripe);
    return DataLoss(m.dataset + " stripe " + std::to_string(stripe) + " is lost: only " + std::to_string(have) +
                    " of its " + std::to_string(n) + " chunks are readable and " + std::to_string(k) +
                    " are needed; samples " + std::to_string(first) + ".." + std::to_string(first + count - 1) +
                    " cannot be read (chunk " + std::to_string(index) + ": " + why.message() + failures + ")");
  }
  TENAX_ASSIGN_OR_RETURN(ReedSolomon rs, ReedSolomon::Create(k, m.layout.m));
  std::vector<uint8_t*> pointers(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) pointers[static_cast<size_t>(i)] = buffers[static_cast<size_t>(i)].data();
  TENAX_RETURN_IF_ERROR(rs.Reconstruct(coded, present, pointers.data()));
  std::vector<uint8_t> out(buffers[index].begin(), buffers[index].begin() + static_cast<std::ptrdiff_t>(lost.payload_bytes));
  if (Crc32c(out) != lost.payload_crc32c) {
    return DataLoss(m.dataset + " stripe " + std::to_string(stripe) + " chunk " + std::to_string(index) +
                    ": the decoded bytes fail the manifest's CRC (more corruption than the checksums caught)");
  }
  ++stats.degraded_chunks;
  return out;
}

}  // namespace

Result<std::vector<uint8_t>> ReadRecords(const DatasetManifest& m, const std::vector<ChunkStore*>& stores,
                                         uint64_t first, uint64_t count, ReadStats* stats) {
  ReadStats local;
  ReadStats& st = stats ? *stats : local;
  if (first > m.layout.records || count > m.layout.records - first) {
    return InvalidArgument(m.dataset + ": records " + std::to_string(first) + "+" + std::to_string(count) +
                           " outside its " + std::to_string(m.layout.records));
  }
  TENAX_ASSIGN_OR_RETURN(StripeLayout plan, StripeLayout::Create(m.layout));
  std::vector<uint8_t> out;
  out.reserve(count * m.layout.record_bytes);
  uint64_t next = first;
  while (next < first + count) {
    const ChunkRange r = plan.ChunkOfRecord(next);
    const StoredChunk& c = m.stripes[static_cast<size_t>(r.stripe)][r.index];
    auto payload = ReadStoredChunk(m, stores, r.stripe, c, st);
    if (!payload.ok()) payload = Degraded(m, stores, r.stripe, r.index, payload.status(), st);
    if (!payload.ok()) return payload.status();
    const uint64_t end = std::min(first + count, c.first_record + c.record_count);
    const auto* from = payload->data() + (next - c.first_record) * m.layout.record_bytes;
    out.insert(out.end(), from, from + (end - next) * m.layout.record_bytes);
    next = end;
  }
  return out;
}

uint64_t StripesSharingANode(const DatasetManifest& m) {
  uint64_t shared = 0;
  for (const auto& stripe : m.stripes) {
    std::vector<int> nodes;
    for (const StoredChunk& c : stripe) nodes.push_back(c.node);
    std::sort(nodes.begin(), nodes.end());
    if (std::adjacent_find(nodes.begin(), nodes.end()) != nodes.end()) ++shared;
  }
  return shared;
}

}  // namespace tenax::store

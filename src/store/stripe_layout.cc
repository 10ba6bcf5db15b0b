#include "tenax/store/stripe_layout.h"

#include <algorithm>

#include "tenax/store/reed_solomon.h"

namespace tenax::store {

Result<StripeLayout> StripeLayout::Create(const LayoutParams& p) {
  if (p.records == 0) return InvalidArgument("the dataset has no records: nothing to store");
  if (p.record_bytes == 0) return InvalidArgument("records of 0 bytes: a record must hold at least one byte");
  if (p.chunk_bytes < p.record_bytes) {
    return InvalidArgument("chunk size " + std::to_string(p.chunk_bytes) + " B is below one record (" +
                           std::to_string(p.record_bytes) + " B): use a chunk size of at least one record");
  }
  // The code decides which k, m are possible (and says what would work).
  TENAX_RETURN_IF_ERROR(ReedSolomon::Create(p.k, p.m).status());
  return StripeLayout(p);
}

StripeLayout::StripeLayout(const LayoutParams& p) : p_(p) {
  records_per_chunk_ = p.chunk_bytes / p.record_bytes;
  const uint64_t data_chunks = (p.records + records_per_chunk_ - 1) / records_per_chunk_;
  stripes_ = (data_chunks + static_cast<uint64_t>(p.k) - 1) / static_cast<uint64_t>(p.k);
}

std::vector<ChunkRange> StripeLayout::ChunksOf(uint64_t stripe) const {
  std::vector<ChunkRange> out;
  if (stripe >= stripes_) return out;
  const uint64_t coded = CodedBytes(stripe);
  for (int i = 0; i < p_.k + p_.m; ++i) {
    ChunkRange c;
    c.stripe = stripe;
    c.index = static_cast<uint32_t>(i);
    if (i < p_.k) {
      const uint64_t chunk = stripe * static_cast<uint64_t>(p_.k) + static_cast<uint64_t>(i);
      c.first_record = std::min(p_.records, chunk * records_per_chunk_);
      c.record_count = std::min(p_.records, c.first_record + records_per_chunk_) - c.first_record;
      c.payload_bytes = c.record_count * p_.record_bytes;
    } else {
      c.first_record = 0;
      c.record_count = 0;
      c.payload_bytes = coded;
    }
    out.push_back(c);
  }
  return out;
}

uint64_t StripeLayout::CodedBytes(uint64_t stripe) const {
  if (stripe >= stripes_) return 0;
  const uint64_t first = stripe * static_cast<uint64_t>(p_.k) * records_per_chunk_;
  return std::min(records_per_chunk_, p_.records - first) * p_.record_bytes;
}

ChunkRange StripeLayout::ChunkOfRecord(uint64_t record) const {
  const uint64_t chunk = record / records_per_chunk_;
  const uint64_t stripe = chunk / static_cast<uint64_t>(p_.k);
  return ChunksOf(stripe)[static_cast<size_t>(chunk % static_cast<uint64_t>(p_.k))];
}

}  // namespace tenax::store

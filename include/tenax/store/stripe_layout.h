// How a dataset of fixed-size records is cut into chunks and stripes
// (layer `store`, docs/store.md), and what each chunk holds: the global
// view of the data that placement, degraded reads and PRM's recovery plan
// work from.
//
// - A record is one training sample as stored (for an idx pair: the image
//   bytes then the label byte). Records are never split across chunks.
// - A data chunk holds up to `records_per_chunk` consecutive records; a
//   stripe is k consecutive data chunks plus m parity chunks. The last
//   stripe may hold fewer records (its tail chunks shorter or empty).
// - Every chunk of a stripe is coded at the stripe's longest data chunk
//   length (shorter ones are zero-padded for coding only); the padding is
//   not stored in data chunks, and parity chunks have that full length.
//
// Pure values; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::store {

struct LayoutParams {
  uint64_t records = 0;          // samples in the dataset
  uint64_t record_bytes = 0;     // bytes per sample (>= 1)
  uint64_t chunk_bytes = 1 << 20;  // target bytes per data chunk (>= record_bytes)
  int k = 4, m = 2;
};

struct ChunkRange {
  uint64_t stripe = 0;
  uint32_t index = 0;          // 0..k-1 data, k..k+m-1 parity
  uint64_t first_record = 0;   // data chunks: the first record held
  uint64_t record_count = 0;   // data chunks: records held (0 for parity)
  uint64_t payload_bytes = 0;  // bytes stored: records x record_bytes, or the stripe's length for parity
};

class StripeLayout {
 public:
  // InvalidArgument, saying what would work, for 0 records or record
  // bytes, a chunk smaller than a record, or an impossible k, m.
  static Result<StripeLayout> Create(const LayoutParams& p);

  const LayoutParams& params() const { return p_; }
  uint64_t records_per_chunk() const { return records_per_chunk_; }
  uint64_t stripes() const { return stripes_; }
  // Every chunk of stripe `s` (k data then m parity).
  std::vector<ChunkRange> ChunksOf(uint64_t stripe) const;
  // The bytes every chunk of `stripe` is coded at (its longest data chunk).
  uint64_t CodedBytes(uint64_t stripe) const;
  // The data chunk holding `record` (record < records).
  ChunkRange ChunkOfRecord(uint64_t record) const;

 private:
  explicit StripeLayout(const LayoutParams& p);
  LayoutParams p_;
  uint64_t records_per_chunk_ = 0, stripes_ = 0;
};

}  // namespace tenax::store

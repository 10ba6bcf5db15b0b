// Reed-Solomon erasure coding over GF(2^8) with ISA-L (layer `store`): k
// data chunks of equal length give m parity chunks, and any k of the k+m
// chunks rebuild the others. The encoding matrix is ISA-L's Cauchy matrix
// (gf_gen_cauchy1_matrix): identity on the data rows, and every k x k
// submatrix invertible, so every pattern of up to m losses decodes.
//
// Threading: a ReedSolomon is immutable after Create and may be shared by
// threads; Encode and Reconstruct allocate only small tables (never chunk
// buffers) and write only the buffers they are given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::store {

class ReedSolomon {
 public:
  // InvalidArgument, saying what would work, unless 1 <= k, 0 <= m and
  // k + m <= 255 (GF(2^8) has 255 usable evaluation points).
  static Result<ReedSolomon> Create(int k, int m);

  int k() const { return k_; }
  int m() const { return m_; }

  // Computes parity[0..m-1] (each `len` bytes) from data[0..k-1].
  void Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const;

  // chunks[0..k+m-1], each `len` bytes; present[i] says whether chunk i
  // holds valid bytes. Rewrites every chunk that is not present (data and
  // parity) from k present ones. FailedPrecondition naming the count when
  // fewer than k are present; InvalidArgument when `present` has another
  // size than k+m. Present chunks are only read.
  Status Reconstruct(size_t len, const std::vector<bool>& present, uint8_t* const* chunks) const;

 private:
  ReedSolomon(int k, int m, std::vector<uint8_t> matrix) : k_(k), m_(m), matrix_(std::move(matrix)) {}

  int k_, m_;
  std::vector<uint8_t> matrix_;  // (k+m) x k, row-major; rows 0..k-1 the identity
};

}  // namespace tenax::store

#include "tenax/store/reed_solomon.h"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <climits>

namespace tenax::store {
namespace {

// ISA-L takes lengths as int: longer buffers are coded in pieces.
constexpr size_t kMaxPiece = static_cast<size_t>(INT_MAX / 2) & ~size_t{63};

void EncodeRows(size_t len, int k, int rows, uint8_t* tables, const uint8_t* const* in, uint8_t* const* out) {
  std::vector<uint8_t*> src(static_cast<size_t>(k)), dst(static_cast<size_t>(rows));
  for (size_t done = 0; done < len;) {
    const size_t piece = std::min(kMaxPiece, len - done);
    for (int i = 0; i < k; ++i) src[static_cast<size_t>(i)] = const_cast<uint8_t*>(in[i]) + done;
    for (int i = 0; i < rows; ++i) dst[static_cast<size_t>(i)] = out[i] + done;
    ec_encode_data(static_cast<int>(piece), k, rows, tables, src.data(), dst.data());
    done += piece;
  }
}

}  // namespace

Result<ReedSolomon> ReedSolomon::Create(int k, int m) {
  if (k < 1 || m < 0 || k + m > 255) {
    return InvalidArgument("Reed-Solomon k = " + std::to_string(k) + ", m = " + std::to_string(m) +
                           " is not possible: use k >= 1, m >= 0 and k + m <= 255 (for example 4 + 2)");
  }
  std::vector<uint8_t> matrix(static_cast<size_t>((k + m) * k));
  gf_gen_cauchy1_matrix(matrix.data(), k + m, k);
  return ReedSolomon(k, m, std::move(matrix));
}

void ReedSolomon::Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const {
  if (m_ == 0 || len == 0) return;
  std::vector<uint8_t> tables(static_cast<size_t>(32 * k_ * m_));
  ec_init_tables(k_, m_, const_cast<uint8_t*>(matrix_.data()) + k_ * k_, tables.data());
  EncodeRows(len, k_, m_, tables.data(), data, parity);
}

Status ReedSolomon::Reconstruct(size_t len, const std::vector<bool>& present, uint8_t* const* chunks) const {
  const int n = k_ + m_;
  if (static_cast<int>(present.size()) != n) {
    return InvalidArgument("Reed-Solomon " + std::to_string(k_) + "+" + std::to_string(m_) + ": " +
                           std::to_string(present.size()) + " presence flags for " + std::to_string(n) + " chunks");
  }
  std::vector<int> survivors, missing;
  for (int i = 0; i < n; ++i) (present[static_cast<size_t>(i)] ? survivors : missing).push_back(i);
  if (missing.empty()) return Status::Ok();
  if (static_cast<int>(survivors.size()) < k_) {
    return FailedPrecondition("Reed-Solomon " + std::to_string(k_) + "+" + std::to_string(m_) + ": only " +
                              std::to_string(survivors.size()) + " of " + std::to_string(n) +
                              " chunks survive, at least " + std::to_string(k_) + " are needed");
  }
  survivors.resize(static_cast<size_t>(k_));
  // The rows of the survivors form an invertible k x k matrix S (Cauchy):
  // data = S^-1 survivors, and a lost row r is row_r(matrix) S^-1.
  std::vector<uint8_t> s(static_cast<size_t>(k_ * k_)), inverse(static_cast<size_t>(k_ * k_));
  for (int r = 0; r < k_; ++r) {
    for (int c = 0; c < k_; ++c) {
      s[static_cast<size_t>(r * k_ + c)] = matrix_[static_cast<size_t>(survivors[static_cast<size_t>(r)] * k_ + c)];
    }
  }
  if (gf_invert_matrix(s.data(), inverse.data(), k_) != 0) {
    return Internal("Reed-Solomon " + std::to_string(k_) + "+" + std::to_string(m_) +
                    ": the survivors' matrix is singular (not a Cauchy code?)");
  }
  const int rows = static_cast<int>(missing.size());
  std::vector<uint8_t> decode(static_cast<size_t>(rows * k_), 0);
  for (int i = 0; i < rows; ++i) {
    const int lost = missing[static_cast<size_t>(i)];
    for (int c = 0; c < k_; ++c) {
      uint8_t v = 0;
      for (int t = 0; t < k_; ++t) {
        v ^= gf_mul(matrix_[static_cast<size_t>(lost * k_ + t)], inverse[static_cast<size_t>(t * k_ + c)]);
      }
      decode[static_cast<size_t>(i * k_ + c)] = v;
    }
  }
  std::vector<uint8_t> tables(static_cast<size_t>(32 * k_ * rows));
  ec_init_tables(k_, rows, decode.data(), tables.data());
  std::vector<const uint8_t*> in(static_cast<size_t>(k_));
  std::vector<uint8_t*> out(static_cast<size_t>(rows));
  for (int i = 0; i < k_; ++i) in[static_cast<size_t>(i)] = chunks[survivors[static_cast<size_t>(i)]];
  for (int i = 0; i < rows; ++i) out[static_cast<size_t>(i)] = chunks[missing[static_cast<size_t>(i)]];
  if (len > 0) EncodeRows(len, k_, rows, tables.data(), in.data(), out.data());
  return Status::Ok();
}

}  // namespace tenax::store

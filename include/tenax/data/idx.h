// Decoder for the IDX format of (Fashion-)MNIST, optionally gzip-compressed.
//
// IDX: 2 zero bytes, a dtype byte (0x08 = unsigned byte), a rank byte, `rank`
// big-endian uint32 dimensions, then prod(dims) elements. The decoder checks
// every one of these against the bytes present: wrong magic, unsupported
// dtype, truncated or trailing data and corrupt gzip are DataLoss errors
// naming the file. It never allocates more than `max_bytes` for the payload.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax {

struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;  // row-major, prod(dims) bytes
};

inline constexpr size_t kDefaultIdxMaxBytes = 256u << 20;

// Inflates gzip data (all members) into at most `max_bytes`. `name` is used
// in messages.
Result<std::vector<uint8_t>> Gunzip(std::span<const uint8_t> gz, size_t max_bytes, const std::string& name);

// Decodes IDX bytes, inflating them first if they start with the gzip magic.
Result<IdxArray> DecodeIdx(std::span<const uint8_t> bytes, const std::string& name,
                           size_t max_bytes = kDefaultIdxMaxBytes);

Result<IdxArray> ReadIdxFile(const std::string& path, size_t max_bytes = kDefaultIdxMaxBytes);

}  // namespace tenax

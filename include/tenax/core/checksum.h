// Checksums of bytes on disk and on the wire: CRC-32C (Castagnoli), computed
// by ISA-L (crc32_iscsi, with the SSE4.2/PCLMUL kernels it selects at run
// time). The standard parameters: Crc32c("123456789") == 0xE3069283.
//
// Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tenax {

// CRC-32C of `bytes`. `previous` continues a CRC over more bytes:
// Crc32c(b, Crc32c(a)) == Crc32c(a + b).
uint32_t Crc32c(std::span<const uint8_t> bytes, uint32_t previous = 0);
inline uint32_t Crc32c(std::string_view text, uint32_t previous = 0) {
  return Crc32c(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), previous);
}

}  // namespace tenax

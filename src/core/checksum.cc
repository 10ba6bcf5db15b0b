#include "tenax/core/checksum.h"

#include <isa-l/crc.h>

#include <climits>

namespace tenax {

uint32_t Crc32c(std::span<const uint8_t> bytes, uint32_t previous) {
  // ISA-L's crc32_iscsi is the raw reflected CRC: the standard CRC-32C
  // starts from ~0 and inverts the result, so a running CRC is continued by
  // undoing that last inversion. Its length is an int: feed larger spans in
  // pieces.
  uint32_t crc = ~previous;
  const uint8_t* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const int piece = static_cast<int>(left > static_cast<size_t>(INT_MAX / 2) ? INT_MAX / 2 : left);
    crc = crc32_iscsi(const_cast<unsigned char*>(p), piece, crc);
    p += piece;
    left -= static_cast<size_t>(piece);
  }
  return ~crc;
}

}  // namespace tenax

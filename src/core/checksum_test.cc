#include "tenax/core/checksum.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace tenax {
namespace {

TEST(Crc32c, MatchesTheStandardCheckValueAndContinues) {
  // The CRC-32C catalogue's check value, and RFC 3720 (iSCSI) B.4's 32 zero bytes.
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c("6789", Crc32c("12345")), 0xE3069283u);
}

TEST(Crc32c, EveryFlippedBitChangesIt) {
  std::mt19937 rng(3);
  std::vector<uint8_t> bytes(4096);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const uint32_t crc = Crc32c(bytes);
  for (size_t bit = 0; bit < bytes.size() * 8; bit += 97) {
    bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_NE(Crc32c(bytes), crc) << "bit " << bit;
    bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
  EXPECT_EQ(Crc32c(bytes), crc);
}

}  // namespace
}  // namespace tenax

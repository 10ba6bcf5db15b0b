// The little request protocol between the transport tests and net_test_peer.
// Its kinds lie in the private test range of net/message_kinds.h.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "tenax/net/message_kinds.h"

namespace tenax::testproto {

enum Kind : uint32_t {
  kAlloc = net::kFirstTestKind + 1,
  kRegion = net::kFirstTestKind + 2,
  kHash = net::kFirstTestKind + 3,
  kHashReply = net::kFirstTestKind + 4,
  kEcho = net::kFirstTestKind + 5,
  kEchoReply = net::kFirstTestKind + 6,
  kRead = net::kFirstTestKind + 7,
  kReadReply = net::kFirstTestKind + 8,
  kExit = net::kFirstTestKind + 9,
  kFlood = net::kFirstTestKind + 10,
  kFloodItem = net::kFirstTestKind + 11,
  kFloodDone = net::kFirstTestKind + 12,
  kPutForever = net::kFirstTestKind + 13,
  kConnectFlood = net::kFirstTestKind + 14,
};
static_assert(kConnectFlood <= net::kLastTestKind);

// The first 8 bytes of flood item `i`: its index, decimal, zero-padded.
inline std::string FloodIndex(size_t i) {
  std::string digits = std::to_string(i);
  return std::string(digits.size() < 8 ? 8 - digits.size() : 0, '0') + digits;
}

inline uint8_t Pattern(size_t i) { return static_cast<uint8_t>((i * 31 + 7) & 0xff); }

inline std::string HashHex(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace tenax::testproto

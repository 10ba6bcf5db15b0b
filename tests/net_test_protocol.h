// The little request protocol between the transport tests and net_test_peer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace tenax::testproto {

enum Kind : uint32_t {
  kAlloc = 1,
  kRegion = 2,
  kHash = 3,
  kHashReply = 4,
  kEcho = 5,
  kEchoReply = 6,
  kExit = 9,
};

inline uint8_t Pattern(size_t i) { return static_cast<uint8_t>((i * 31 + 7) & 0xff); }

inline std::string HashHex(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace tenax::testproto

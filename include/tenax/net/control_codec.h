// Encoding and decoding of net's control messages (proto/net_wire.proto).
// The decoder is the first thing that touches bytes from the network: it
// bounds the size before parsing, checks the version and the shape of every
// field, and returns ProtocolError naming the peer for anything else.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "net_wire.pb.h"
#include "tenax/core/status.h"

namespace tenax::net {

inline constexpr uint32_t kWireVersion = 1;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;  // HMAC-SHA256
inline constexpr size_t kMaxNodeNameBytes = 256;
inline constexpr size_t kMaxWorkerAddressBytes = 64 << 10;
inline constexpr size_t kDefaultMaxControlBytes = 1 << 20;

// Serialises `envelope` with version = kWireVersion.
std::string EncodeEnvelope(wire::Envelope envelope);

// `peer` names the sender in messages ("10.0.0.2:5000 (worker-1)").
Result<wire::Envelope> DecodeEnvelope(std::span<const uint8_t> bytes, size_t max_bytes, const std::string& peer);

// Region descriptors in wire form. The decoder bounds the key size and
// rejects empty regions.
inline constexpr size_t kMaxRkeyBytes = 4096;
std::string EncodeRegion(uint64_t address, uint64_t length, const std::string& rkey);
struct DecodedRegion {
  uint64_t address = 0;
  uint64_t length = 0;
  std::string rkey;
};
Result<DecodedRegion> DecodeRegion(std::string_view bytes, const std::string& peer);

}  // namespace tenax::net

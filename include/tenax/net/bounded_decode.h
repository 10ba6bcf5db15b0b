// Decoding a protobuf message that came from outside (a peer, a file):
// every layer's codec (comm, coord, ps, store, sched, coding) bounds the
// size before parsing and names the peer in the error. One definition, so
// that the wording and the bound check are the same everywhere.
//
// Failure: ProtocolError("peer <peer>: undecodable <what> (<n> bytes)")
// for bytes over `max_bytes` or that do not parse. Thread-safe (pure).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "tenax/core/status.h"

namespace tenax::net {

// "peer <peer>: <what>" as a ProtocolError: a decoder's refusal.
inline Status BadMessage(const std::string& peer, const std::string& what) {
  return ProtocolError("peer " + peer + ": " + what);
}

// Parses `bytes` as `Msg` (a protobuf message) when they are at most
// `max_bytes` long; the fields' meaning is the caller's to check.
template <typename Msg>
Result<Msg> DecodeBoundedProto(std::string_view bytes, size_t max_bytes, const std::string& peer, const char* what) {
  Msg m;
  if (bytes.size() > max_bytes || !m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return BadMessage(peer, std::string("undecodable ") + what + " (" + std::to_string(bytes.size()) + " bytes)");
  }
  return m;
}

}  // namespace tenax::net

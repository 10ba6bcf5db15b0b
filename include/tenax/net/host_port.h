// Network addresses as users write them ("host:port"), for the coordinator
// address in job files and flags. A decoder of outside input: it is part of
// the config decoder's fuzz build (library tenax_net_address, no UCX).
#pragma once

#include <cstdint>
#include <string>

#include "tenax/core/status.h"

namespace tenax::net {

struct HostPort {
  std::string host;
  uint16_t port = 0;  // 0 = any free port (listeners) or not yet known
};

// Splits at the last ':' (so "::1:80" keeps "::1"). InvalidArgument quoting
// the text for an empty host, a missing or non-numeric port, or one above
// 65535.
Result<HostPort> ParseHostPort(const std::string& text);

}  // namespace tenax::net

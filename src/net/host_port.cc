#include "tenax/net/host_port.h"

namespace tenax::net {

Result<HostPort> ParseHostPort(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return InvalidArgument("'" + text + "' is not host:port");
  }
  const std::string port_text = text.substr(colon + 1);
  int64_t port = 0;
  for (char ch : port_text) {
    if (ch < '0' || ch > '9' || port > 65535) return InvalidArgument("'" + text + "' has a bad port");
    port = port * 10 + (ch - '0');
  }
  if (port > 65535) return InvalidArgument("'" + text + "' has a port above 65535");
  return HostPort{text.substr(0, colon), static_cast<uint16_t>(port)};
}

}  // namespace tenax::net

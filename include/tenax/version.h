#pragma once

namespace tenax {
inline constexpr const char* kTenaxVersion = "0.1.0";
}  // namespace tenax

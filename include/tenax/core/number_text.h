// How error messages and descriptions write a number a user gave: as
// `std::ostream << double` does (6 significant digits, no trailing zeros:
// 0.5, 1e-05, 1000). Header-only, so the decoders' fuzz build needs nothing.
#pragma once

#include <sstream>
#include <string>

namespace tenax {

inline std::string NumberText(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace tenax

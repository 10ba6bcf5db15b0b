#include "cross_memory_wire.h"

#include <algorithm>
#include <charconv>
#include <vector>

namespace tenax::python {
namespace {

// Fields separated by single spaces, none empty.
std::vector<std::string_view> Fields(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == ' ') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

template <typename T>
bool Number(std::string_view s, T& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string EncodeProbe(const CrossMemoryProbe& p) {
  return p.host + ' ' + std::to_string(p.pid) + ' ' + std::to_string(p.token_address) + ' ' +
         std::to_string(p.token[0]) + ' ' + std::to_string(p.token[1]);
}

Result<CrossMemoryProbe> DecodeProbe(std::string_view bytes) {
  const auto f = Fields(bytes);
  CrossMemoryProbe p;
  if (f.size() != 5 || f[0].empty() || !Number(f[1], p.pid) || p.pid <= 0 || !Number(f[2], p.token_address) ||
      !Number(f[3], p.token[0]) || !Number(f[4], p.token[1])) {
    return ProtocolError("a malformed cross-memory probe (want \"host pid address token token\")");
  }
  p.host = std::string(f[0]);
  return p;
}

std::string EncodeTensor(const CrossMemoryTensor& t) {
  return std::to_string(t.address) + ' ' + std::to_string(t.count);
}

Result<CrossMemoryTensor> DecodeTensor(std::string_view bytes) {
  const auto f = Fields(bytes);
  CrossMemoryTensor t;
  if (f.size() != 2 || !Number(f[0], t.address) || !Number(f[1], t.count)) {
    return ProtocolError("a malformed tensor address (want \"address count\")");
  }
  return t;
}

std::pair<size_t, size_t> ChunkOf(size_t count, int p, int s) {
  constexpr size_t kAlign = 16;  // floats: a 64-byte line
  size_t each = count / static_cast<size_t>(p) + (count % static_cast<size_t>(p) != 0);
  each = (each + kAlign - 1) / kAlign * kAlign;
  const size_t begin = std::min(count, each * static_cast<size_t>(s));
  return {begin, std::min(count, begin + std::min(each, count - begin))};
}

}  // namespace tenax::python

// Fuzzes the cross-memory sum's round messages (src/python/
// cross_memory_wire.h), which come from peers: decoding any bytes must not
// crash, and what decodes must decode again, equal, from its encoding. Also checks,
// for counts and rank counts drawn from the input, that the chunks cover
// the tensor in order without overlap.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../src/python/cross_memory_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (auto p = tenax::python::DecodeProbe(bytes); p.ok()) {
    auto again = tenax::python::DecodeProbe(tenax::python::EncodeProbe(*p));
    if (!again.ok() || again->host != p->host || again->pid != p->pid || again->token_address != p->token_address ||
        again->token != p->token) {
      std::abort();
    }
  }
  if (auto t = tenax::python::DecodeTensor(bytes); t.ok()) {
    auto again = tenax::python::DecodeTensor(tenax::python::EncodeTensor(*t));
    if (!again.ok() || again->address != t->address || again->count != t->count) std::abort();
  }
  if (size >= 5) {
    uint32_t count = 0;
    std::memcpy(&count, data, 4);
    const int p = 1 + data[4] % 64;
    size_t next = 0;
    for (int s = 0; s < p; ++s) {
      const auto [b, e] = tenax::python::ChunkOf(count, p, s);
      if (b != next || e < b || e > count) std::abort();
      if (b < count && b % 16 != 0) std::abort();
      next = e;
    }
    if (next != count) std::abort();
  }
  return 0;
}

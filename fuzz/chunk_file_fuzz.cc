// Fuzzes the chunk file decoder (store/chunk_file.h): any bytes either
// decode into a chunk whose payload matches its header's length and CRC, or
// give DataLoss; what decodes re-encodes to the same bytes' chunk.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "tenax/core/checksum.h"
#include "tenax/store/chunk_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  auto v = tenax::store::DecodeChunkFile(bytes, "fuzz");
  if (!v.ok()) {
    if (v.status().code() != tenax::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  if (v->payload.size() != v->meta.payload_bytes) std::abort();
  if (tenax::Crc32c(v->payload) != v->meta.payload_crc32c) std::abort();
  if (v->meta.id.index >= v->meta.k + v->meta.m || v->meta.k < 1) std::abort();
  auto again = tenax::store::EncodeChunkFile(v->meta, v->payload);
  if (!again.ok()) std::abort();
  auto back = tenax::store::DecodeChunkFile(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(again->data()), again->size()), "fuzz again");
  if (!back.ok() || !(back->meta.id == v->meta.id) || back->payload.size() != v->payload.size()) std::abort();
  return 0;
}

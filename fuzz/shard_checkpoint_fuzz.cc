// Fuzzes the decoder of shard checkpoint files (ps/shard_checkpoint.h):
// bytes from a disk that may be damaged. Every input decodes or gives
// DataLoss; what decodes re-encodes to bytes that decode to the same
// checkpoint (the header's protobuf may be written non-canonically).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tenax/ps/shard_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = tenax::ps::DecodeShardCheckpoint({data, size}, "fuzz");
  if (!c.ok()) {
    if (c.status().code() != tenax::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  const std::string again = tenax::ps::EncodeShardCheckpoint(*c);
  auto d = tenax::ps::DecodeShardCheckpoint({reinterpret_cast<const uint8_t*>(again.data()), again.size()}, "again");
  if (!d.ok() || d->job_id != c->job_id || d->shard != c->shard || d->shards != c->shards ||
      d->merges != c->merges || d->params.size() != c->params.size() ||
      std::memcmp(d->params.data(), c->params.data(), c->params.size() * sizeof(float)) != 0) {
    std::abort();
  }
  return 0;
}

// Fuzzes the decoders of the storage protocol between store clients and
// `tenax storage` data nodes (store/storage_codec.h): every input decodes
// or gives a ProtocolError, and what decodes keeps the invariants the node
// and the client rely on (a PUT names a valid chunk of a valid code within
// the chunk limit; regions are non-null and bounded), and of the resident
// recovery service's requests and replies.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tenax/store/storage_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tenax::store;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& status : {DecodeStorageHello(text, "fuzz-peer").status(), DecodeStorageWelcome(text, "fuzz-peer").status(),
                             DecodeChunkRequest(text, "fuzz-peer").status(), DecodeChunkReply(text, "fuzz-peer").status(),
                             DecodeRecoverRequest(text, "fuzz-peer").status(), DecodeRecoverReply(text, "fuzz-peer").status()}) {
    if (!status.ok() && status.code() != tenax::StatusCode::kProtocolError) std::abort();
  }
  auto req = DecodeChunkRequest(text, "fuzz-peer");
  if (req.ok() && req->op() == wire::ChunkRequest::PUT) {
    const auto& h = req->chunk();
    if (h.k() < 1 || h.k() + h.m() > 255 || h.index() >= h.k() + h.m() || h.payload_bytes() > kMaxChunkPayloadBytes ||
        !CheckDatasetName(h.dataset()).ok()) {
      std::abort();
    }
    // A valid PUT header also names a chunk file that can be written.
    if (!EncodeChunkFile(MetaOf(h), {}).ok()) std::abort();
  }
  auto hello = DecodeStorageHello(text, "fuzz-peer");
  if (hello.ok() && (hello->recv_address() == 0 || hello->recv_length() == 0 || hello->recv_length() > kMaxChunkPayloadBytes)) {
    std::abort();
  }
  // A recovery request the service accepts names a known policy.
  auto rec = DecodeRecoverRequest(text, "fuzz-peer");
  if (rec.ok() && rec->policy() != "full" && rec->policy() != "approx" && rec->policy() != "prm") std::abort();
  return 0;
}

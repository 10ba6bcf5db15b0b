// Fuzzes the decoders of what workers and parameter-server shards send each
// other (ps/ps_codec.h): every input decodes or gives a ProtocolError, and
// what decodes keeps the invariants the shard and the worker rely on.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tenax/ps/ps_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& status : {tenax::ps::DecodePsHello(text, "fuzz-peer").status(),
                             tenax::ps::DecodePsWelcome(text, "fuzz-peer").status(),
                             tenax::ps::DecodeResultReady(text, "fuzz-peer").status(),
                             tenax::ps::DecodeResultOutcome(text, "fuzz-peer").status()}) {
    if (!status.ok() && status.code() != tenax::StatusCode::kProtocolError) std::abort();
  }
  auto welcome = tenax::ps::DecodePsWelcome(text, "fuzz-peer");
  if (welcome.ok() && welcome->error().empty() &&
      (welcome->shard() >= welcome->shards() ||
       welcome->staging_length() != welcome->param_count() * sizeof(float))) {
    std::abort();
  }
  auto ready = tenax::ps::DecodeResultReady(text, "fuzz-peer");
  if (ready.ok() && (ready->steps_done() < 1 || ready->steps_done() > ready->unit_steps())) std::abort();
  return 0;
}

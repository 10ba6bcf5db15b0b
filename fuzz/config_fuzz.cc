// Fuzzes the TOML config loader and the training config validation: any
// bytes must give either a valid TrainConfig or an InvalidArgument status.
// The first line of the input is also tried as a --set override.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tenax/core/config.h"
#include "tenax/job/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto doc = tenax::ConfigDoc::Parse(text, "fuzz.toml");
  if (!doc.ok()) {
    if (doc.status().code() != tenax::StatusCode::kInvalidArgument) std::abort();
    tenax::ConfigDoc empty;
    (void)empty.Override(text.substr(0, text.find('\n')));
    return 0;
  }
  auto config = tenax::ParseTrainConfig(*doc);
  if (!config.ok() && config.status().code() != tenax::StatusCode::kInvalidArgument) std::abort();
  (void)doc->Override(text.substr(0, text.find('\n')));
  return 0;
}

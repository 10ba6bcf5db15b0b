// Fuzzes the link-fault file decoder (net/link_faults.h), which every Node
// on an emulated host reads from the launcher: any text parses or gives
// InvalidArgument; a book that parses round-trips to itself, and asking it
// for the fault in force never fails.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tenax/net/link_faults.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto book = tenax::net::LinkFaultBook::FromJson(std::string(reinterpret_cast<const char*>(data), size));
  if (!book.ok()) {
    if (book.status().code() != tenax::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  auto again = tenax::net::LinkFaultBook::FromJson(book->ToJson());
  if (!again.ok() || again->faults != book->faults) std::abort();
  for (const auto& f : book->faults) {
    auto active = book->Active(f.b, f.a, f.from_ms);
    if (!active) std::abort();  // its own window holds at its start
  }
  book->Prune(INT64_MAX);
  if (!book->faults.empty()) std::abort();
  return 0;
}

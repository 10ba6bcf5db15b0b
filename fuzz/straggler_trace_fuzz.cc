// Fuzzes the straggler trace parser (coding/straggler_model.h): any text
// parses or gives InvalidArgument; a trace that parses builds a model whose
// slowdowns are finite and >= 1 everywhere, inside the job or not.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "tenax/coding/straggler_model.h"

namespace {

constexpr int kWorkers = 4;

void CheckSlowdown(tenax::coding::StragglerModel& m, int worker, int64_t step) {
  const double x = m.Slowdown(worker, step);
  if (!std::isfinite(x) || x < 1) std::abort();
  if (m.Slow(worker, step) != (x > 1)) std::abort();  // the trace model's state is "slowdown > 1"
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = tenax::coding::ParseStragglerTrace(text, "fuzz.csv", kWorkers);
  if (!t.ok()) {
    if (t.status().code() != tenax::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  for (size_t i = 0; i < t->size(); ++i) {
    const auto& e = (*t)[i];
    if (e.step < 0 || e.worker < 0 || e.worker >= kWorkers || !(e.slowdown >= 1 && e.slowdown <= 1000)) std::abort();
    if (i > 0 && (*t)[i - 1].step > e.step) std::abort();  // sorted by step
  }
  std::vector<tenax::coding::TraceEntry> entries = *t;
  auto m = tenax::coding::MakeTraceStragglers(kWorkers, std::move(entries));
  if (!m.ok()) std::abort();  // the parser's output is always a valid trace
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (int w = -1; w <= kWorkers; ++w) {
    for (int64_t step : {int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{1000}, kMax}) CheckSlowdown(**m, w, step);
  }
  for (size_t i = 0; i < t->size() && i < 64; ++i) {
    const auto& e = (*t)[i];
    CheckSlowdown(**m, e.worker, e.step);
    if (e.step > 0) CheckSlowdown(**m, e.worker, e.step - 1);
  }
  return 0;
}

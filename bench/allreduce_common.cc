// Helpers shared by the two modes of `tenax bench allreduce` (allreduce_bench.h).
#include <cmath>
#include <cstdio>
#include <map>

#include "allreduce_bench.h"
#include "bench_common.h"

namespace tenax::bench::allreduce {

// "4096", "4KiB", "4k", "1MiB", "64M" -> bytes; a positive multiple of 4.
Result<uint64_t> ParseSize(const std::string& s) {
  size_t end = 0;
  while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
  if (end == 0 || end > 12) return InvalidArgument("bad size '" + s + "' (e.g. 4096, 4KiB, 64MiB)");
  uint64_t v = std::stoull(s.substr(0, end));
  const std::string unit = s.substr(end);
  if (unit == "k" || unit == "K" || unit == "KiB") {
    v <<= 10;
  } else if (unit == "m" || unit == "M" || unit == "MiB") {
    v <<= 20;
  } else if (unit == "g" || unit == "G" || unit == "GiB") {
    v <<= 30;
  } else if (!unit.empty() && unit != "B") {
    return InvalidArgument("bad size '" + s + "' (units: KiB, MiB, GiB)");
  }
  if (v == 0 || v % 4 != 0) return InvalidArgument("bad size '" + s + "': a positive multiple of 4 bytes (float32)");
  if (v > (uint64_t{1} << 31)) return InvalidArgument("size '" + s + "' above 2 GiB");
  return v;
}

Result<std::vector<uint64_t>> ParseSizes(const std::vector<std::string>& items) {
  std::vector<uint64_t> out;
  for (const auto& item : items) {
    TENAX_ASSIGN_OR_RETURN(uint64_t b, ParseSize(item));
    out.push_back(b);
  }
  if (out.empty()) return InvalidArgument("--sizes is empty");
  return out;
}

std::string JoinSizes(const std::vector<uint64_t>& sizes) {
  std::string s;
  for (uint64_t b : sizes) s += (s.empty() ? "" : ",") + std::to_string(b);
  return s;
}

std::string HumanBytes(uint64_t b) {
  if (b >= (1 << 20) && b % (1 << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= (1 << 10) && b % (1 << 10) == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

std::string HumanSeconds(double s) {
  char buf[32];
  if (s < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  } else if (s < 1) {
    std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  }
  return buf;
}

double BusBandwidthGBps(int procs, uint64_t bytes, double seconds) {
  return 2.0 * (procs - 1) / procs * static_cast<double>(bytes) / seconds / 1e9;
}

Result<std::vector<RunResult>> ParseResults(const std::vector<std::string>& lines, const std::string& impl, int procs,
                                            const std::vector<uint64_t>& sizes) {
  std::map<uint64_t, RunResult> by_size;
  for (const nlohmann::json& j : JsonObjectLines(lines)) {
    if (!j.contains("bytes") || !j.contains("seconds")) continue;
    RunResult r;
    r.impl = j.value("impl", "");
    r.procs = j.value("procs", 0);
    r.bytes = j.value("bytes", uint64_t{0});
    r.seconds = j.value("seconds", 0.0);
    r.iterations = j.value("iterations", uint64_t{0});
    r.cross_zone_bytes = j.value("cross_zone_bytes", -1.0);
    if (r.impl != impl || r.procs != procs) {
      return Internal("unexpected result line (wanted impl " + impl + ", " + std::to_string(procs) +
                      " procs): " + j.dump());
    }
    if (!(r.seconds > 0) || !std::isfinite(r.seconds)) return Internal("result without a positive time: " + j.dump());
    by_size[r.bytes] = r;
  }
  std::vector<RunResult> out;
  for (uint64_t bytes : sizes) {
    auto it = by_size.find(bytes);
    if (it == by_size.end()) return Internal("no result for " + HumanBytes(bytes) + " (rank 0 printed no JSON line)");
    out.push_back(it->second);
  }
  return out;
}

Status FailuresStatus(const std::vector<std::string>& failures) {
  if (failures.empty()) return Status::Ok();
  std::string msg = std::to_string(failures.size()) + " run(s) failed";
  for (const auto& f : failures) msg += "; " + f;
  return Internal(msg);
}

}  // namespace tenax::bench::allreduce

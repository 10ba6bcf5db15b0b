// What the allreduce benchmark's peer programs (mpi_allreduce.cc,
// gloo_allreduce.cc) share: their flags, the input pattern, the correctness
// check and the median. Header-only: each peer is one translation unit.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace allreduce_peer {

struct Args {
  std::vector<uint64_t> sizes{4096, 1048576, 16777216, 67108864};
  uint64_t budget_bytes = 268435456;
  uint64_t min_iters = 10;
  uint64_t warmup = 3;
  // Only for peers without a launcher of their own (Gloo).
  uint64_t rank = UINT64_MAX, procs = 0;
  std::string store_dir;
};

inline constexpr const char* kCommonUsage =
    "  --sizes         message sizes in bytes, multiples of 4 (float32)\n"
    "                  default 4096,1048576,16777216,67108864\n"
    "  --budget-bytes  timed iterations per size = max(min-iters, min(2000, budget/size))\n"
    "                  default 268435456\n"
    "  --min-iters     default 10\n"
    "  --warmup        untimed calls before timing, default 3\n";

inline bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;  // strtoull accepts "-1" and " 1"
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

// Returns "" on success, else an error message; *help set for --help.
// `ranked`: accept (and require) --rank, --procs and --store-dir.
inline std::string ParseArgs(int argc, char** argv, bool ranked, Args* a, bool* help) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag == "--help" || flag == "-h") {
      *help = true;
      return "";
    }
    size_t eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return "missing value for " + flag;
    }
    uint64_t* scalar = flag == "--budget-bytes"      ? &a->budget_bytes
                       : flag == "--min-iters"       ? &a->min_iters
                       : flag == "--warmup"          ? &a->warmup
                       : ranked && flag == "--rank"  ? &a->rank
                       : ranked && flag == "--procs" ? &a->procs
                                                     : nullptr;
    if (scalar) {
      if (!ParseU64(value, scalar)) return "bad value for " + flag + ": '" + value + "'";
    } else if (ranked && flag == "--store-dir") {
      if (value.empty()) return "empty --store-dir";
      a->store_dir = value;
    } else if (flag == "--sizes") {
      a->sizes.clear();
      size_t pos = 0;
      while (pos <= value.size()) {
        size_t comma = std::min(value.find(',', pos), value.size());
        uint64_t b = 0;
        std::string item = value.substr(pos, comma - pos);
        if (!ParseU64(item, &b) || b == 0 || b % 4 != 0)
          return "bad size '" + item + "' in --sizes (positive multiple of 4 bytes)";
        if (b / 4 > static_cast<uint64_t>(INT32_MAX)) return "size too large: " + item;  // MPI counts are int
        a->sizes.push_back(b);
        pos = comma + 1;
      }
    } else {
      return "unknown flag " + flag;
    }
  }
  if (ranked) {
    if (a->procs == 0 || a->procs > 4096) return "--procs P is required (1..4096)";
    if (a->rank >= a->procs) return "--rank R is required, 0 <= R < P";
    if (a->store_dir.empty()) return "--store-dir DIR is required";
  }
  if (a->min_iters == 0) return "--min-iters must be >= 1";
  return "";
}

inline void Fill(std::vector<float>& buf, int rank) {
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
}

// Counts elements that differ from sum_r (r + 1 + i%7); the values are small
// integers, so the float sum is exact whatever order the peer reduces in.
inline size_t CountWrong(const std::vector<float>& buf, int procs, size_t* first_bad) {
  size_t wrong = 0;
  for (size_t i = 0; i < buf.size(); ++i) {
    const float expect = static_cast<float>(procs * (procs + 1) / 2 + procs * static_cast<int>(i % 7));
    if (buf[i] != expect && wrong++ == 0) *first_bad = i;
  }
  return wrong;
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace allreduce_peer

// What the allreduce benchmark's programs share: the peers' flags and
// measurement loop (mpi_allreduce.cc, gloo_allreduce.cc), and for them and
// tenax's own rank (allreduce_bench.cc) the iteration count, the input
// pattern and the correctness check.
// Header-only: each peer is one translation unit.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "median.h"

namespace allreduce_peer {

struct Args {
  std::vector<uint64_t> sizes{4096, 1048576, 16777216, 67108864};
  uint64_t budget_bytes = 268435456;
  uint64_t min_iters = 10;
  uint64_t warmup = 3;
  // Only for peers without a launcher of their own (Gloo).
  uint64_t rank = UINT64_MAX, procs = 0;
  std::string store_dir;
  std::string host = "127.0.0.1";  // the address this rank's transport binds (namespaced hosts: its veth's)
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
    } else if (ranked && flag == "--host") {
      if (value.empty()) return "empty --host";
      a->host = value;
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

// Timed calls per size, the same for tenax and its peers.
inline uint64_t Iterations(uint64_t bytes, uint64_t budget_bytes, uint64_t min_iters) {
  return std::max(min_iters, std::min<uint64_t>(2000, budget_bytes / bytes));
}

inline void Fill(float* data, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
}

// Counts elements that differ from sum_r (r + 1 + i%7); the values are small
// integers, so the float sum is exact whatever order the peer reduces in.
inline size_t CountWrong(const float* data, size_t count, int procs, size_t* first_bad) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const float expect = static_cast<float>(procs * (procs + 1) / 2 + procs * static_cast<int>(i % 7));
    if (data[i] != expect && wrong++ == 0) *first_bad = i;
  }
  return wrong;
}

using tenax::bench::Median;

// The measurement each peer runs per size, with its library's calls plugged
// in: `allreduce(float* data, size_t count)` sums in place, `barrier()`, and
// `agree(double my_median, bool my_sums_wrong, double* slowest)` returns
// false on every rank if any rank saw wrong sums, else sets *slowest (on rank
// 0 at least) to the max of the ranks' medians. Rank 0 prints one JSON line
// per size. Returns the exit code: 0, or 1 after wrong sums.
template <typename AllreduceFn, typename BarrierFn, typename AgreeFn>
int MeasureSizes(const Args& a, int rank, int procs, const char* impl, const char* program, AllreduceFn allreduce,
                 BarrierFn barrier, AgreeFn agree) {
  for (const uint64_t bytes : a.sizes) {
    const size_t count = bytes / 4;
    const uint64_t iters = Iterations(bytes, a.budget_bytes, a.min_iters);
    std::vector<float> buf(count);
    std::vector<double> seconds(iters);
    Fill(buf.data(), count, rank);
    for (uint64_t w = 0; w < a.warmup; ++w) allreduce(buf.data(), count);
    // One barrier so all ranks start together; none between iterations, as in
    // a real training loop where back-to-back allreduces pipeline freely.
    barrier();
    for (uint64_t it = 0; it < iters; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      allreduce(buf.data(), count);
      seconds[it] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    // The timed loop multiplies the data by P per call, so it saturates at
    // +inf (full-speed on x86 SSE/AVX; it never passes through the slow
    // subnormals). Check correctness on one fresh call instead.
    Fill(buf.data(), count, rank);
    allreduce(buf.data(), count);
    size_t first_bad = 0;
    const size_t wrong = CountWrong(buf.data(), count, procs, &first_bad);
    if (wrong) {
      std::fprintf(stderr, "%s: rank %d: %zu of %zu floats wrong at %llu bytes (first at %zu: %g)\n", program, rank,
                   wrong, count, static_cast<unsigned long long>(bytes), first_bad, buf[first_bad]);
    }
    double slowest = 0;
    if (!agree(Median(seconds), wrong != 0, &slowest)) return 1;
    if (rank == 0) {
      std::printf("{\"impl\":\"%s\",\"procs\":%d,\"bytes\":%llu,\"seconds\":%.9g,\"iterations\":%llu}\n", impl, procs,
                  static_cast<unsigned long long>(bytes), slowest, static_cast<unsigned long long>(iters));
      std::fflush(stdout);
    }
  }
  return 0;
}

// main() of a peer launched once per rank (--rank, --procs, --store-dir):
// parses the flags (2 and the usage on bad ones), runs `run(args)` and turns
// an exception (the peers' libraries report failures so) into one line
// naming the program and the rank, and exit code 1.
template <typename RunFn>
int RankedPeerMain(int argc, char** argv, const char* program, const char* usage_head, RunFn run) {
  Args a;
  bool help = false;
  const std::string err = ParseArgs(argc, argv, /*ranked=*/true, &a, &help);
  if (help) {
    std::printf("%s%s", usage_head, kCommonUsage);
    return 0;
  }
  if (!err.empty()) {
    std::fprintf(stderr, "%s: %s\n%s%s", program, err.c_str(), usage_head, kCommonUsage);
    return 2;
  }
  try {
    return run(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %llu: %s\n", program, static_cast<unsigned long long>(a.rank), e.what());
    return 1;
  }
}

}  // namespace allreduce_peer

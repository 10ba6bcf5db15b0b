// MPI peer of tenax's allreduce benchmark: in-place float32 sum allreduce,
// the way an MPI user would write it (MPI_IN_PLACE, MPI_FLOAT, MPI_SUM), so
// Open MPI picks its own tuned algorithm and transport (shared memory on one
// host). Each call is timed on its own; a rank's median rejects scheduler
// hiccups, and the max over ranks is the collective's time because an
// allreduce is only done when its slowest participant is.
//
// mpirun -np P --bind-to none tenax_bench_mpi_allreduce --sizes 4096,1048576 ...
// Rank 0 prints one JSON line per size.
#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Args {
  std::vector<uint64_t> sizes{4096, 1048576, 16777216, 67108864};
  uint64_t budget_bytes = 268435456;
  uint64_t min_iters = 10;
  uint64_t warmup = 3;
};

constexpr const char* kUsage =
    "usage: tenax_bench_mpi_allreduce [--sizes B1,B2,...] [--budget-bytes N]\n"
    "                                 [--min-iters N] [--warmup N] [--help]\n"
    "  --sizes         message sizes in bytes, multiples of 4 (float32)\n"
    "                  default 4096,1048576,16777216,67108864\n"
    "  --budget-bytes  timed iterations per size = max(min-iters, min(2000, budget/size))\n"
    "                  default 268435456\n"
    "  --min-iters     default 10\n"
    "  --warmup        untimed calls before timing, default 3\n";

bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;  // strtoull accepts "-1" and " 1"
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

// Returns "" on success, else an error message; *help set for --help.
std::string ParseArgs(int argc, char** argv, Args* a, bool* help) {
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
    uint64_t* scalar = flag == "--budget-bytes" ? &a->budget_bytes
                       : flag == "--min-iters"  ? &a->min_iters
                       : flag == "--warmup"     ? &a->warmup
                                                : nullptr;
    if (scalar) {
      if (!ParseU64(value, scalar)) return "bad value for " + flag + ": '" + value + "'";
    } else if (flag == "--sizes") {
      a->sizes.clear();
      size_t pos = 0;
      while (pos <= value.size()) {
        size_t comma = std::min(value.find(',', pos), value.size());
        uint64_t b = 0;
        std::string item = value.substr(pos, comma - pos);
        if (!ParseU64(item, &b) || b == 0 || b % 4 != 0)
          return "bad size '" + item + "' in --sizes (positive multiple of 4 bytes)";
        // MPI counts are int.
        if (b / 4 > static_cast<uint64_t>(INT32_MAX)) return "size too large: " + item;
        a->sizes.push_back(b);
        pos = comma + 1;
      }
    } else {
      return "unknown flag " + flag;
    }
  }
  if (a->min_iters == 0) return "--min-iters must be >= 1";
  return "";
}

void Fill(std::vector<float>& buf, int rank) {
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
}

// Counts elements that differ from sum_r (r + 1 + i%7); the values are small
// integers, so the float sum is exact whatever order MPI reduces in.
size_t CountWrong(const std::vector<float>& buf, int procs, size_t* first_bad) {
  size_t wrong = 0;
  for (size_t i = 0; i < buf.size(); ++i) {
    const float expect = static_cast<float>(procs * (procs + 1) / 2 + procs * static_cast<int>(i % 7));
    if (buf[i] != expect && wrong++ == 0) *first_bad = i;
  }
  return wrong;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, procs = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &procs);

  // Every rank parses the same argv, so all take the same exit path; only
  // rank 0 talks to avoid P copies of the message.
  Args a;
  bool help = false;
  const std::string err = ParseArgs(argc, argv, &a, &help);
  if (help || !err.empty()) {
    if (rank == 0) {
      if (!err.empty()) std::fprintf(stderr, "tenax_bench_mpi_allreduce: %s\n", err.c_str());
      std::fputs(kUsage, help ? stdout : stderr);
    }
    MPI_Finalize();
    return help ? 0 : 2;
  }

  for (const uint64_t bytes : a.sizes) {
    const size_t count = bytes / 4;
    const uint64_t iters = std::max(a.min_iters, std::min<uint64_t>(2000, a.budget_bytes / bytes));
    std::vector<float> buf(count);
    std::vector<double> seconds(iters);
    Fill(buf, rank);

    for (uint64_t w = 0; w < a.warmup; ++w)
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    // One barrier so all ranks start together; none between iterations, as in
    // a real training loop where back-to-back allreduces pipeline freely.
    MPI_Barrier(MPI_COMM_WORLD);
    for (uint64_t it = 0; it < iters; ++it) {
      const double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      seconds[it] = MPI_Wtime() - t0;
    }
    // The timed loop multiplies the data by P per call, so it saturates at
    // +inf (full-speed on x86 SSE/AVX; it never passes through the slow
    // subnormals). Check correctness on one fresh call instead.
    Fill(buf, rank);
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    size_t first_bad = 0;
    const size_t wrong = CountWrong(buf, procs, &first_bad);
    if (wrong)
      std::fprintf(stderr, "tenax_bench_mpi_allreduce: rank %d: %zu of %zu floats wrong at %llu bytes (first at %zu: %g)\n",
                   rank, wrong, count, static_cast<unsigned long long>(bytes), first_bad, buf[first_bad]);
    // Agree on failure so no rank is left waiting in the next size's collective.
    int bad = wrong ? 1 : 0, any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
      MPI_Finalize();
      return 1;
    }

    const double mine = Median(seconds);
    double slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf("{\"impl\":\"mpi\",\"procs\":%d,\"bytes\":%llu,\"seconds\":%.9g,\"iterations\":%llu}\n", procs,
                  static_cast<unsigned long long>(bytes), slowest, static_cast<unsigned long long>(iters));
      std::fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}

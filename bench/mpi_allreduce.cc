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

#include "allreduce_peer_common.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr const char* kUsageHead =
    "usage: tenax_bench_mpi_allreduce [--sizes B1,B2,...] [--budget-bytes N]\n"
    "                                 [--min-iters N] [--warmup N] [--help]\n";

using allreduce_peer::Args;
using allreduce_peer::CountWrong;
using allreduce_peer::Fill;
using allreduce_peer::Median;

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
  const std::string err = allreduce_peer::ParseArgs(argc, argv, /*ranked=*/false, &a, &help);
  if (help || !err.empty()) {
    if (rank == 0) {
      if (!err.empty()) std::fprintf(stderr, "tenax_bench_mpi_allreduce: %s\n", err.c_str());
      std::fputs(kUsageHead, help ? stdout : stderr);
      std::fputs(allreduce_peer::kCommonUsage, help ? stdout : stderr);
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

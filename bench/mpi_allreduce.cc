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

#include "allreduce_peer_common.h"

namespace {

constexpr const char* kUsageHead =
    "usage: tenax_bench_mpi_allreduce [--sizes B1,B2,...] [--budget-bytes N]\n"
    "                                 [--min-iters N] [--warmup N] [--help]\n";

using allreduce_peer::Args;

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

  const int rc = allreduce_peer::MeasureSizes(
      a, rank, procs, "mpi", "tenax_bench_mpi_allreduce",
      [](float* data, size_t count) {
        MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      },
      [] { MPI_Barrier(MPI_COMM_WORLD); },
      [](double mine, bool wrong, double* slowest) {
        // Agree on failure so no rank is left waiting in the next size's collective.
        int bad = wrong ? 1 : 0, any_bad = 0;
        MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any_bad) return false;
        MPI_Reduce(&mine, slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        return true;
      });
  MPI_Finalize();
  return rc;
}

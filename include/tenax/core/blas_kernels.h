// Which OpenBLAS kernels this process runs, and whether the CPU could run
// faster ones. OpenBLAS picks its kernels from the CPU's family and model
// when it loads; on a CPU model it does not know (cloud VMs that report a
// generic "Intel(R) Xeon(R) Processor"), OpenBLAS 0.3.21 falls back to its
// SSE3 kernels ("Prescott"), which run a matmul about 3.7x slower than the
// AVX-512 ones on the same machine. It reads OPENBLAS_CORETYPE only when it
// loads, so the fix is an environment variable set before the process
// starts. This only tells: nothing here changes a running process.
//
// Threading: every function is safe from any thread. Failure: none; what
// cannot be known (no OpenBLAS loaded) is reported as empty.
#pragma once

#include <string>

namespace tenax {

// The kernels a loaded OpenBLAS uses ("Prescott", "SkylakeX", ...), or ""
// when this process has no OpenBLAS loaded.
std::string LoadedOpenBlasCore();

// The best OPENBLAS_CORETYPE this CPU's flags support: "SkylakeX" (AVX-512
// F, BW, VL and DQ), "Haswell" (AVX2 and FMA), or "" for neither.
std::string BestOpenBlasCoreForCpu();

// One line of advice when `loaded` is one of OpenBLAS's pre-AVX2 fallbacks
// and `best` is not empty, else "". Pure: the tests feed it both.
std::string OpenBlasAdvice(const std::string& loaded, const std::string& best);

// OpenBlasAdvice(LoadedOpenBlasCore(), BestOpenBlasCoreForCpu()), or "" when
// OPENBLAS_CORETYPE is already set in this process's environment.
std::string OpenBlasAdviceForThisProcess();

}  // namespace tenax

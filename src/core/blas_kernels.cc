#include "tenax/core/blas_kernels.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace tenax {

std::string LoadedOpenBlasCore() {
  // RTLD_NOLOAD: only a library already in this process (libtorch loads
  // OpenBLAS as libblas.so.3 through Debian's alternatives, or directly).
  for (const char* name : {"libopenblas.so.0", "libblas.so.3", "libopenblasp-r0.3.21.so"}) {
    void* lib = ::dlopen(name, RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) continue;
    using CoreName = char* (*)();
    auto fn = reinterpret_cast<CoreName>(::dlsym(lib, "openblas_get_corename"));
    const char* name_of_core = fn != nullptr ? fn() : nullptr;
    std::string core = name_of_core != nullptr ? name_of_core : "";
    ::dlclose(lib);  // drops the reference NOLOAD took; the library stays
    if (!core.empty()) return core;
  }
  return "";
}

std::string BestOpenBlasCoreForCpu() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return "";
}

std::string OpenBlasAdvice(const std::string& loaded, const std::string& best) {
  std::string lower = loaded;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool fallback = lower == "prescott" || lower == "core2" || lower == "penryn" || lower == "dunnington" ||
                        lower == "nehalem" || lower == "sandybridge";
  if (!fallback || best.empty()) return "";
  return "OpenBLAS runs its " + loaded + " kernels on this CPU (it does not know the CPU's model), but the CPU "
         "supports " + best + "'s: matmuls can run several times faster with OPENBLAS_CORETYPE=" + best +
         " set in the environment before the program starts";
}

std::string OpenBlasAdviceForThisProcess() {
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  if (set != nullptr && *set != '\0') return "";
  return OpenBlasAdvice(LoadedOpenBlasCore(), BestOpenBlasCoreForCpu());
}

}  // namespace tenax

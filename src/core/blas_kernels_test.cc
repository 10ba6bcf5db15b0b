#include "tenax/core/blas_kernels.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace tenax {
namespace {

TEST(OpenBlasAdvice, NamesTheFallbackAndTheVariableThatFixesIt) {
  const std::string advice = OpenBlasAdvice("Prescott", "SkylakeX");
  EXPECT_NE(advice.find("Prescott kernels"), std::string::npos) << advice;
  EXPECT_NE(advice.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << advice;
  EXPECT_NE(OpenBlasAdvice("Sandybridge", "Haswell").find("OPENBLAS_CORETYPE=Haswell"), std::string::npos);
}

TEST(OpenBlasAdvice, SaysNothingWhenTheKernelsAlreadyFitOrNothingBetterExists) {
  EXPECT_EQ(OpenBlasAdvice("SkylakeX", "SkylakeX"), "");
  EXPECT_EQ(OpenBlasAdvice("Haswell", "SkylakeX"), "");  // AVX2 kernels: close enough
  EXPECT_EQ(OpenBlasAdvice("Prescott", ""), "");         // an old CPU: Prescott is right
  EXPECT_EQ(OpenBlasAdvice("", "SkylakeX"), "");         // no OpenBLAS loaded
}

// Each TEST runs in its own process (gtest_discover_tests), so what one
// loads the next does not see.
TEST(LoadedOpenBlasCore, IsEmptyWithoutOpenBlasAndReportsTheLoadedLibrarysPick) {
  ASSERT_EQ(::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD), nullptr)
      << "core_tests must not link OpenBLAS for this test to mean anything";
  EXPECT_EQ(LoadedOpenBlasCore(), "");
  // OpenBLAS reads OPENBLAS_CORETYPE when it loads: load it with a pick
  // that differs from anything it would choose on its own here.
  ASSERT_EQ(::setenv("OPENBLAS_CORETYPE", "Nehalem", 1), 0);
  void* lib = ::dlopen("libopenblas.so.0", RTLD_NOW);
  ASSERT_NE(lib, nullptr) << "libopenblas.so.0 (scripts/install-deps.sh installs it): " << ::dlerror();
  EXPECT_EQ(LoadedOpenBlasCore(), "Nehalem");
  // The caller already chose: no advice, even for a fallback pick.
  EXPECT_EQ(OpenBlasAdviceForThisProcess(), "");
  ASSERT_EQ(::unsetenv("OPENBLAS_CORETYPE"), 0);
  EXPECT_EQ(OpenBlasAdviceForThisProcess(), OpenBlasAdvice("Nehalem", BestOpenBlasCoreForCpu()));
}

}  // namespace
}  // namespace tenax

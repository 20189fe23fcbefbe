// kiln opens CUDA's libraries at run time and looks up every function it
// calls by its versioned symbol: a wrong name would only fail on a GPU
// machine, at the first cuda run. The toolkit holds a stub of the driver
// (for linking) and the real cuBLAS, cuBLASLt and NVRTC, so the names are
// checked here, on a machine without a GPU.
#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/Nvrtc.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

namespace kiln {
namespace {

TEST(CudaApi, EveryDriverSymbolIsInTheToolkitsDriverStub) {
  const std::string stub = KILN_CUDA_LIBRARY_DIR "/stubs/libcuda.so";
  void *lib = dlopen(stub.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << stub << ": " << dlerror();
  int found = 0;
#define KILN_CHECK(member, function, symbol)                                   \
  EXPECT_NE(dlsym(lib, symbol), nullptr) << symbol;                            \
  ++found;
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CHECK)
#undef KILN_CHECK
  EXPECT_GT(found, 30);
  dlclose(lib);
}

TEST(CudaApi, CublasAndCublasLtHaveEveryFunctionKilnCalls) {
  auto blas = Cublas::get();
  EXPECT_TRUE(blas.ok()) << blas.status();
  auto lt = CublasLt::get();
  EXPECT_TRUE(lt.ok()) << lt.status();
}

TEST(CudaApi, NvrtcOpensAndSaysItsVersion) {
  auto version = nvrtcVersion();
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_NE(version->find('.'), std::string::npos) << *version;
}

} // namespace
} // namespace kiln

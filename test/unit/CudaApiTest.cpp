// kiln opens CUDA's libraries at run time and looks up every function it
// calls by its versioned symbol: a wrong name would only fail on a GPU
// machine, at the first cuda run. The toolkit holds a stub of the driver
// (for linking) and the real cuBLAS, cuBLASLt and NVRTC, so the names are
// checked here, on a machine without a GPU.
#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/Nvrtc.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <dlfcn.h>
#include <type_traits>

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
  // Those kiln calls when a driver has them: today's has them all.
#define KILN_CHECK(member, type, symbol)                                       \
  EXPECT_NE(dlsym(lib, symbol), nullptr) << symbol;
  KILN_CUDA_DRIVER_OPTIONAL_FUNCTIONS(KILN_CHECK)
#undef KILN_CHECK
  dlclose(lib);
}

// kiln restates cuLaunchKernelEx's configuration (CudaApi.h) so that the
// runtime needs no cuda.h of CUDA 12 to build: every byte of it must be
// where the toolkit's cuda.h puts it, or the driver reads another launch.
TEST(CudaApi, KilnsLaunchConfigurationIsCudaHs) {
  static_assert(CUDA_VERSION >= 12000, "this test reads CUDA 12's cuda.h");
  EXPECT_EQ(kLaunchAttributeProgrammaticStreamSerialization,
            int(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION));
  EXPECT_EQ(sizeof(CUlaunchAttributeID), sizeof(int));
  EXPECT_EQ(sizeof(KilnLaunchAttribute), sizeof(CUlaunchAttribute));
  EXPECT_EQ(alignof(KilnLaunchAttribute), alignof(CUlaunchAttribute));
  EXPECT_EQ(offsetof(KilnLaunchAttribute, id), offsetof(CUlaunchAttribute, id));
  EXPECT_EQ(offsetof(KilnLaunchAttribute, value),
            offsetof(CUlaunchAttribute, value));
  EXPECT_EQ(sizeof(KilnLaunchAttribute::Value), sizeof(CUlaunchAttributeValue));
  EXPECT_EQ(alignof(KilnLaunchAttribute::Value),
            alignof(CUlaunchAttributeValue));
  EXPECT_EQ(offsetof(KilnLaunchAttribute,
                     value.programmaticStreamSerializationAllowed),
            offsetof(CUlaunchAttribute,
                     value.programmaticStreamSerializationAllowed));
  EXPECT_TRUE(
      (std::is_same_v<decltype(CUlaunchAttributeValue{}
                                   .programmaticStreamSerializationAllowed),
                      decltype(KilnLaunchAttribute::Value{}
                                   .programmaticStreamSerializationAllowed)>));

  EXPECT_EQ(sizeof(KilnLaunchConfig), sizeof(CUlaunchConfig));
  EXPECT_EQ(alignof(KilnLaunchConfig), alignof(CUlaunchConfig));
#define KILN_FIELD(f)                                                          \
  EXPECT_EQ(offsetof(KilnLaunchConfig, f), offsetof(CUlaunchConfig, f)) << #f;
  KILN_FIELD(gridDimX)
  KILN_FIELD(gridDimY)
  KILN_FIELD(gridDimZ)
  KILN_FIELD(blockDimX)
  KILN_FIELD(blockDimY)
  KILN_FIELD(blockDimZ)
  KILN_FIELD(sharedMemBytes)
  KILN_FIELD(hStream)
  KILN_FIELD(attrs)
  KILN_FIELD(numAttrs)
#undef KILN_FIELD
  // The function: cuda.h's declaration with kiln's structure in its place.
  EXPECT_TRUE((std::is_same_v<decltype(&::cuLaunchKernelEx),
                              CUresult (*)(const CUlaunchConfig *, CUfunction,
                                           void **, void **)>));
}

TEST(CudaApi, CublasAndCublasLtHaveEveryFunctionKilnCalls) {
  auto blas = Cublas::get();
  EXPECT_TRUE(blas.ok()) << blas.status();
  auto lt = CublasLt::get();
  EXPECT_TRUE(lt.ok()) << lt.status();
}

// Every descriptor attribute kiln sets, set on the real cuBLASLt (no GPU
// is needed to describe a call) and read back: a value the library refuses
// or takes otherwise fails here, not at the first cuda run.
TEST(CudaApi, CublasLtTakesEveryAttributeOfKilnsCalls) {
  auto lt = CublasLt::get();
  ASSERT_TRUE(lt.ok()) << lt.status();
  // The library CublasLt::get() opened (by its soname).
  void *lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto getDesc = reinterpret_cast<decltype(&cublasLtMatmulDescGetAttribute)>(
      dlsym(lib, "cublasLtMatmulDescGetAttribute"));
  auto getLayout =
      reinterpret_cast<decltype(&cublasLtMatrixLayoutGetAttribute)>(
          dlsym(lib, "cublasLtMatrixLayoutGetAttribute"));
  auto getPref =
      reinterpret_cast<decltype(&cublasLtMatmulPreferenceGetAttribute)>(
          dlsym(lib, "cublasLtMatmulPreferenceGetAttribute"));
  ASSERT_TRUE(getDesc && getLayout && getPref);
  // Each read with the attribute's own type, as cuBLASLt requires.
  auto descAttr = [&]<class T>(cublasLtMatmulDesc_t d,
                               cublasLtMatmulDescAttributes_t a, T) {
    T v = 0;
    size_t written = 0;
    EXPECT_EQ(getDesc(d, a, &v, sizeof v, &written), CUBLAS_STATUS_SUCCESS);
    return int64_t(v);
  };
  auto layoutAttr = [&]<class T>(cublasLtMatrixLayout_t l,
                                 cublasLtMatrixLayoutAttribute_t a, T) {
    T v = 0;
    size_t written = 0;
    EXPECT_EQ(getLayout(l, a, &v, sizeof v, &written), CUBLAS_STATUS_SUCCESS);
    return int64_t(v);
  };
  // Pointers of several alignments: 256 bytes, and a row of 24 halves down.
  alignas(256) static char buffer[4][512];
  char *a = buffer[0], *w = buffer[1], *d = buffer[2] + 48, *c = buffer[3] + 8;
  EXPECT_EQ(blasAlignment(a), 256u);
  EXPECT_EQ(blasAlignment(d), 16u);
  EXPECT_EQ(blasAlignment(c), 8u);
  GemmShape epilogueGemm{64, 4096, 4096, 2};   // f32 for an epilogue
  GemmShape residualGemm{64, 4096, 11008, -1}; // f16 D = A . W^T + C
  residualGemm.rows = GemmRows::Count;
  residualGemm.beta = 1;
  residualGemm.f16Out = true;
  BlasMatmul batched = blasMatmulOf(epilogueGemm, 64, a, w, d, nullptr);
  batched.batchCount = 3; // the layouts' batch attributes, exercised
  batched.a.batchStride = 4096 * 4096;
  for (const BlasMatmul &mm :
       {blasMatmulOf(epilogueGemm, 64, a, w, d, nullptr),
        blasMatmulOf(residualGemm, 17, a, w, d, c), batched}) {
    SCOPED_TRACE(describeBlasMatmul(mm));
    auto descs = makeLtMatmulDescs(**lt, mm);
    ASSERT_TRUE(descs.ok()) << descs.status();
    EXPECT_EQ(
        descAttr(descs->desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, int32_t()),
        int64_t(mm.compute));
    EXPECT_EQ(descAttr(descs->desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, int32_t()),
              int64_t(mm.scale));
    EXPECT_EQ(descAttr(descs->desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t()),
              int64_t(mm.transA));
    EXPECT_EQ(descAttr(descs->desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t()),
              int64_t(mm.transB));
    EXPECT_EQ(descAttr(descs->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t()),
              int64_t(mm.epilogue));
    const std::pair<cublasLtMatrixLayout_t, const BlasMatrix *> layouts[] = {
        {descs->a, &mm.a},
        {descs->b, &mm.b},
        {descs->c, &mm.c},
        {descs->d, &mm.d}};
    for (auto [layout, x] : layouts) {
      EXPECT_EQ(layoutAttr(layout, CUBLASLT_MATRIX_LAYOUT_TYPE, uint32_t()),
                int64_t(x->type));
      EXPECT_EQ(layoutAttr(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, uint64_t()),
                x->rows);
      EXPECT_EQ(layoutAttr(layout, CUBLASLT_MATRIX_LAYOUT_COLS, uint64_t()),
                x->cols);
      EXPECT_EQ(layoutAttr(layout, CUBLASLT_MATRIX_LAYOUT_LD, int64_t()),
                x->ld);
      EXPECT_EQ(
          layoutAttr(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, int32_t()),
          mm.batchCount);
      EXPECT_EQ(layoutAttr(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                           int64_t()),
                x->batchStride);
    }
    descs->destroy(**lt);
    // The search's preference: the workspace, and each matrix's alignment.
    auto pref = makeLtPreference(**lt, mm, 32 << 20);
    ASSERT_TRUE(pref.ok()) << pref.status();
    auto prefAttr = [&]<class T>(cublasLtMatmulPreferenceAttributes_t a, T) {
      T v = 0;
      size_t written = 0;
      EXPECT_EQ(getPref(*pref, a, &v, sizeof v, &written),
                CUBLAS_STATUS_SUCCESS);
      return int64_t(v);
    };
    EXPECT_EQ(prefAttr(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t()),
              32 << 20);
    EXPECT_EQ(prefAttr(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t()),
              blasAlignment(mm.a.data));
    EXPECT_EQ(prefAttr(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t()),
              blasAlignment(mm.b.data));
    EXPECT_EQ(prefAttr(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t()),
              blasAlignment(mm.c.data));
    EXPECT_EQ(prefAttr(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t()),
              blasAlignment(mm.d.data));
    (*lt)->preferenceDestroy(*pref);
  }
  dlclose(lib);
}

TEST(CudaApi, NvrtcOpensAndSaysItsVersion) {
  auto version = nvrtcVersion();
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_NE(version->find('.'), std::string::npos) << *version;
}

} // namespace
} // namespace kiln

//===- CudaApi.cpp --------------------------------------------------------===//
#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/OpenLibrary.h"

#include "absl/strings/str_cat.h"

#include <dlfcn.h>

namespace kiln {
// BlasMatmul.h carries cuBLAS's values without its headers.
static_assert(int(BlasOp::N) == CUBLAS_OP_N && int(BlasOp::T) == CUBLAS_OP_T);
static_assert(int(BlasType::F32) == CUDA_R_32F &&
              int(BlasType::F16) == CUDA_R_16F);
static_assert(int(BlasCompute::F16) == CUBLAS_COMPUTE_16F &&
              int(BlasCompute::F32) == CUBLAS_COMPUTE_32F);
static_assert(int(BlasEpilogue::Default) == CUBLASLT_EPILOGUE_DEFAULT &&
              int(BlasEpilogue::Relu) == CUBLASLT_EPILOGUE_RELU &&
              int(BlasEpilogue::Bias) == CUBLASLT_EPILOGUE_BIAS);

namespace {
/// `member` = the function `symbol` of `lib`; false when it has none.
template <class Function>
bool lookUp(void *lib, Function &member, const char *symbol) {
  member = reinterpret_cast<Function>(dlsym(lib, symbol));
  return member != nullptr;
}
} // namespace

absl::StatusOr<const CudaDriver *> CudaDriver::get() {
  static absl::StatusOr<const CudaDriver *> driver =
      []() -> absl::StatusOr<const CudaDriver *> {
    auto lib = openCudaLibrary("cuda device", "the CUDA driver",
                               {"libcuda.so.1", "libcuda.so"},
                               /*inToolkit=*/false);
    if (!lib.ok())
      return lib.status();
    static CudaDriver d;
#define KILN_LOOKUP(member, function, symbol)                                  \
  if (!lookUp(*lib, d.member, symbol))                                         \
    return absl::FailedPreconditionError(                                      \
        "cuda device: the CUDA driver has no " symbol);
    KILN_CUDA_DRIVER_FUNCTIONS(KILN_LOOKUP)
#undef KILN_LOOKUP
#define KILN_LOOKUP(member, type, symbol) lookUp(*lib, d.member, symbol);
    KILN_CUDA_DRIVER_OPTIONAL_FUNCTIONS(KILN_LOOKUP)
#undef KILN_LOOKUP
    return &d;
  }();
  return driver;
}

absl::Status CudaDriver::check(CUresult r, const char *call) const {
  if (r == CUDA_SUCCESS)
    return absl::OkStatus();
  const char *message = nullptr, *name = nullptr;
  getErrorString(r, &message);
  getErrorName(r, &name);
  return absl::InternalError(
      absl::StrCat("cuda device: ", call, ": ", message ? message : "error",
                   " (", name ? name : std::to_string(r), ")"));
}

absl::StatusOr<const Cublas *> Cublas::get() {
  static absl::StatusOr<const Cublas *> cublas =
      []() -> absl::StatusOr<const Cublas *> {
    auto lib =
        openCudaLibrary("cuda device", "cuBLAS",
                        {"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
                        /*inToolkit=*/true);
    if (!lib.ok())
      return lib.status();
    static Cublas c;
    auto look = [&](auto &member, const char *symbol) {
      return lookUp(*lib, member, symbol);
    };
    if (!look(c.create, "cublasCreate_v2") ||
        !look(c.destroy, "cublasDestroy_v2") ||
        !look(c.setStream, "cublasSetStream_v2") ||
        !look(c.setWorkspace, "cublasSetWorkspace_v2") ||
        !look(c.gemmEx, "cublasGemmEx") || !look(c.axpyEx, "cublasAxpyEx"))
      return absl::FailedPreconditionError(
          "cuda device: cuBLAS lacks cublasCreate_v2, cublasDestroy_v2, "
          "cublasSetStream_v2, cublasSetWorkspace_v2, cublasGemmEx or "
          "cublasAxpyEx");
    return &c;
  }();
  return cublas;
}

absl::StatusOr<const CublasLt *> CublasLt::get() {
  static absl::StatusOr<const CublasLt *> lt =
      []() -> absl::StatusOr<const CublasLt *> {
    auto lib = openCudaLibrary(
        "cuda device", "cuBLASLt",
        {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
        /*inToolkit=*/true);
    if (!lib.ok())
      return lib.status();
    static CublasLt c;
#define KILN_LOOKUP(member, function, symbol)                                  \
  if (!lookUp(*lib, c.member, symbol))                                         \
    return absl::FailedPreconditionError(                                      \
        "cuda device: cuBLASLt has no " symbol);
    KILN_CUBLASLT_FUNCTIONS(KILN_LOOKUP)
#undef KILN_LOOKUP
    return &c;
  }();
  return lt;
}

void LtMatmulDescs::destroy(const CublasLt &lt) {
  for (cublasLtMatrixLayout_t l : {a, b, c, d})
    if (l)
      lt.layoutDestroy(l);
  if (desc)
    lt.descDestroy(desc);
  *this = {};
}

absl::StatusOr<LtMatmulDescs> makeLtMatmulDescs(const CublasLt &lt,
                                                const BlasMatmul &mm) {
  LtMatmulDescs out;
  std::string failed; // the first call that failed, with its status
  auto check = [&](cublasStatus_t r, const char *call) {
    if (r != CUBLAS_STATUS_SUCCESS && failed.empty())
      failed = absl::StrCat(call, ": status ", int(r));
  };
  auto setDesc = [&](cublasLtMatmulDescAttributes_t attr, auto value) {
    if (out.desc)
      check(lt.descSetAttribute(out.desc, attr, &value, sizeof value),
            "cublasLtMatmulDescSetAttribute");
  };
  check(lt.descCreate(&out.desc, cublasComputeType_t(mm.compute),
                      cudaDataType_t(mm.scale)),
        "cublasLtMatmulDescCreate");
  setDesc(CUBLASLT_MATMUL_DESC_TRANSA, int32_t(mm.transA));
  setDesc(CUBLASLT_MATMUL_DESC_TRANSB, int32_t(mm.transB));
  setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(mm.epilogue));
  // FP8 inputs: an f32 scale a row of op(A) and a column of op(B), the
  // pointers set at each call.
  if (mm.scaleA || mm.scaleB) {
    setDesc(CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
            int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F));
    setDesc(CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
            int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F));
    setDesc(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, mm.scaleA);
    setDesc(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, mm.scaleB);
  }
  auto layout = [&](cublasLtMatrixLayout_t &l, const BlasMatrix &x) {
    check(lt.layoutCreate(&l, cudaDataType_t(x.type), uint64_t(x.rows),
                          uint64_t(x.cols), int64_t(x.ld)),
          "cublasLtMatrixLayoutCreate");
    if (!l)
      return;
    int32_t batches = int32_t(mm.batchCount);
    int64_t stride = x.batchStride;
    check(lt.layoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batches,
                                sizeof batches),
          "cublasLtMatrixLayoutSetAttribute");
    check(lt.layoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                &stride, sizeof stride),
          "cublasLtMatrixLayoutSetAttribute");
  };
  layout(out.a, mm.a);
  layout(out.b, mm.b);
  layout(out.c, mm.c);
  layout(out.d, mm.d);
  if (!failed.empty()) {
    out.destroy(lt);
    return absl::InternalError(absl::StrCat("cuda device: ", failed, ", for ",
                                            describeBlasMatmul(mm)));
  }
  return out;
}

uint32_t blasAlignment(const void *p) {
  uint32_t aligned = 256;
  while (aligned > 1 && reinterpret_cast<uintptr_t>(p) % aligned)
    aligned /= 2;
  return aligned;
}

absl::StatusOr<cublasLtMatmulPreference_t>
makeLtPreference(const CublasLt &lt, const BlasMatmul &mm,
                 uint64_t workspaceBytes) {
  cublasLtMatmulPreference_t pref = nullptr;
  if (cublasStatus_t r = lt.preferenceCreate(&pref))
    return absl::InternalError(absl::StrCat(
        "cuda device: cublasLtMatmulPreferenceCreate: status ", int(r)));
  cublasStatus_t r =
      lt.preferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                &workspaceBytes, sizeof workspaceBytes);
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void *>
      alignments[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, mm.a.data},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, mm.b.data},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, mm.c.data},
                      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, mm.d.data}};
  for (auto [attr, data] : alignments) {
    uint32_t aligned = blasAlignment(data);
    if (r == CUBLAS_STATUS_SUCCESS)
      r = lt.preferenceSetAttribute(pref, attr, &aligned, sizeof aligned);
  }
  if (r != CUBLAS_STATUS_SUCCESS) {
    lt.preferenceDestroy(pref);
    return absl::InternalError(absl::StrCat(
        "cuda device: cublasLtMatmulPreferenceSetAttribute: status ", int(r),
        ", for ", describeBlasMatmul(mm)));
  }
  return pref;
}

} // namespace kiln

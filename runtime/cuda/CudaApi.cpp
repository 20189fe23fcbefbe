//===- CudaApi.cpp --------------------------------------------------------===//
#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/OpenLibrary.h"

#include "absl/strings/str_cat.h"

#include <dlfcn.h>

namespace kiln {
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
        !look(c.gemmEx, "cublasGemmEx"))
      return absl::FailedPreconditionError(
          "cuda device: cuBLAS lacks cublasCreate_v2, cublasDestroy_v2, "
          "cublasSetStream_v2, cublasSetWorkspace_v2 or cublasGemmEx");
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

} // namespace kiln

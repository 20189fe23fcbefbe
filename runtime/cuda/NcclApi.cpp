//===- NcclApi.cpp --------------------------------------------------------===//
#include "runtime/cuda/NcclApi.h"

#include "runtime/cuda/OpenLibrary.h"

#include "absl/strings/str_cat.h"

#include <dlfcn.h>

namespace kiln {

absl::StatusOr<const Nccl *> Nccl::get() {
  static absl::StatusOr<const Nccl *> nccl =
      []() -> absl::StatusOr<const Nccl *> {
    auto lib = openCudaLibrary("tensor parallelism", "NCCL",
                               {"libnccl.so.2", "libnccl.so"},
                               /*inToolkit=*/true);
    if (!lib.ok())
      return lib.status();
    static Nccl n;
#define KILN_LOOKUP(member, function, symbol)                                  \
  n.member = reinterpret_cast<decltype(n.member)>(dlsym(*lib, symbol));        \
  if (!n.member)                                                               \
    return absl::FailedPreconditionError(                                      \
        "tensor parallelism: NCCL has no " symbol);
    KILN_NCCL_FUNCTIONS(KILN_LOOKUP)
#undef KILN_LOOKUP
    return &n;
  }();
  return nccl;
}

int Nccl::version() const {
  int v = 0;
  return getVersion(&v) == ncclSuccess ? v : 0;
}

absl::Status Nccl::check(ncclResult_t r, const char *call) const {
  if (r == ncclSuccess)
    return absl::OkStatus();
  const char *message = getErrorString(r);
  return absl::InternalError(absl::StrCat("tensor parallelism: ", call, ": ",
                                          message ? message : "error", " (",
                                          int(r), ")"));
}

} // namespace kiln

//===- NcclApi.h - NCCL, opened at run time ---------------------*- C++ -*-===//
//
// The cuda device's ranks of a split model (docs/tensor-parallel.md) will
// meet in NCCL's all-reduce and all-gather. Like the driver and cuBLAS
// (CudaApi.h), kiln does not link it: libnccl.so.2 (the CUDA toolkit's, or
// the nvidia-nccl wheel's) is opened with dlopen on first use, every
// function looked up once; nccl.h gives the types and signatures, so a
// function whose declaration changes stops the build rather than a run.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CUDA_NCCLAPI_H
#define KILN_RUNTIME_CUDA_NCCLAPI_H

#include "absl/status/statusor.h"

#include <nccl.h>

namespace kiln {

// Every NCCL function kiln calls: (member, declaration in nccl.h, symbol).
#define KILN_NCCL_FUNCTIONS(X)                                                 \
  X(getVersion, ncclGetVersion, "ncclGetVersion")                              \
  X(getUniqueId, ncclGetUniqueId, "ncclGetUniqueId")                           \
  X(commInitRank, ncclCommInitRank, "ncclCommInitRank")                        \
  X(commInitAll, ncclCommInitAll, "ncclCommInitAll")                           \
  X(commDestroy, ncclCommDestroy, "ncclCommDestroy")                           \
  X(commAbort, ncclCommAbort, "ncclCommAbort")                                 \
  X(commGetAsyncError, ncclCommGetAsyncError, "ncclCommGetAsyncError")         \
  X(allReduce, ncclAllReduce, "ncclAllReduce")                                 \
  X(allGather, ncclAllGather, "ncclAllGather")                                 \
  X(groupStart, ncclGroupStart, "ncclGroupStart")                              \
  X(groupEnd, ncclGroupEnd, "ncclGroupEnd")                                    \
  X(getErrorString, ncclGetErrorString, "ncclGetErrorString")

/// NCCL's functions, from libnccl.so.2.
struct Nccl {
#define KILN_MEMBER(member, function, symbol) decltype(&::function) member;
  KILN_NCCL_FUNCTIONS(KILN_MEMBER)
#undef KILN_MEMBER

  /// Opened once per process; fails naming the library or the symbol.
  static absl::StatusOr<const Nccl *> get();
  /// The library's version, as nccl.h's NCCL_VERSION_CODE counts it.
  int version() const;
  /// OK, or an error naming the call and NCCL's message.
  absl::Status check(ncclResult_t r, const char *call) const;
};

} // namespace kiln

#endif // KILN_RUNTIME_CUDA_NCCLAPI_H

//===- CudaApi.h - the CUDA driver and cuBLAS, opened at run time -*- C++
//-*-===//
//
// kiln links neither libcuda nor libcublas: a machine without a GPU must
// still run kiln (the emu device), and one GPU machine's libraries are not
// another's. Each library is opened with dlopen on first use and every
// function kiln calls is looked up once, through one table per library;
// cuda.h gives the driver's types and signatures.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CUDA_CUDAAPI_H
#define KILN_RUNTIME_CUDA_CUDAAPI_H

#include "runtime/BlasMatmul.h"

#include "absl/status/statusor.h"

#include <cublasLt.h>
#include <cuda.h>

#include <string>

namespace kiln {

// Every driver function kiln calls: (member, declaration in cuda.h, the
// versioned symbol libcuda exports).
#define KILN_CUDA_DRIVER_FUNCTIONS(X)                                          \
  X(init, cuInit, "cuInit")                                                    \
  X(driverGetVersion, cuDriverGetVersion, "cuDriverGetVersion")                \
  X(deviceGetCount, cuDeviceGetCount, "cuDeviceGetCount")                      \
  X(deviceGet, cuDeviceGet, "cuDeviceGet")                                     \
  X(deviceGetName, cuDeviceGetName, "cuDeviceGetName")                         \
  X(deviceGetAttribute, cuDeviceGetAttribute, "cuDeviceGetAttribute")          \
  X(primaryCtxRetain, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")    \
  X(primaryCtxRelease, cuDevicePrimaryCtxRelease_v2,                           \
    "cuDevicePrimaryCtxRelease_v2")                                            \
  X(ctxSetCurrent, cuCtxSetCurrent, "cuCtxSetCurrent")                         \
  X(ctxSynchronize, cuCtxSynchronize, "cuCtxSynchronize")                      \
  X(streamSynchronize, cuStreamSynchronize, "cuStreamSynchronize")             \
  X(streamQuery, cuStreamQuery, "cuStreamQuery")                               \
  X(memGetInfo, cuMemGetInfo_v2, "cuMemGetInfo_v2")                            \
  X(memAlloc, cuMemAlloc_v2, "cuMemAlloc_v2")                                  \
  X(memFree, cuMemFree_v2, "cuMemFree_v2")                                     \
  X(memcpyHtoD, cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2")                            \
  X(memcpyDtoH, cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2")                            \
  X(memcpyDtoD, cuMemcpyDtoD_v2, "cuMemcpyDtoD_v2")                            \
  X(memcpy2DAsync, cuMemcpy2DAsync_v2, "cuMemcpy2DAsync_v2")                   \
  X(memsetD8, cuMemsetD8_v2, "cuMemsetD8_v2")                                  \
  X(moduleLoadData, cuModuleLoadData, "cuModuleLoadData")                      \
  X(moduleUnload, cuModuleUnload, "cuModuleUnload")                            \
  X(moduleGetFunction, cuModuleGetFunction, "cuModuleGetFunction")             \
  X(funcGetAttribute, cuFuncGetAttribute, "cuFuncGetAttribute")                \
  X(funcSetAttribute, cuFuncSetAttribute, "cuFuncSetAttribute")                \
  X(launchKernel, cuLaunchKernel, "cuLaunchKernel")                            \
  X(streamCreate, cuStreamCreate, "cuStreamCreate")                            \
  X(streamDestroy, cuStreamDestroy_v2, "cuStreamDestroy_v2")                   \
  X(streamBeginCapture, cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2")    \
  X(streamEndCapture, cuStreamEndCapture, "cuStreamEndCapture")                \
  X(graphInstantiate, cuGraphInstantiateWithFlags,                             \
    "cuGraphInstantiateWithFlags")                                             \
  X(graphLaunch, cuGraphLaunch, "cuGraphLaunch")                               \
  X(graphExecDestroy, cuGraphExecDestroy, "cuGraphExecDestroy")                \
  X(graphDestroy, cuGraphDestroy, "cuGraphDestroy")                            \
  X(eventCreate, cuEventCreate, "cuEventCreate")                               \
  X(eventRecord, cuEventRecord, "cuEventRecord")                               \
  X(eventSynchronize, cuEventSynchronize, "cuEventSynchronize")                \
  /* the first version: every driver has it (_v2 came with 12.8) */            \
  X(eventElapsedTime, cuEventElapsedTime, "cuEventElapsedTime")                \
  X(eventDestroy, cuEventDestroy_v2, "cuEventDestroy_v2")                      \
  X(getErrorString, cuGetErrorString, "cuGetErrorString")                      \
  X(getErrorName, cuGetErrorName, "cuGetErrorName")

/// cuLaunchKernelEx's configuration as kiln passes it: cuda.h's
/// CUlaunchAttribute and CUlaunchConfig (CUDA 12.0 on), restated so that the
/// runtime builds against a cuda.h without them and runs on a driver
/// without the function. test/unit/CudaApiTest.cpp holds every size,
/// alignment, offset and the enum value to the toolkit's cuda.h.
struct KilnLaunchAttribute {
  int id; // CUlaunchAttributeID
  char pad[4];
  union alignas(8) Value { // CUlaunchAttributeValue: 64 bytes
    char bytes[64];
    int programmaticStreamSerializationAllowed;
  } value;
};
struct KilnLaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  KilnLaunchAttribute *attrs;
  unsigned numAttrs;
};
/// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: with the value 1,
/// the kernel may start before the previous kernel of the stream has
/// finished (programmatic dependent launch; it waits itself, with
/// griddepcontrol.wait).
constexpr int kLaunchAttributeProgrammaticStreamSerialization = 6;
/// cuLaunchKernelEx(config, f, kernelParams, extra).
using KilnLaunchKernelEx = CUresult (*)(const KilnLaunchConfig *, CUfunction,
                                        void **, void **);

// Driver functions kiln calls only when the driver has them (a bundle may
// run on an older driver): (member, kiln's type, symbol); null when
// missing, and what needs them is off.
#define KILN_CUDA_DRIVER_OPTIONAL_FUNCTIONS(X)                                 \
  X(launchKernelEx, KilnLaunchKernelEx, "cuLaunchKernelEx")

/// The driver's functions, from libcuda.so.1.
struct CudaDriver {
#define KILN_MEMBER(member, function, symbol) decltype(&::function) member;
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_MEMBER)
#undef KILN_MEMBER
#define KILN_MEMBER(member, type, symbol) type member = nullptr;
  KILN_CUDA_DRIVER_OPTIONAL_FUNCTIONS(KILN_MEMBER)
#undef KILN_MEMBER

  /// Opened once per process; fails naming the library or the symbol.
  static absl::StatusOr<const CudaDriver *> get();

  /// OK, or an error naming the call and the driver's message.
  absl::Status check(CUresult r, const char *call) const;
};

/// The cuBLAS functions kiln calls (declared here: cublas_api.h overloads
/// some of them), from libcublas.
struct Cublas {
  using Handle = void *;
  int (*create)(Handle *);
  int (*destroy)(Handle);
  int (*setStream)(Handle, CUstream);
  // Our own workspace: cuBLAS then allocates nothing while a graph is
  // captured (setStream resets it, so it is set after).
  int (*setWorkspace)(Handle, void *, size_t);
  // cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B,
  // Btype, ldb, beta, C, Ctype, ldc, computeType, algo)
  int (*gemmEx)(Handle, int, int, int, int, int, const void *, const void *,
                int, int, const void *, int, int, const void *, void *, int,
                int, int, int);
  // cublasAxpyEx(handle, n, alpha, alphaType, x, xType, incx, y, yType,
  // incy, executionType): a split model's residual, added by rank 0.
  int (*axpyEx)(Handle, int, const void *, int, const void *, int, int, void *,
                int, int, int);

  static absl::StatusOr<const Cublas *> get();
};

// The cuBLASLt functions kiln calls (prefill GEMMs with an algorithm of
// cuBLASLt's heuristic, GemmShape::algo): (member, declaration, symbol).
#define KILN_CUBLASLT_FUNCTIONS(X)                                             \
  X(create, cublasLtCreate, "cublasLtCreate")                                  \
  X(destroy, cublasLtDestroy, "cublasLtDestroy")                               \
  X(descCreate, cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate")          \
  X(descSetAttribute, cublasLtMatmulDescSetAttribute,                          \
    "cublasLtMatmulDescSetAttribute")                                          \
  X(descDestroy, cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy")       \
  X(layoutCreate, cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate")    \
  X(layoutSetAttribute, cublasLtMatrixLayoutSetAttribute,                      \
    "cublasLtMatrixLayoutSetAttribute")                                        \
  X(layoutDestroy, cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy") \
  X(preferenceCreate, cublasLtMatmulPreferenceCreate,                          \
    "cublasLtMatmulPreferenceCreate")                                          \
  X(preferenceSetAttribute, cublasLtMatmulPreferenceSetAttribute,              \
    "cublasLtMatmulPreferenceSetAttribute")                                    \
  X(preferenceDestroy, cublasLtMatmulPreferenceDestroy,                        \
    "cublasLtMatmulPreferenceDestroy")                                         \
  X(algoGetHeuristic, cublasLtMatmulAlgoGetHeuristic,                          \
    "cublasLtMatmulAlgoGetHeuristic")                                          \
  X(matmul, cublasLtMatmul, "cublasLtMatmul")

/// cuBLASLt's functions, from libcublasLt.
struct CublasLt {
#define KILN_MEMBER(member, function, symbol) decltype(&::function) member;
  KILN_CUBLASLT_FUNCTIONS(KILN_MEMBER)
#undef KILN_MEMBER

  static absl::StatusOr<const CublasLt *> get();
};

/// cuBLASLt's description of one call: the operation (compute and scale
/// types, transposes, epilogue) and the layouts of A, B, C and D (type,
/// rows, columns, leading dimension, batch count and stride), every field
/// of the BlasMatmul set explicitly. Made without a handle: no GPU needed.
struct LtMatmulDescs {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;

  void destroy(const CublasLt &lt);
};

/// The descriptors of `mm`; fails naming the call and cuBLASLt's status
/// (having destroyed what it made).
absl::StatusOr<LtMatmulDescs> makeLtMatmulDescs(const CublasLt &lt,
                                                const BlasMatmul &mm);

/// The largest power of two up to 256 that divides `p`'s address.
uint32_t blasAlignment(const void *p);

/// cuBLASLt's search preference for `mm` (to be destroyed by the caller):
/// at most `workspaceBytes` of workspace, and each matrix aligned as its
/// pointer is (the heuristic otherwise takes 256 bytes, and a row moved
/// down, GemmRows::Last, may be less: an algorithm that needs more would
/// fail at the call).
absl::StatusOr<cublasLtMatmulPreference_t>
makeLtPreference(const CublasLt &lt, const BlasMatmul &mm,
                 uint64_t workspaceBytes);

} // namespace kiln

#endif // KILN_RUNTIME_CUDA_CUDAAPI_H

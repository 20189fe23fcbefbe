//===- NcclCollectives.cpp ------------------------------------------------===//
#include "runtime/cuda/NcclCollectives.h"

#include "absl/strings/str_cat.h"

namespace kiln {

NcclGroup::~NcclGroup() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_)
    for (ncclComm_t c : comms_)
      nccl_->commDestroy(c);
}

void NcclGroup::abort(int, const absl::Status &) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_)
    return;
  aborted_.store(true);
  for (ncclComm_t c : comms_)
    nccl_->commAbort(c);
}

absl::Status ncclAllReduceF16(const NcclRank &r, CUdeviceptr input,
                              CUdeviceptr residual, CUdeviceptr out,
                              int64_t count) {
  auto *in = reinterpret_cast<void *>(input);
  if (residual && r.rank == 0) {
    // input += residual, in f32, rounded once: the residual counts once.
    const float one = 1.0f;
    constexpr int kF16 = 2, kF32 = 0; // cudaDataType
    if (int s = r.blas->axpyEx(r.blasHandle, int(count), &one, kF32,
                               reinterpret_cast<void *>(residual), kF16, 1, in,
                               kF16, 1, kF32);
        s != 0)
      return absl::InternalError(
          absl::StrCat("cuda device: cublasAxpyEx: status ", s,
                       ", the residual of an all-reduce of ", count));
  }
  return r.nccl->check(r.nccl->allReduce(in, reinterpret_cast<void *>(out),
                                         size_t(count), ncclHalf, ncclSum,
                                         r.comm, r.stream),
                       "ncclAllReduce");
}

absl::Status ncclAllGatherF32(const NcclRank &r, CUdeviceptr input,
                              CUdeviceptr out, int64_t rows, int64_t cols) {
  auto *in = reinterpret_cast<void *>(input);
  if (rows == 1) // [1, ranks * cols] is NCCL's own order
    return r.nccl->check(r.nccl->allGather(in, reinterpret_cast<void *>(out),
                                           size_t(cols), ncclFloat, r.comm,
                                           r.stream),
                         "ncclAllGather");
  // NCCL gathers [ranks, rows, cols]; the plan reads [rows, ranks * cols].
  if (absl::Status s = r.nccl->check(
          r.nccl->allGather(in, reinterpret_cast<void *>(r.gathered),
                            size_t(rows * cols), ncclFloat, r.comm, r.stream),
          "ncclAllGather");
      !s.ok())
    return s;
  for (int64_t k = 0; k < r.ranks; ++k) {
    CUDA_MEMCPY2D copy = {};
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = r.gathered + k * rows * cols * 4;
    copy.srcPitch = size_t(cols * 4);
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = out + k * cols * 4;
    copy.dstPitch = size_t(r.ranks * cols * 4);
    copy.WidthInBytes = size_t(cols * 4);
    copy.Height = size_t(rows);
    if (absl::Status s = r.cu->check(r.cu->memcpy2DAsync(&copy, r.stream),
                                     "cuMemcpy2DAsync");
        !s.ok())
      return s;
  }
  return absl::OkStatus();
}

} // namespace kiln

//===- NcclCollectives.h - a cuda rank's collectives ------------*- C++ -*-===//
//
// What a cuda rank of a split model enqueues for the plans' kAllReduce
// and kAllGather launches (docs/tensor-parallel.md), on its stream, so
// that a decode graph's capture holds them: NCCL's sum in place of the
// result, the residual added once (rank 0, cublasAxpyEx, before the sum);
// NCCL's gather and, for more than one row, cuMemcpy2DAsync putting each
// rank's columns in place. Through the three libraries' tables only, so a
// test drives it with tables of its own (test/unit/NcclCollectivesTest).
// NcclGroup owns a process's communicators: a failure anywhere aborts them
// all once, and an aborted one is never destroyed again.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CUDA_NCCLCOLLECTIVES_H
#define KILN_RUNTIME_CUDA_NCCLCOLLECTIVES_H

#include "runtime/HostCollective.h"
#include "runtime/cuda/CudaApi.h"
#include "runtime/cuda/NcclApi.h"

#include <atomic>
#include <mutex>
#include <vector>

namespace kiln {

/// This process's NCCL communicators: destroyed at the end, all aborted
/// at once when a rank fails (so that no other waits in a collective).
class NcclGroup : public RankAbort {
public:
  NcclGroup(const Nccl *nccl, std::vector<ncclComm_t> comms)
      : nccl_(nccl), comms_(std::move(comms)) {}
  ~NcclGroup() override;
  void abort(int rank, const absl::Status &why) override;
  const Nccl &nccl() const { return *nccl_; }
  ncclComm_t comm(int i) const { return comms_[i]; }
  /// Whether abort() ran: the communicators are gone.
  bool aborted() const { return aborted_.load(); }

private:
  const Nccl *nccl_;
  std::vector<ncclComm_t> comms_;
  std::mutex mutex_;
  std::atomic<bool> aborted_{false};
};

/// One rank's libraries, communicator and stream.
struct NcclRank {
  const Nccl *nccl = nullptr;
  const CudaDriver *cu = nullptr;
  const Cublas *blas = nullptr;
  Cublas::Handle blasHandle = nullptr; // on `stream`
  ncclComm_t comm = nullptr;
  int rank = 0, ranks = 1;
  CUstream stream = nullptr;
  CUdeviceptr gathered = 0; // [ranks, rows, cols] f32: a gather's landing
};

/// out[count] f16 = residual (rank 0's, when given) + Σ_ranks input.
absl::Status ncclAllReduceF16(const NcclRank &r, CUdeviceptr input,
                              CUdeviceptr residual, CUdeviceptr out,
                              int64_t count);

/// out [rows, ranks * cols] f32 from every rank's input [rows, cols].
absl::Status ncclAllGatherF32(const NcclRank &r, CUdeviceptr input,
                              CUdeviceptr out, int64_t rows, int64_t cols);

} // namespace kiln

#endif // KILN_RUNTIME_CUDA_NCCLCOLLECTIVES_H

//===- CudaRanks.h - a split model's ranks on GPUs --------------*- C++ -*-===//
//
// The cuda device's ranks (docs/tensor-parallel.md): a CudaDevice a rank,
// each on its own GPU, meeting in NCCL's collectives. In one process the
// ranks are threads (TensorParallelDevice) and ncclCommInitAll makes their
// communicators; ranks that are processes (kiln-run --rendezvous) each make
// theirs with ncclCommInitRank from the unique id rank 0 hands out.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CUDA_CUDARANKS_H
#define KILN_RUNTIME_CUDA_CUDARANKS_H

#include "runtime/Bundle.h"
#include "runtime/HostCollective.h"
#include "runtime/TensorParallelDevice.h"
#include "runtime/cuda/NcclCollectives.h"

namespace kiln {

/// `bundle`'s ranks as threads of this process, rank r on GPU r (`weights`
/// null: random). NCCL's by default; with KILN_TP_COLLECTIVE=host the
/// collectives go through host memory (InProcessCollective) and the ranks
/// may share GPUs (rank r on GPU r mod the GPUs): how the GPU check runs a
/// split model on a machine with one GPU.
absl::StatusOr<std::unique_ptr<TensorParallelDevice>>
openCudaRanks(const Bundle &bundle, const WeightSet *weights,
              std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// A new NCCL unique id (rank 0's, for the rendezvous), as bytes.
absl::StatusOr<std::string> newNcclUniqueId();

/// Rank `rank` of `ranks` as a process: its communicator, from rank 0's
/// unique id. The rank's GPU context must be current (its CudaDevice made
/// on this thread); returns when every rank has joined.
absl::StatusOr<std::unique_ptr<NcclGroup>>
joinNcclRanks(const std::string &uniqueId, int rank, int ranks);

} // namespace kiln

#endif // KILN_RUNTIME_CUDA_CUDARANKS_H

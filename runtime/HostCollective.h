//===- HostCollective.h - NCCL's collectives on host memory -----*- C++ -*-===//
//
// The collectives of a split model (docs/tensor-parallel.md) as the emu
// device calls them, on host arrays: InProcessCollective joins ranks that
// are threads of one process, SocketCollective ranks that are processes
// (kiln-run --rendezvous). Both compute with the two functions below, so a
// rank's result has the same bits whichever joins it. The cuda device's
// ranks meet in NCCL instead (runtime/cuda/NcclRanks.h).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_HOSTCOLLECTIVE_H
#define KILN_RUNTIME_HOSTCOLLECTIVE_H

#include "absl/status/status.h"

#include <cstdint>
#include <span>

namespace kiln {

/// What stops a split model's ranks at once when one of them fails.
class RankAbort {
public:
  virtual ~RankAbort() = default;
  /// Rank `rank` failed: every collective, waiting or to come, fails with
  /// `why` on the other ranks.
  virtual void abort(int rank, const absl::Status &why) = 0;
};

class HostCollective : public RankAbort {
public:
  virtual int ranks() const = 0;
  /// out[i] = residual[i] + Σ_ranks input_r[i] ([count] f16 each; the
  /// residual may be null, out may alias input or residual).
  virtual absl::Status allReduce(int rank, const uint16_t *input,
                                 const uint16_t *residual, uint16_t *out,
                                 int64_t count) = 0;
  /// out[s, r * cols + j] = input_r[s, j]: [rows, cols] f32 from each rank
  /// into [rows, ranks * cols].
  virtual absl::Status allGather(int rank, const float *input, float *out,
                                 int64_t rows, int64_t cols) = 0;
};

/// out[i] = f16(residual[i] + Σ inputs[r][i]), summed in f32 in rank order
/// and rounded once (out may alias residual but not an input).
void sumInRankOrder(std::span<const uint16_t *const> inputs,
                    const uint16_t *residual, uint16_t *out, int64_t count);

/// out [rows, ranks * cols] f32 from inputs[r] [rows, cols].
void gatherColumns(std::span<const float *const> inputs, float *out,
                   int64_t rows, int64_t cols);

} // namespace kiln

#endif // KILN_RUNTIME_HOSTCOLLECTIVE_H

//===- InProcessCollective.h - NCCL's collectives among threads -*- C++ -*-===//
//
// The emu device's stand-in for NCCL (docs/tensor-parallel.md): the ranks
// of a split model are threads of one process, each calling every
// collective in the same order. All-reduce sums the ranks' f16 inputs in
// f32 and rounds once, plus the residual (kiln.all_reduce); all-gather
// puts the ranks' f32 columns side by side (kiln.all_gather). No rank ever
// waits forever: a collective that some rank does not reach within the
// timeout fails on every rank that waits, naming the missing ones, and a
// rank that fails tells the others at once (abort).
// (Ranks that are processes: SocketCollective.)
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_INPROCESSCOLLECTIVE_H
#define KILN_RUNTIME_INPROCESSCOLLECTIVE_H

#include "runtime/HostCollective.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace kiln {

class InProcessCollective : public HostCollective {
public:
  InProcessCollective(int ranks, std::chrono::milliseconds timeout);
  int ranks() const override { return ranks_; }
  absl::Status allReduce(int rank, const uint16_t *input,
                         const uint16_t *residual, uint16_t *out,
                         int64_t count) override;
  absl::Status allGather(int rank, const float *input, float *out, int64_t rows,
                         int64_t cols) override;
  void abort(int rank, const absl::Status &why) override;

private:
  /// Waits until every rank has arrived at this point of the collective
  /// (each collective passes two: inputs published, outputs read).
  absl::Status barrier(int rank, const char *what);

  const int ranks_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  int64_t generation_ = 0;           // barriers passed
  std::vector<bool> here_;           // [ranks]: at the current barrier
  std::vector<const void *> inputs_; // [ranks]: the current collective's
  absl::Status failed_;     // set once a rank aborts or a wait times out
  int64_t collectives_ = 0; // for the messages
};

} // namespace kiln

#endif // KILN_RUNTIME_INPROCESSCOLLECTIVE_H

//===- TensorParallelDevice.h - a split model as one ------------*- C++ -*-===//
//
// A model split over N ranks (docs/tensor-parallel.md) runs as one
// PlanDevice to the Scheduler and to generate(): rank 0's staged inputs
// (tokens, positions, tables, sampling) go to every rank before each step,
// every rank runs the step's launches on a thread of its own, meeting the
// others in the plans' collectives, and rank 0's logits and draws are the
// step's (after the all-gather every rank has the same). A rank that fails
// aborts the collectives, so the others stop instead of waiting.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TENSORPARALLELDEVICE_H
#define KILN_RUNTIME_TENSORPARALLELDEVICE_H

#include "runtime/HostCollective.h"
#include "runtime/PlanDevice.h"
#include "runtime/RankLink.h"

#include <memory>
#include <vector>

namespace kiln {

class TensorParallelDevice : public PlanDevice {
public:
  /// `ranks` in rank order, each already joined to the collectives that
  /// `collective` aborts; `links`, when ranks are processes (RemoteRank),
  /// their connections.
  TensorParallelDevice(std::vector<std::unique_ptr<PlanDevice>> ranks,
                       std::unique_ptr<RankAbort> collective,
                       std::unique_ptr<RankLinks> links = nullptr);
  ~TensorParallelDevice() override;
  /// "emu x2": the ranks' device and how many.
  std::string name() const override;
  absl::StatusOr<Memory> probe() override { return ranks_[0]->probe(); }

private:
  /// Copies the step's staged inputs into every rank (the tables and the
  /// logit bias go when they are sent).
  void stage();
  /// `call` on every rank at once (rank 0 on this thread, each bound to
  /// its thread); the first error.
  absl::Status onRanks(const std::function<absl::Status(PlanDevice &)> &call);

  absl::Status sendInputs(int64_t rows) override;
  absl::Status sendTables() override;
  absl::Status sendLogitBias(int32_t seq) override;
  absl::Status run(const std::vector<Launch> &launches) override;
  absl::Status clearHistory(int32_t seq) override;
  absl::Status readLogits(int64_t offset, float *out, size_t floats) override;
  absl::Status readSampled(int64_t rows) override;

  // Destroyed in reverse: the ranks, then what joins them.
  std::unique_ptr<RankLinks> links_;
  std::unique_ptr<RankAbort> collective_;
  std::vector<std::unique_ptr<PlanDevice>> ranks_;
  absl::Status failure_; // the first failed call's, told to remote ranks
};

/// `program.ranks` emu devices, rank r with its slices of `checkpoint`
/// (null: seeded random weights, a seed a rank), joined in one
/// InProcessCollective whose waits end after `timeout`.
absl::StatusOr<std::unique_ptr<TensorParallelDevice>>
openEmuRanks(const Program &program, const WeightSet *checkpoint,
             std::chrono::milliseconds timeout = std::chrono::seconds(60));

} // namespace kiln

#endif // KILN_RUNTIME_TENSORPARALLELDEVICE_H

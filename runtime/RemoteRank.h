//===- RemoteRank.h - another process's rank, for rank 0 --------*- C++ -*-===//
//
// When a split model's ranks are processes (kiln-run --rendezvous;
// docs/tensor-parallel.md), rank 0 runs the scheduler, as TensorRT-LLM's
// and vLLM's rank 0 do: its TensorParallelDevice holds its own device and
// a RemoteRank for every other rank. A RemoteRank sends each call of the
// step (the staged inputs with it) over the rank's control connection and
// returns the rank's answer; the rank's process runs `followRankZero`,
// which makes the same call on its own device. Rank 0 reads the logits and
// the draws of its own device; the others' are the same after the
// all-gather.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_REMOTERANK_H
#define KILN_RUNTIME_REMOTERANK_H

#include "runtime/HostCollective.h"
#include "runtime/PlanDevice.h"
#include "runtime/RankLink.h"

#include <atomic>

namespace kiln {

class RemoteRank : public PlanDevice {
public:
  /// Rank `socket.peer()`, running `program` (rank 0's, which the
  /// rendezvous held its bundle to). Once `*failed` is set (a collective
  /// failed), an answer is waited for `grace` more at most.
  RemoteRank(Program program, RankSocket &socket,
             const std::atomic<bool> *failed,
             std::chrono::milliseconds grace = std::chrono::seconds(10));
  /// Tells the rank the run is over.
  ~RemoteRank() override;
  std::string name() const override;
  /// The run failed: the rank is told why when it ends.
  void setFailure(const absl::Status &why) { failure_ = why; }

  /// The loop of every rank but 0: each call rank 0 sends is made on
  /// `device` and answered, until rank 0 says stop. A call that fails
  /// aborts `collectives` first, so that rank 0 and the others stop
  /// waiting. OK when the run ended well; else the first failure, this
  /// rank's or rank 0's.
  static absl::Status followRankZero(PlanDevice &device, int rank,
                                     RankSocket &control,
                                     RankAbort &collectives);

private:
  absl::Status sendInputs(int64_t rows) override;
  absl::Status sendTables() override;
  absl::Status sendLogitBias(int32_t seq) override;
  absl::Status run(const std::vector<Launch> &launches) override;
  absl::Status clearHistory(int32_t seq) override;
  absl::Status readLogits(int64_t, float *, size_t) override;
  absl::Status readSampled(int64_t) override { return absl::OkStatus(); }
  /// Sends a command and waits for the rank's answer.
  absl::Status call(const std::string &command);

  RankSocket &socket_;
  const std::atomic<bool> *failed_;
  std::chrono::milliseconds grace_;
  absl::Status failure_;
};

} // namespace kiln

#endif // KILN_RUNTIME_REMOTERANK_H

//===- SocketCollective.h - collectives between processes -------*- C++ -*-===//
//
// The emu device's collectives when its ranks are processes (kiln-run
// --rendezvous; docs/tensor-parallel.md): over the data connections of
// RankLinks, through rank 0. Every other rank sends its input to rank 0,
// which sums (or gathers) them in rank order with HostCollective's
// functions, as InProcessCollective does, and sends the result back: the
// same bits as the ranks as threads. Like NCCL with a watchdog, nothing
// waits forever: a rank that does not answer within the timeout, one that
// closes its connection (it died) and one that fails (Abort) end the
// collective on every rank, with an error that names it.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_SOCKETCOLLECTIVE_H
#define KILN_RUNTIME_SOCKETCOLLECTIVE_H

#include "runtime/HostCollective.h"
#include "runtime/RankLink.h"

namespace kiln {

class SocketCollective : public HostCollective {
public:
  /// This process's rank of `links` (which outlive it).
  SocketCollective(RankLinks &links, std::chrono::milliseconds timeout);
  int ranks() const override { return links_.worldSize; }
  absl::Status allReduce(int rank, const uint16_t *input,
                         const uint16_t *residual, uint16_t *out,
                         int64_t count) override;
  absl::Status allGather(int rank, const float *input, float *out, int64_t rows,
                         int64_t cols) override;
  void abort(int rank, const absl::Status &why) override;
  /// Set once a collective failed here or on another rank.
  const std::atomic<bool> &failed() const { return failed_; }

private:
  /// Rank 0: every other rank's input of `bytes` ([ranks], [0] empty);
  /// the others: sends `mine`. Then `combine` on rank 0 makes the result
  /// ([resultBytes]), which every rank gets in `out`.
  absl::Status
  exchange(const char *what, std::string_view mine, size_t resultBytes,
           const std::function<void(const std::vector<std::string> &, char *)>
               &combine,
           char *out);
  /// Records `why` as the failure (the first one wins) and tells the other
  /// ranks; returns the recorded failure.
  absl::Status fail(absl::Status why);

  RankLinks &links_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  absl::Status failure_; // the first failure
  std::atomic<bool> failed_{false};
  int64_t collectives_ = 0; // for the messages
};

} // namespace kiln

#endif // KILN_RUNTIME_SOCKETCOLLECTIVE_H

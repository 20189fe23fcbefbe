//===- ProcessRanks.h - a split model's ranks as processes ------*- C++ -*-===//
//
// kiln-run --rendezvous HOST:PORT --rank R --world-size W: one process a
// rank, on one machine or several, as torchrun starts them
// (docs/tensor-parallel.md). Every process meets the others (RankLink.h),
// holding them to its bundle, and opens its own rank: its slices of the
// weights on its device. Rank 0 then runs the job (a generation, a server)
// on the whole split model, its scheduler deciding every step; the other
// ranks follow it until it ends the run.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_PROCESSRANKS_H
#define KILN_RUNTIME_PROCESSRANKS_H

#include "runtime/Bundle.h"
#include "runtime/PlanDevice.h"
#include "runtime/RankLink.h"

namespace kiln {

struct ProcessRankOptions {
  RendezvousOptions rendezvous; // digest: bundleDigest's
  std::string device = "emu";   // emu: SocketCollective; cuda: NCCL
  std::chrono::milliseconds collectiveTimeout{std::chrono::seconds(60)};
};

/// What every rank must agree on: a digest of the bundle file's bytes.
absl::StatusOr<std::string> bundleDigest(const std::string &path);

/// Rank 0: the whole split model, as one device (`weights` null: random).
absl::StatusOr<std::unique_ptr<PlanDevice>>
openRankZero(Bundle &bundle, const WeightSet *weights,
             const ProcessRankOptions &options);

/// Rank R > 0: opens its rank and follows rank 0 until the run ends. OK
/// when it ended well; an error begins "rank R: ".
absl::Status followAsRank(Bundle &bundle, const WeightSet *weights,
                          const ProcessRankOptions &options);

} // namespace kiln

#endif // KILN_RUNTIME_PROCESSRANKS_H

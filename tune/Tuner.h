//===- Tuner.h - kiln tune: the fastest knobs per sequence length -*- C++
//-*-===//
//
// For every kernel family with knobs, at every sequence length and batch
// asked for, every candidate (a setting of the family's knobs) is timed and
// the winners merged into buckets (tune/TuningDb.h). Without a GPU the
// times come from an analytic model of the GPU (tune/CostModel.h): bytes
// and FLOPs of each launch, occupancy from the registers and shared memory
// in ptxas' report, and the tail of the last wave.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TUNE_TUNER_H
#define KILN_TUNE_TUNER_H

#include "codegen/CudaKernel.h"
#include "codegen/KernelCache.h"
#include "tune/TuningDb.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln {

/// A family of kernels that share knobs, and what its sequence length is.
struct TuneFamily {
  std::string name;   // "decode.attention"
  std::string length; // "context" (keys attended) or "prompt" (rows)
  bool batched;       // tuned per batch size (else at batch 1 only)
  std::vector<std::string> candidates; // knob settings, in a fixed order
  int64_t minBatch = 1; // the smallest batch that runs its kernels

  /// The batches of `asked` (kiln tune --batch) it is tuned at: those from
  /// minBatch up when batched, else just 1.
  std::vector<int64_t> batchesOf(const std::vector<int64_t> &asked) const {
    if (!batched)
      return {1};
    std::vector<int64_t> out;
    for (int64_t b : asked)
      if (b >= minBatch)
        out.push_back(b);
    return out;
  }
};

/// decode.gemv, decode.quant-gemv (quantized weights' GEMVs),
/// decode.attention, decode.gemm (the batched decode plans'
/// GEMMs, batches of 2 and more), prefill.attention, prefill.epilogue,
/// prefill.elementwise (the embedding: the one elementwise kernel fusion
/// leaves), prefill.gemm (cuBLAS's own choice, one of cuBLASLt's, or kiln's
/// own GEMM with a tile of token rows).
const std::vector<TuneFamily> &tuneFamilies();

struct TuneOptions {
  std::vector<int64_t> seqLens = {1, 2, 4, 8, 16, 32, 64, 128};
  std::vector<int64_t> batches = {1};
  std::vector<std::string> families; // empty: every family
  /// Knob settings per family (kiln tune --knobs); a family not here
  /// tries all of its candidates.
  std::map<std::string, std::vector<std::string>> candidates;
  std::string target = "sm_90";
  std::string dbPath;  // read first (a resumed run), written after each length
  std::string plotDir; // an SVG per family and batch, when set
};

/// What a tune did, a line per family and batch for the report.
struct TuneResult {
  int64_t computed = 0, resumed = 0; // (length, candidate) times
  std::vector<std::string> lines;
  std::vector<std::string> plots; // SVG files written
};

/// A hash of the shapes of `family`'s ops in `module`: the key that says
/// whether a database entry is about these kernels.
std::string familySignature(mlir::ModuleOp module, const TuneFamily &family);

/// The kernels of `family`'s ops in `module`, named as a bundle's Program
/// names them (decode.attention: the batched plans' variants too): whose
/// times are the family's in a measurement.
std::vector<std::string> familyKernels(mlir::ModuleOp module,
                                       const TuneFamily &family);

/// Tunes `module` (through the whole kiln pipeline) with the cost model of
/// opts.target's GPU, kernels compiled through `cache` for ptxas' figures.
/// `progress(done, total)` is called after each length.
llvm::Expected<TuneResult>
tune(mlir::ModuleOp module, const TuneOptions &opts, KernelCache &cache,
     const std::function<void(int64_t, int64_t)> &progress = {});

/// What a compile for `target` takes from `db` for `module`: decode's
/// knobs (into opts), the prefill buckets with each one's knobs (from the
/// prefill families' buckets), and each batch bucket's attention knobs
/// (from the entry of the largest batch tuned that is not larger). Entries
/// of another target, NVRTC or signature (another model or options) are
/// ignored, and so is the cost model's entry where a measured one exists
/// for the same family and batch; `notes` gets a line per entry, used or
/// ignored and why.
llvm::Error applyTuning(mlir::ModuleOp module, const TuningDb &db,
                        const std::string &target, CodegenOptions &opts,
                        std::vector<std::string> &notes);

} // namespace kiln

#endif // KILN_TUNE_TUNER_H

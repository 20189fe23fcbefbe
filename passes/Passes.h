//===- Passes.h - kiln's passes ---------------------------------*- C++ -*-===//
#ifndef KILN_PASSES_PASSES_H
#define KILN_PASSES_PASSES_H

#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <functional>
#include <vector>

namespace kiln {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// One step of the default pipeline: a pass (on the module or on each
/// function) and the flag that names it.
struct PipelineStage {
  const char *name;
  std::function<void(mlir::OpPassManager &)> addTo;
};

/// What the default pipeline's plans are sized for.
struct PipelineOptions {
  /// Tokens of the largest prefill the arena holds (capped at the context);
  /// longer prompts run in chunks of it.
  int64_t prefillTokens = 2048;
  /// Sequences that run at once, and tokens per sequence (0: the model's
  /// context): what the KV pool holds.
  int64_t maxBatch = 1, maxContext = 0;
  /// Bytes for the KV pool; 0: maxBatch sequences at maxContext.
  int64_t kvMemory = 0;
};

/// The default pipeline, step by step: every fusion in the order they
/// build on each other, then kernel names and the memory plans.
/// `kiln compile --dump-ir-after-all` writes the IR after each step.
std::vector<PipelineStage>
kilnPipelineStages(const PipelineOptions &opts = PipelineOptions());

/// All the stages in one pass manager: `kiln-opt --kiln-pipeline` and
/// `kiln compile` run this.
void buildKilnPipeline(mlir::OpPassManager &pm);

/// Registers every pass and the `kiln-pipeline` pipeline with MLIR's
/// registry, for kiln-opt.
void registerKilnPassesAndPipeline();

} // namespace kiln

#endif // KILN_PASSES_PASSES_H

//===- Passes.h - kiln's passes ---------------------------------*- C++ -*-===//
#ifndef KILN_PASSES_PASSES_H
#define KILN_PASSES_PASSES_H

#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace kiln {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// The default pipeline: every fusion, in the order they build on each
/// other. `kiln-opt --kiln-pipeline` and `kiln compile` run it.
void buildKilnPipeline(mlir::OpPassManager &pm);

/// Registers every pass and the `kiln-pipeline` pipeline with MLIR's
/// registry, for kiln-opt.
void registerKilnPassesAndPipeline();

} // namespace kiln

#endif // KILN_PASSES_PASSES_H

//===- BuildProgram.h - kiln IR to the runtime's Program --------*- C++ -*-===//
#ifndef KILN_CODEGEN_BUILDPROGRAM_H
#define KILN_CODEGEN_BUILDPROGRAM_H

#include "codegen/CudaKernel.h"
#include "runtime/Program.h"

#include "mlir/IR/BuiltinOps.h"

namespace kiln {

/// What a module that went through the whole pipeline (names, KV pool and
/// arena plans) runs: its kernels, weight manifest, and the launches of the
/// decode step and of prefill (one plan per sequence-length bucket), with
/// every argument bound. Fails naming what is missing.
llvm::Expected<Program> buildProgram(mlir::ModuleOp module,
                                     const CodegenOptions &opts);

/// The Program one rank of a split module (kiln.tensor_parallel) runs:
/// buildProgram's, with the collectives' launches (kAllReduce,
/// kAllGather) between the kernels. Only the emu device's ranks run it
/// yet: bundles, the cuda device and the cost model take buildProgram's
/// refusal.
llvm::Expected<Program> buildRankProgram(mlir::ModuleOp module,
                                         const CodegenOptions &opts);

} // namespace kiln

#endif // KILN_CODEGEN_BUILDPROGRAM_H

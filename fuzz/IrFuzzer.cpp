//===- IrFuzzer.cpp - kiln IR text through the whole compiler -------------===//
//
// Parsing and verifying text in the kiln dialect never crashes: bad IR is
// a diagnostic (swallowed here). IR that verifies then goes through the
// whole pipeline (the fusions, the names, the KV pool and arena plans,
// each pass followed by the verifier) and code generation (every kernel's
// CUDA text and the launch plans, without NVRTC), which must refuse what
// they cannot handle with a diagnostic or an error, never crash: passes
// and emitters trust only what the verifiers guarantee. (The first run
// found that MLIR's parser reads past a buffer without a NUL at its end:
// the harness's own fault; kiln's tools read files through
// llvm::MemoryBuffer, which adds one.)
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "codegen/BuildProgram.h"
#include "ir/KilnDialect.h"
#include "ir/NestingDepth.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *ctx = [] {
    mlir::DialectRegistry registry;
    registry.insert<kiln::KilnDialect, mlir::func::FuncDialect>();
    auto *c = new mlir::MLIRContext(registry);
    c->loadAllAvailableDialects();
    c->printOpOnDiagnostic(false);
    return c;
  }();
  mlir::ScopedDiagnosticHandler quiet(
      ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  // MLIR's lexer reads up to a NUL: its input must end in one, as a file
  // read with llvm::MemoryBuffer (kiln-opt, kiln-translate) does.
  std::string text(reinterpret_cast<const char *>(data), size);
  // As kiln-opt and kiln-translate do: text nested deeper than MLIR's
  // recursive parser's stack holds is refused first (the second run found
  // a stack overflow at 7,433 '[').
  if (llvm::Error e = kiln::checkIrNesting(text)) {
    llvm::consumeError(std::move(e));
    return 0;
  }
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, ctx);
  if (!module || failed(mlir::verify(*module)))
    return 0;
  mlir::PassManager pm(ctx);
  kiln::buildKilnPipeline(pm);
  if (failed(pm.run(*module)))
    return 0;
  auto program = kiln::buildProgram(*module, kiln::CodegenOptions());
  if (!program)
    llvm::consumeError(program.takeError());
  return 0;
}

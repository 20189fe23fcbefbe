//===- kiln-opt.cpp - the kiln pass driver --------------------------------===//
//
// mlir-opt for kiln: parses, verifies, runs passes and prints kiln IR.
// Registers only the dialects kiln uses (kiln, func), which keeps linking fast.
//
//===----------------------------------------------------------------------===//
#include "ir/KilnDialect.h"
#include "ir/NestingDepth.h"
#include "passes/Passes.h"
#include "test/lib/TestPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<kiln::KilnDialect, mlir::func::FuncDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  kiln::registerKilnPassesAndPipeline();
  kiln::test::registerTestPasses();
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "kiln optimizer driver\n", registry);
  // Text nested past what MLIR's recursive parser's stack holds is refused
  // before it gets there (ir/NestingDepth.h).
  if (llvm::Error e = kiln::checkIrFileNesting(input)) {
    llvm::errs() << "kiln-opt: error: " << toString(std::move(e)) << "\n";
    return 1;
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, input, output, registry));
}

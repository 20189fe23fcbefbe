//===- kiln-opt.cpp - the kiln pass driver --------------------------------===//
//
// mlir-opt for kiln: parses, verifies, runs passes and prints kiln IR.
// Registers only the dialects kiln uses (kiln, func), which keeps linking fast.
//
//===----------------------------------------------------------------------===//
#include "ir/KilnDialect.h"
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
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "kiln optimizer driver\n", registry));
}

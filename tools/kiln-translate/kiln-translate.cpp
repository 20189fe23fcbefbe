//===- kiln-translate.cpp - kiln IR to other languages --------------------===//
//
//   kiln-translate --kiln-to-cuda model.mlir
//
// prints the CUDA C++ of every distinct kernel of @decode (of every
// function when there is no @decode), as NVRTC compiles it. The input is
// kiln IR after the pipeline (kiln compile -o, or kiln-opt --kiln-pipeline).
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;

int main(int argc, char **argv) {
  TranslateFromMLIRRegistration toCuda(
      "kiln-to-cuda", "print the CUDA C++ of the decode step's kernels",
      [](Operation *op, raw_ostream &os) -> LogicalResult {
        auto module = cast<ModuleOp>(op);
        SmallVector<Operation *> functions;
        if (auto decode = module.lookupSymbol<func::FuncOp>("decode"))
          functions.push_back(decode);
        else
          for (auto fn : module.getOps<func::FuncOp>())
            functions.push_back(fn);
        for (Operation *fn : functions) {
          auto kernels = kiln::emitCudaKernels(fn, kiln::CodegenOptions());
          if (!kernels)
            return fn->emitError() << toString(kernels.takeError());
          for (const kiln::CudaKernel &k : *kernels) {
            os << "//===--- " << k.kernel << " ---===//\n";
            os << "// launch: grid (" << k.grid[0] << ", " << k.grid[1] << ", "
               << k.grid[2] << "), " << k.blockThreads << " threads\n";
            os << k.source << "\n";
          }
        }
        return success();
      },
      [](DialectRegistry &registry) {
        registry.insert<kiln::KilnDialect, func::FuncDialect>();
      });
  return failed(mlirTranslateMain(argc, argv, "kiln translation driver\n"));
}

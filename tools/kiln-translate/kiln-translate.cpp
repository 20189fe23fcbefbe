//===- kiln-translate.cpp - kiln IR to other languages --------------------===//
//
//   kiln-translate --kiln-to-cuda model.mlir
//
// prints the CUDA C++ of every distinct kernel of every function (@prefill,
// @decode), as NVRTC compiles it, with its launch shape (S: the prefill's
// token count). The input is kiln IR after the pipeline (kiln compile -o,
// or kiln-opt --kiln-pipeline). Prefill's cuBLAS GEMMs are not kernels of
// ours; the epilogue that follows each is marked. With --kernel-options
// gemm-algo=-2, kiln's own GEMMs that replace them follow @prefill's
// kernels.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnDialect.h"
#include "ir/NestingDepth.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/FileSystem.h"

using namespace mlir;

static llvm::cl::opt<std::string>
    kernelOptions("kernel-options",
                  llvm::cl::desc("Kernel tuning knobs, name=value,... (as "
                                 "kiln compile --kernel-options)"));

int main(int argc, char **argv) {
  TranslateFromMLIRRegistration toCuda(
      "kiln-to-cuda", "print the CUDA C++ of every kernel",
      [](Operation *op, raw_ostream &os) -> LogicalResult {
        auto module = cast<ModuleOp>(op);
        kiln::CodegenOptions knobs;
        if (llvm::Error e = kiln::parseCodegenOptions(kernelOptions, knobs))
          return module.emitError()
                 << "--kernel-options: " << toString(std::move(e));
        for (auto fn : module.getOps<func::FuncOp>()) {
          auto kernels = kiln::emitCudaKernels(fn, knobs);
          if (kernels && knobs.gemmAlgo == kiln::kSmallGemmAlgo &&
              fn.getName() == "prefill") {
            auto gemms = kiln::emitSmallGemms(fn, knobs);
            if (!gemms)
              return fn->emitError() << toString(gemms.takeError());
            llvm::append_range(*kernels, *gemms);
          }
          if (!kernels)
            return fn->emitError() << toString(kernels.takeError());
          for (const kiln::CudaKernel &k : *kernels) {
            os << "//===--- " << k.kernel << " ---===//\n";
            os << "// launch: grid (";
            for (int axis = 0; axis < 3; ++axis) {
              os << (axis ? ", " : "");
              if (axis == 1 && k.fillBlocks > 0)
                os << "splits";
              else if (axis != k.rowAxis)
                os << k.grid[axis];
              else if (k.rowsPerBlock == 1)
                os << "S";
              else
                os << "ceil(S / " << k.rowsPerBlock << ")";
            }
            os << "), " << k.blockThreads << " threads"
               << (k.afterGemm ? ", after a cuBLAS GEMM" : "");
            if (k.fillBlocks > 0)
              os << ", splits filling " << k.fillBlocks << " blocks";
            os << "\n";
            os << k.source << "\n";
          }
        }
        return success();
      },
      [](DialectRegistry &registry) {
        registry.insert<kiln::KilnDialect, func::FuncDialect>();
      });
  // Text nested past what MLIR's recursive parser's stack holds is refused
  // before it gets there (ir/NestingDepth.h): every file the command line
  // names is checked, since mlirTranslateMain keeps its input option to
  // itself.
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-' && llvm::sys::fs::is_regular_file(argv[i]))
      if (llvm::Error e = kiln::checkIrFileNesting(argv[i])) {
        llvm::errs() << "kiln-translate: error: " << toString(std::move(e))
                     << "\n";
        return 1;
      }
  return failed(mlirTranslateMain(argc, argv, "kiln translation driver\n"));
}

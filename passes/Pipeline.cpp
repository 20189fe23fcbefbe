//===- Pipeline.cpp - the default pipeline --------------------------------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

namespace kiln {
namespace {
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"
} // namespace

void buildKilnPipeline(mlir::OpPassManager &pm) {
  mlir::OpPassManager &fn = pm.nest<mlir::func::FuncOp>();
  // The norm prologue first: SwiGLU and residual epilogues attach to the
  // fused matmuls it makes. Attention first, then RoPE moves into it.
  fn.addPass(createKilnFuseRMSNormMatmul());
  fn.addPass(createKilnFuseSwiGLU());
  fn.addPass(createKilnFuseResidual());
  fn.addPass(createKilnFuseSoftmax());
  fn.addPass(createKilnFuseRopeQK());
  fn.addPass(createKilnFuseKVWrite());
}

void registerKilnPassesAndPipeline() {
  registerKilnPasses();
  mlir::PassPipelineRegistration<>(
      "kiln-pipeline", "kiln's default pipeline: every fusion, in order",
      buildKilnPipeline);
}

} // namespace kiln

//===- Pipeline.cpp - the default pipeline --------------------------------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

namespace kiln {
namespace {
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// A function pass, run on every func.func of the module.
template <typename Create>
PipelineStage onFunctions(const char *name, Create create) {
  return {name, [create](mlir::OpPassManager &pm) {
            pm.nest<mlir::func::FuncOp>().addPass(create());
          }};
}
} // namespace

std::vector<PipelineStage> kilnPipelineStages(const PipelineOptions &opts) {
  // The norm prologue first: the SwiGLU and residual epilogues attach to the
  // fused matmuls it makes. Attention before RoPE, which moves into it, and
  // RoPE into the kv write before the write moves into the QKV matmul.
  // Names and plans last, on the final kernels.
  KilnPlanBuffersOptions buffers;
  // The arena holds a batched decode's rows too.
  buffers.prefillTokens = std::max(opts.prefillTokens, opts.maxBatch);
  KilnPlanKVPoolOptions pool;
  pool.maxBatch = opts.maxBatch;
  pool.maxContext = opts.maxContext;
  pool.memoryBudget = opts.kvMemory;
  return {
      onFunctions("kiln-fuse-rmsnorm-matmul", createKilnFuseRMSNormMatmul),
      onFunctions("kiln-fuse-swiglu", createKilnFuseSwiGLU),
      onFunctions("kiln-fuse-residual", createKilnFuseResidual),
      onFunctions("kiln-fuse-softmax", createKilnFuseSoftmax),
      onFunctions("kiln-fuse-rope-qk", createKilnFuseRopeQK),
      onFunctions("kiln-fuse-kv-write", createKilnFuseKVWrite),
      onFunctions("kiln-name-kernels", createKilnNameKernels),
      {"kiln-plan-kv-pool",
       [pool](mlir::OpPassManager &pm) {
         pm.addPass(createKilnPlanKVPool(pool));
       }},
      {"kiln-plan-buffers",
       [buffers](mlir::OpPassManager &pm) {
         pm.addPass(createKilnPlanBuffers(buffers));
       }},
  };
}

void buildKilnPipeline(mlir::OpPassManager &pm) {
  for (const PipelineStage &stage : kilnPipelineStages())
    stage.addTo(pm);
}

void registerKilnPassesAndPipeline() {
  registerKilnPasses();
  mlir::PassPipelineRegistration<>(
      "kiln-pipeline",
      "kiln's default pipeline: every fusion in order, then kernel names "
      "and the memory plans",
      buildKilnPipeline);
}

} // namespace kiln

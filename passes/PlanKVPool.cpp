//===- PlanKVPool.cpp - kiln-plan-kv-pool ---------------------------------===//
//
// The KV cache of every sequence lives in one pool of blocks; this pass
// decides the block size, the block count and where each layer's keys and
// values start, and records it as #kiln.kv_pool on the module.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPLANKVPOOL
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The cache type the functions carry (they all carry the same one).
KVCacheType findCacheType(ModuleOp module) {
  KVCacheType found;
  module.walk([&](func::FuncOp fn) {
    for (Type t : fn.getArgumentTypes())
      if (auto cache = dyn_cast<KVCacheType>(t))
        found = cache;
  });
  return found;
}

struct KilnPlanKVPool : kiln::impl::KilnPlanKVPoolBase<KilnPlanKVPool> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    KVCacheType cache = findCacheType(module);
    if (!cache) {
      module.emitError() << "kiln-plan-kv-pool: the module has no "
                            "!kiln.kv_cache argument to plan for";
      return signalPassFailure();
    }
    int64_t context =
        maxContext > 0 ? int64_t(maxContext) : cache.getCapacity();
    if (blockSize <= 0 || maxBatch <= 0 || memoryBudget < 0) {
      module.emitError() << "kiln-plan-kv-pool: block-size and max-batch must "
                            "be positive, memory-budget not negative";
      return signalPassFailure();
    }
    if (context > cache.getCapacity()) {
      module.emitError() << "kiln-plan-kv-pool: max-context " << context
                         << " exceeds the model's context of "
                         << cache.getCapacity() << " tokens";
      return signalPassFailure();
    }
    // A block's codes (or values), and its scales when quantized.
    int64_t blockBytes =
        blockSize * cache.getSlotWidth() * cache.getElementBytes();
    int64_t scaleBytes = blockSize * cache.getSlotScaleBytes();
    // One block of every layer's keys and values: what one more block of
    // table entries costs.
    int64_t blockAllLayers = 2 * cache.getLayers() * (blockBytes + scaleBytes);
    int64_t tableBlocks = (context + blockSize - 1) / blockSize;
    int64_t blocks = memoryBudget > 0 ? memoryBudget / blockAllLayers
                                      : maxBatch * tableBlocks;
    if (blocks == 0) {
      module.emitError() << "kiln-plan-kv-pool: a memory budget of "
                         << int64_t(memoryBudget)
                         << " bytes holds no block (one block for all layers "
                            "takes "
                         << blockAllLayers << " bytes)";
      return signalPassFailure();
    }
    int64_t layerBytes = 2 * blocks * (blockBytes + scaleBytes);
    module->setAttr("kiln.kv_pool",
                    KVPoolAttr::get(&getContext(), blockSize, blocks,
                                    blockBytes, layerBytes,
                                    layerBytes * cache.getLayers(), maxBatch,
                                    tableBlocks, scaleBytes));
  }
};

} // namespace

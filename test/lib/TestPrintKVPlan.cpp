//===- TestPrintKVPlan.cpp - -kiln-test-print-kv-plan ---------------------===//
//
// Prints the module's #kiln.kv_pool in words, for FileCheck: the figures a
// runtime allocates by.
//
//===----------------------------------------------------------------------===//
#include "test/lib/TestPasses.h"

#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {
struct TestPrintKVPlan : PassWrapper<TestPrintKVPlan, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestPrintKVPlan)
  StringRef getArgument() const final { return "kiln-test-print-kv-plan"; }
  StringRef getDescription() const final {
    return "Print the module's KV pool plan";
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto pool = module->getAttrOfType<kiln::KVPoolAttr>("kiln.kv_pool");
    kiln::KVCacheType cache;
    module.walk([&](func::FuncOp fn) {
      for (Type t : fn.getArgumentTypes())
        if (auto c = dyn_cast<kiln::KVCacheType>(t))
          cache = c;
    });
    auto &os = llvm::outs();
    if (!pool || !cache) {
      os << "kv pool: none planned\n";
      return;
    }
    os << "kv pool: " << pool.getBytes() << " bytes, " << pool.getBlocks()
       << " blocks of " << pool.getBlockSize() << " tokens\n";
    os << "layout: [" << cache.getLayers() << " layers][keys|values]["
       << pool.getBlocks() << " blocks][" << pool.getBlockSize() << " tokens]["
       << cache.getKvHeads() << " kv heads][" << cache.getHeadDim()
       << " head dim] " << cache.getElementType() << "\n";
    if (cache.isQuantized())
      os << "scales: [" << cache.getLayers() << " layers][keys|values]["
         << pool.getBlocks() << " blocks][" << pool.getBlockSize()
         << " tokens][" << cache.getKvHeads() << " kv heads] f16, after the "
         << "values, " << pool.getScaleBytes() << " bytes a block\n";
    os << "tables: " << pool.getSequences() << " sequences of "
       << pool.getTableBlocks() << " blocks\n";
    os << "block: " << pool.getBlockBytes() << " bytes per layer, "
       << 2 * cache.getLayers() * (pool.getBlockBytes() + pool.getScaleBytes())
       << " bytes for keys and values of all layers\n";
    for (int64_t l = 0; l < cache.getLayers(); ++l) {
      os << "layer " << l << ": keys at " << pool.getOffset(l, false)
         << ", values at " << pool.getOffset(l, true);
      if (cache.isQuantized())
        os << ", key scales at " << pool.getOffset(l, false, true)
           << ", value scales at " << pool.getOffset(l, true, true);
      os << "\n";
    }
  }
};
} // namespace

void kiln::test::registerTestPrintKVPlan() {
  PassRegistration<TestPrintKVPlan>();
}

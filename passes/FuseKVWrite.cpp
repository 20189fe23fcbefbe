//===- FuseKVWrite.cpp - kiln-fuse-kv-write -------------------------------===//
//
// q, k, v = fused_linear(...); kv_write(k, v) becomes q = fused_qkv(...):
// the QKV kernel's epilogue stores K (rotated) and V in the cache.
//
//===----------------------------------------------------------------------===//
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEKVWRITE
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct FuseKVWriteIntoQKV : OpRewritePattern<KVWriteOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(KVWriteOp write,
                                PatternRewriter &rewriter) const override {
    auto qkv = write.getKeys().getDefiningOp<FusedLinearOp>();
    if (!qkv || qkv.getNumResults() != 3 || qkv.getResidual() ||
        qkv.getSwiglu() || write.getKeys() != qkv.getResult(1) ||
        write.getValues() != qkv.getResult(2) || !write.getKeys().hasOneUse() ||
        !write.getValues().hasOneUse())
      return rewriter.notifyMatchFailure(write, "k and v are not results 1 "
                                                "and 2 of a QKV matmul alone");
    // The fused op replaces both: it must sit where both could, after the
    // cache is defined (the write's position) with the matmul's operands.
    rewriter.setInsertionPoint(write);
    auto fused = rewriter.create<FusedQKVOp>(
        rewriter.getFusedLoc({qkv.getLoc(), write.getLoc()}),
        qkv.getResult(0).getType(), write.getCache().getType(), qkv.getInput(),
        qkv.getWeight(), write.getCache(), write.getLayerAttr(),
        write.getPositions(), qkv.getNormEpsilonAttr(),
        write.getRopeThetaAttr(), write.getRopeLayoutAttr(),
        write.getRopeLinearAttr(), write.getRopeDynamicAttr());
    rewriter.replaceAllUsesWith(qkv.getResult(0), fused.getQuery());
    rewriter.replaceOp(write, fused.getCacheOut());
    rewriter.eraseOp(qkv);
    return success();
  }
};

struct KilnFuseKVWrite : kiln::impl::KilnFuseKVWriteBase<KilnFuseKVWrite> {
  void runOnOperation() override {
    if (failed(applyPatterns<FuseKVWriteIntoQKV>(getOperation())))
      signalPassFailure();
  }
};

} // namespace

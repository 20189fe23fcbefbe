//===- FuseRopeQK.cpp - kiln-fuse-rope-qk ---------------------------------===//
//
// rope(q) -> attention becomes attention(q) rope(...): Q is rotated as the
// kernel loads it. rope(k) -> kv_write becomes kv_write(k) rope(...): each
// key is rotated once, as it enters the cache.
//
//===----------------------------------------------------------------------===//
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSEROPEQK
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// Moves the kiln.rope that produces `operand` into `op` (an attention or
/// a kv_write: both carry rope_theta and rope_layout) when the rope has no
/// other user, rotates `heads` heads and uses the consumer's positions.
template <typename ConsumerOp>
LogicalResult absorbRope(ConsumerOp op, OpOperand &operand, int64_t heads,
                         PatternRewriter &rewriter) {
  auto rope = operand.get().getDefiningOp<RopeOp>();
  if (op.getRopeTheta() || !rope || !operand.get().hasOneUse() ||
      rope.getPositions() != op.getPositions() ||
      int64_t(rope.getHeads()) != heads)
    return rewriter.notifyMatchFailure(op, "no movable rope on the operand");
  rewriter.modifyOpInPlace(op, [&] {
    operand.assign(rope.getInput());
    op.setRopeThetaAttr(rope.getThetaAttr());
    op.setRopeLayoutAttr(rope.getLayoutAttr());
    op.setRopeLinearAttr(rope.getLinearAttr());
    op.setRopeDynamicAttr(rope.getDynamicAttr());
    op->setLoc(rewriter.getFusedLoc({rope.getLoc(), op.getLoc()}));
  });
  rewriter.eraseOp(rope);
  return success();
}

/// Q is rotated as the attention kernel loads it.
struct RopeIntoAttention : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    return absorbRope(op, op.getQueryMutable(), op.getHeads(), rewriter);
  }
};

/// K is rotated once, as it is written into the cache.
struct RopeIntoKVWrite : OpRewritePattern<KVWriteOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(KVWriteOp op,
                                PatternRewriter &rewriter) const override {
    auto cache = cast<KVCacheType>(op.getCache().getType());
    return absorbRope(op, op.getKeysMutable(), cache.getKvHeads(), rewriter);
  }
};

struct KilnFuseRopeQK : kiln::impl::KilnFuseRopeQKBase<KilnFuseRopeQK> {
  void runOnOperation() override {
    if (failed(
            applyPatterns<RopeIntoAttention, RopeIntoKVWrite>(getOperation())))
      signalPassFailure();
  }
};

} // namespace

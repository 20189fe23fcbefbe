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

/// The rope producing `v` when it can move into its one consumer.
RopeOp movableRope(Value v, Value positions, int64_t heads) {
  auto rope = v.getDefiningOp<RopeOp>();
  if (!rope || !v.hasOneUse() || rope.getPositions() != positions ||
      int64_t(rope.getHeads()) != heads)
    return nullptr;
  return rope;
}

struct RopeIntoAttention : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    RopeOp rope =
        op.getRopeTheta()
            ? RopeOp()
            : movableRope(op.getQuery(), op.getPositions(), op.getHeads());
    if (!rope)
      return rewriter.notifyMatchFailure(op, "no movable rope on the query");
    rewriter.modifyOpInPlace(op, [&] {
      op.getQueryMutable().assign(rope.getInput());
      op.setRopeThetaAttr(rope.getThetaAttr());
      op.setRopeLayoutAttr(rope.getLayoutAttr());
      op->setLoc(rewriter.getFusedLoc({rope.getLoc(), op.getLoc()}));
    });
    rewriter.eraseOp(rope);
    return success();
  }
};

struct RopeIntoKVWrite : OpRewritePattern<KVWriteOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(KVWriteOp op,
                                PatternRewriter &rewriter) const override {
    auto cache = cast<KVCacheType>(op.getCache().getType());
    RopeOp rope =
        op.getRopeTheta()
            ? RopeOp()
            : movableRope(op.getKeys(), op.getPositions(), cache.getKvHeads());
    if (!rope)
      return rewriter.notifyMatchFailure(op, "no movable rope on the keys");
    rewriter.modifyOpInPlace(op, [&] {
      op.getKeysMutable().assign(rope.getInput());
      op.setRopeThetaAttr(rope.getThetaAttr());
      op.setRopeLayoutAttr(rope.getLayoutAttr());
      op->setLoc(rewriter.getFusedLoc({rope.getLoc(), op.getLoc()}));
    });
    rewriter.eraseOp(rope);
    return success();
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

//===- FuseSoftmax.cpp - kiln-fuse-softmax --------------------------------===//
//
// A softmax written in pieces (max, sub, exp, sum, div; or without the max)
// becomes one safe kiln.softmax; then pv(softmax(causal_mask(qk(q, K))), V)
// becomes attention(q, K, V): one kernel with an online softmax, the scores
// never in memory.
//
//===----------------------------------------------------------------------===//
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSESOFTMAX
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// div(exp(x - max(x)), sum(exp(x - max(x)))), or the same without the max
/// (which overflows for large scores), becomes one safe kiln.softmax(x).
struct SoftmaxFromPieces : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(DivOp div,
                                PatternRewriter &rewriter) const override {
    auto sum = div.getRhs().getDefiningOp<ReduceSumOp>();
    auto exp = div.getLhs().getDefiningOp<ExpOp>();
    if (!sum || !exp || sum.getInput() != exp.getResult() ||
        !sum->hasOneUse() || !llvm::hasNItems(exp->getUses(), 2))
      return rewriter.notifyMatchFailure(div, "not exp(y) / sum(exp(y))");
    Value scores = exp.getInput();
    // The safe form subtracts the row maximum of the same scores first.
    if (auto sub = scores.getDefiningOp<SubOp>()) {
      auto max = sub.getRhs().getDefiningOp<ReduceMaxOp>();
      if (max && max.getInput() == sub.getLhs() && sub->hasOneUse() &&
          max->hasOneUse())
        scores = sub.getLhs();
    }
    rewriter.replaceOpWithNewOp<SoftmaxOp>(div, div.getType(), scores);
    return success();
  }
};

struct FuseAttention : OpRewritePattern<PVOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PVOp pv,
                                PatternRewriter &rewriter) const override {
    auto softmax = pv.getProbs().getDefiningOp<SoftmaxOp>();
    auto mask = softmax ? softmax.getScores().getDefiningOp<CausalMaskOp>()
                        : CausalMaskOp();
    auto qk = mask ? mask.getScores().getDefiningOp<QKOp>() : QKOp();
    if (!qk)
      return rewriter.notifyMatchFailure(pv, "not qk -> mask -> softmax -> pv");
    if (!softmax->hasOneUse() || !mask->hasOneUse() || !qk->hasOneUse())
      return rewriter.notifyMatchFailure(pv, "an intermediate is used twice");
    if (qk.getKvHeads() != pv.getKvHeads())
      return rewriter.notifyMatchFailure(pv, "qk and pv disagree on kv heads");

    auto attention = rewriter.create<AttentionOp>(
        rewriter.getFusedLoc(
            {qk.getLoc(), mask.getLoc(), softmax.getLoc(), pv.getLoc()}),
        pv.getType(), qk.getQuery(), qk.getKeys(), pv.getValues(),
        mask.getPositions(), qk.getHeadsAttr(), qk.getKvHeadsAttr(),
        qk.getScaleAttr(), /*rope_theta=*/FloatAttr(),
        /*rope_layout=*/RopeLayoutAttr(), /*rope_linear=*/FloatAttr(),
        /*rope_dynamic=*/RopeDynamicAttr());
    rewriter.replaceOp(pv, attention.getResult());
    rewriter.eraseOp(softmax);
    rewriter.eraseOp(mask);
    rewriter.eraseOp(qk);
    return success();
  }
};

struct KilnFuseSoftmax : kiln::impl::KilnFuseSoftmaxBase<KilnFuseSoftmax> {
  void runOnOperation() override {
    if (failed(applyPatterns<SoftmaxFromPieces, FuseAttention>(getOperation())))
      signalPassFailure();
  }
};

} // namespace

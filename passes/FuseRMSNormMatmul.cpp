//===- FuseRMSNormMatmul.cpp - kiln-fuse-rmsnorm-matmul -------------------===//
//
// rms_norm(h, g) feeding linears W1..Wn becomes
//   fused_linear(h, packed[W1..Wn scaled by g]) norm(eps) -> y1..yn
// so the kernel normalizes each row in its prologue (Passes.td says when).
//
//===----------------------------------------------------------------------===//
#include "passes/PackWeights.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSERMSNORMMATMUL
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct FuseNormIntoMatmuls : OpRewritePattern<RMSNormOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(RMSNormOp norm,
                                PatternRewriter &rewriter) const override {
    // Every user must be a matmul reading the normalized value as its
    // input: any other user needs the value in memory.
    SmallVector<Operation *> users(norm->getUsers());
    if (users.empty())
      return rewriter.notifyMatchFailure(norm, "no users");
    bool logits = isa<LogitsOp>(users.front());
    for (Operation *user : users) {
      if (!isa<LinearOp, LogitsOp>(user) || isa<LogitsOp>(user) != logits ||
          user->getOperand(0) != norm.getResult() ||
          user->getOperand(1) == norm.getResult() ||
          user->getBlock() != norm->getBlock())
        return rewriter.notifyMatchFailure(
            norm, "the normalized value has a user that is not a matmul");
    }
    llvm::sort(users, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });

    SmallVector<Value> weights;
    SmallVector<Type> resultTypes;
    SmallVector<Location> locs = {norm.getLoc()};
    for (Operation *user : users) {
      weights.push_back(user->getOperand(1));
      resultTypes.push_back(user->getResult(0).getType());
      locs.push_back(user->getLoc());
    }
    rewriter.setInsertionPoint(norm);
    PackedWeightOp packed = packWeights(rewriter, weights, norm.getWeight());
    if (!packed)
      return rewriter.notifyMatchFailure(norm, "weights are not named");
    auto fused = rewriter.create<FusedLinearOp>(
        rewriter.getFusedLoc(locs), resultTypes, norm.getInput(), packed,
        /*residual=*/Value(), norm.getEpsilonAttr(), /*swiglu=*/UnitAttr());
    for (auto [user, result] : llvm::zip(users, fused.getResults()))
      rewriter.replaceOp(user, result);
    rewriter.eraseOp(norm);
    return success();
  }
};

struct KilnFuseRMSNormMatmul
    : kiln::impl::KilnFuseRMSNormMatmulBase<KilnFuseRMSNormMatmul> {
  void runOnOperation() override {
    if (failed(applyPatterns<FuseNormIntoMatmuls>(getOperation())))
      signalPassFailure();
  }
};

} // namespace

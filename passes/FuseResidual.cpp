//===- FuseResidual.cpp - kiln-fuse-residual ------------------------------===//
//
// add(h, matmul(x)) becomes fused_linear(x) residual(h): the sum is made in
// the matmul's epilogue, and the matmul's own output never goes to memory.
//
//===----------------------------------------------------------------------===//
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSERESIDUAL
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct FuseResidualEpilogue : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  /// The matmul behind `v` that can take a residual epilogue, if any.
  static Operation *matmulFor(Value v) {
    if (!v.hasOneUse())
      return nullptr;
    if (auto linear = v.getDefiningOp<LinearOp>())
      return linear;
    auto fused = v.getDefiningOp<FusedLinearOp>();
    if (fused && fused.getNumResults() == 1 && !fused.getResidual() &&
        !fused.getSwiglu())
      return fused;
    return nullptr;
  }

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    // The addend is the matmul's result; the other operand is the residual.
    for (auto [addend, residual] : {std::pair{add.getRhs(), add.getLhs()},
                                    std::pair{add.getLhs(), add.getRhs()}}) {
      Operation *matmul = matmulFor(addend);
      if (!matmul)
        continue;
      FloatAttr eps;
      if (auto fused = dyn_cast<FusedLinearOp>(matmul))
        eps = fused.getNormEpsilonAttr();
      rewriter.setInsertionPoint(add);
      auto fused = rewriter.create<FusedLinearOp>(
          rewriter.getFusedLoc({matmul->getLoc(), add.getLoc()}),
          TypeRange{add.getType()}, matmul->getOperand(0),
          matmul->getOperand(1), residual, eps, /*swiglu=*/UnitAttr());
      rewriter.replaceOp(add, fused.getResults());
      rewriter.eraseOp(matmul);
      return success();
    }
    return rewriter.notifyMatchFailure(add, "no matmul addend used only here");
  }
};

struct KilnFuseResidual : kiln::impl::KilnFuseResidualBase<KilnFuseResidual> {
  void runOnOperation() override {
    if (failed(applyPatterns<FuseResidualEpilogue>(getOperation())))
      signalPassFailure();
  }
};

} // namespace

//===- FuseSwiGLU.cpp - kiln-fuse-swiglu ----------------------------------===//
//
// mul(silu(gate), up), gate and up from one matmul (or two on one input),
// becomes fused_linear(...) swiglu with the [gate | up] weight.
//
//===----------------------------------------------------------------------===//
#include "passes/PackWeights.h"
#include "passes/PassUtils.h"
#include "passes/Passes.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFUSESWIGLU
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

struct FuseSwiGLUEpilogue : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    auto silu = mul.getLhs().getDefiningOp<SiLUOp>();
    Value gate = silu ? silu.getInput() : Value();
    Value up = mul.getRhs();
    if (!silu || !silu->hasOneUse() || !gate.hasOneUse() || !up.hasOneUse())
      return rewriter.notifyMatchFailure(mul, "not silu(gate) * up alone");

    Value input, weight;
    FloatAttr eps;
    rewriter.setInsertionPoint(mul);
    auto both = gate.getDefiningOp<FusedLinearOp>();
    if (both && up.getDefiningOp() == both.getOperation()) {
      // One matmul computed both: its weight is already [gate | up].
      if (both.getNumResults() != 2 || both.getResult(0) != gate ||
          both.getResidual() || both.getSwiglu())
        return rewriter.notifyMatchFailure(mul, "gate and up out of order");
      input = both.getInput();
      weight = both.getWeight();
      eps = both.getNormEpsilonAttr();
    } else {
      auto g = gate.getDefiningOp<LinearOp>(), u = up.getDefiningOp<LinearOp>();
      if (!g || !u || g.getInput() != u.getInput())
        return rewriter.notifyMatchFailure(mul, "gate and up not matmuls of "
                                                "one input");
      PackedWeightOp packed =
          packWeights(rewriter, {g.getWeight(), u.getWeight()}, Value());
      if (!packed)
        return rewriter.notifyMatchFailure(mul, "weights are not named");
      input = g.getInput();
      weight = packed;
    }
    Location loc = rewriter.getFusedLoc(
        {gate.getLoc(), up.getLoc(), silu.getLoc(), mul.getLoc()});
    auto fused = rewriter.create<FusedLinearOp>(
        loc, TypeRange{mul.getType()}, input, weight, /*residual=*/Value(), eps,
        rewriter.getUnitAttr());
    Operation *gateOp = gate.getDefiningOp(), *upOp = up.getDefiningOp();
    rewriter.replaceOp(mul, fused.getResults());
    rewriter.eraseOp(silu);
    rewriter.eraseOp(gateOp);
    if (upOp != gateOp)
      rewriter.eraseOp(upOp);
    return success();
  }
};

struct KilnFuseSwiGLU : kiln::impl::KilnFuseSwiGLUBase<KilnFuseSwiGLU> {
  void runOnOperation() override {
    if (failed(applyPatterns<FuseSwiGLUEpilogue>(getOperation())))
      signalPassFailure();
  }
};

} // namespace

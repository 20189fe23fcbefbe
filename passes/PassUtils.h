//===- PassUtils.h - what kiln's pattern passes share -----------*- C++ -*-===//
#ifndef KILN_PASSES_PASSUTILS_H
#define KILN_PASSES_PASSUTILS_H

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {

/// Applies the patterns to `op` until nothing more matches. Ops left
/// without users (the pieces a fusion replaced, all Pure) are erased.
template <typename... Patterns>
mlir::LogicalResult applyPatterns(mlir::Operation *op) {
  mlir::RewritePatternSet patterns(op->getContext());
  patterns.add<Patterns...>(op->getContext());
  return mlir::applyPatternsAndFoldGreedily(op, std::move(patterns));
}

} // namespace kiln

#endif // KILN_PASSES_PASSUTILS_H

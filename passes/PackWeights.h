//===- PackWeights.h - stack named weights into a packed one ----*- C++ -*-===//
#ifndef KILN_PASSES_PACKWEIGHTS_H
#define KILN_PASSES_PACKWEIGHTS_H

#include "ir/KilnOps.h"

#include "mlir/IR/PatternMatch.h"

namespace kiln {

/// Builds a kiln.packed_weight (at the rewriter's insertion point) that
/// stacks `weights`, each defined by a kiln.weight, and folds `normWeight`
/// (a kiln.weight, or null) into its columns. Returns null when a value is
/// not a named weight or the column counts, element types or #kiln.quant
/// formats differ (the packed weight has theirs), or a weight is a slice
/// of columns (#kiln.shard axis 1); slices of rows keep their parts.
PackedWeightOp packWeights(mlir::PatternRewriter &rewriter,
                           llvm::ArrayRef<mlir::Value> weights,
                           mlir::Value normWeight);

/// The checkpoint name of a weight value, if a kiln.weight defines it.
std::optional<llvm::StringRef> weightName(mlir::Value weight);

} // namespace kiln

#endif // KILN_PASSES_PACKWEIGHTS_H

//===- KernelGraph.h - a function's kernels as a Graphviz graph -*- C++ -*-===//
#ifndef KILN_INSPECT_KERNELGRAPH_H
#define KILN_INSPECT_KERNELGRAPH_H

#include "ir/KernelOpInterface.h"

#include "absl/status/statusor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace kiln {

/// The DOT text of `fn`'s kernels and the data flowing between them. Each
/// node shows the kernel's name, op, shapes, estimated bytes moved and
/// FLOPs at `shape`; when every decoder layer runs the same kernels, the
/// layers fold into one cluster labelled ×N. Deterministic: the same
/// function gives the same text.
std::string kernelGraphDot(mlir::func::FuncOp fn, CostShape shape);

/// Lays out DOT text with Graphviz's dot engine, in process, and renders SVG.
absl::StatusOr<std::string> renderSvg(const std::string &dot);

} // namespace kiln

#endif // KILN_INSPECT_KERNELGRAPH_H

//===- CostModel.h - bytes and FLOPs a kernel moves and does ----*- C++ -*-===//
#ifndef KILN_PASSES_COSTMODEL_H
#define KILN_PASSES_COSTMODEL_H

#include "mlir/IR/Operation.h"

#include <cstdint>

namespace kiln {

/// The HBM traffic and arithmetic of one kernel, estimated from types:
/// every operand read once, every result written once.
struct KernelCost {
  int64_t weightBytes = 0;     // weights read
  int64_t kvReadBytes = 0;     // cached keys and values read
  int64_t kvWriteBytes = 0;    // keys and values written into the cache
  int64_t activationBytes = 0; // activations read and written
  int64_t flops = 0;

  int64_t bytes() const {
    return weightBytes + kvReadBytes + kvWriteBytes + activationBytes;
  }
  KernelCost &operator+=(const KernelCost &o);
};

/// Dynamic dimensions count as `tokens` new tokens and `context` keys.
struct CostShape {
  int64_t tokens;
  int64_t context;
};

/// The cost of one kernel-level op (see isKernel); zero for other ops.
KernelCost estimateCost(mlir::Operation *op, CostShape shape);

} // namespace kiln

#endif // KILN_PASSES_COSTMODEL_H

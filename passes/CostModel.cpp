//===- CostModel.cpp ------------------------------------------------------===//
#include "passes/CostModel.h"

#include "ir/KilnOps.h"

using namespace mlir;

namespace kiln {
namespace {

/// Elements of a value, with its dynamic dimensions bounded: key counts
/// (kv_read's results, the last dimension of scores) by the context, the
/// rest by the new tokens.
int64_t elements(Value v, CostShape shape) {
  auto type = cast<RankedTensorType>(v.getType());
  bool keys = isa_and_nonnull<KVReadOp>(v.getDefiningOp());
  int64_t n = 1;
  for (auto [i, d] : llvm::enumerate(type.getShape())) {
    bool keyDim = (keys && i == 0) || (type.getRank() == 3 && i == 2);
    n *= !ShapedType::isDynamic(d) ? d : keyDim ? shape.context : shape.tokens;
  }
  return n;
}

int64_t bytes(Value v, CostShape shape) {
  auto type = cast<RankedTensorType>(v.getType());
  return elements(v, shape) * type.getElementTypeBitWidth() / 8;
}

int64_t rows(Value v, CostShape shape) {
  int64_t d = cast<RankedTensorType>(v.getType()).getDimSize(0);
  return ShapedType::isDynamic(d) ? shape.tokens : d;
}

int64_t dim(Value v, unsigned i) {
  return cast<RankedTensorType>(v.getType()).getDimSize(i);
}

/// Keys and values a cache write stores: 2 x tokens x slot.
int64_t cacheWrite(Value cache, int64_t tokens) {
  auto type = cast<KVCacheType>(cache.getType());
  return 2 * tokens * type.getSlotWidth() *
         type.getElementType().getIntOrFloatBitWidth() / 8;
}
} // namespace

KernelCost &KernelCost::operator+=(const KernelCost &o) {
  weightBytes += o.weightBytes;
  kvReadBytes += o.kvReadBytes;
  kvWriteBytes += o.kvWriteBytes;
  activationBytes += o.activationBytes;
  flops += o.flops;
  return *this;
}

KernelCost estimateCost(Operation *op, CostShape shape) {
  KernelCost c;
  if (!isKernel(op))
    return c;
  for (Value v : op->getOperands()) {
    if (!isa<RankedTensorType>(v.getType()))
      continue; // the cache value: its traffic is the write below
    Operation *def = v.getDefiningOp();
    if (isa_and_nonnull<WeightOp, PackedWeightOp>(def))
      c.weightBytes += bytes(v, shape);
    else if (isa_and_nonnull<KVReadOp>(def))
      c.kvReadBytes += bytes(v, shape);
    else
      c.activationBytes += bytes(v, shape);
  }
  for (Value r : op->getResults())
    if (isa<RankedTensorType>(r.getType()))
      c.activationBytes += bytes(r, shape);

  int64_t s = op->getNumOperands() ? rows(op->getOperand(0), shape) : 0;
  if (auto e = dyn_cast<EmbeddingOp>(op)) {
    // Only the looked-up rows of the table are read.
    c.weightBytes = bytes(e.getResult(), shape);
  } else if (isa<LinearOp, LogitsOp, FusedLinearOp, FusedQKVOp>(op)) {
    Value w = op->getOperand(1);
    c.flops = 2 * s * dim(w, 0) * dim(w, 1);
  } else if (auto a = dyn_cast<AttentionOp>(op)) {
    int64_t heads = a.getHeads(), dh = dim(a.getQuery(), 1) / heads;
    c.flops = 4 * s * shape.context * heads * dh; // Q·Kᵀ and P·V
  } else if (auto qk = dyn_cast<QKOp>(op)) {
    c.flops = 2 * s * shape.context * dim(qk.getQuery(), 1);
  } else if (auto pv = dyn_cast<PVOp>(op)) {
    c.flops = 2 * s * shape.context * dim(pv.getResult(), 1);
  } else if (op->getNumResults() &&
             isa<RankedTensorType>(op->getResultTypes()[0])) {
    c.flops = elements(op->getResult(0), shape); // elementwise and norms
  }
  if (auto w = dyn_cast<KVWriteOp>(op))
    c.kvWriteBytes = cacheWrite(w.getCache(), s);
  if (auto q = dyn_cast<FusedQKVOp>(op))
    c.kvWriteBytes = cacheWrite(q.getCache(), s);
  return c;
}

} // namespace kiln

//===- KernelCost.cpp - the bytes and FLOPs of each kernel op -------------===//
//
// KernelOpInterface::getKernelCost: the default (operands read once,
// results written once, a FLOP per result element) and the ops that do
// more arithmetic than that, or read less than their operands.
//
//===----------------------------------------------------------------------===//
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
  if (auto quant = weightQuant(type)) // codes, scales and zero points
    return quant->bytes(type.getDimSize(0), type.getDimSize(1));
  if (auto read = dyn_cast_or_null<KVReadOp>(v.getDefiningOp())) {
    // The cache's slots as stored (a quantized one's codes and scales).
    auto cache = cast<KVCacheType>(read.getCache().getType());
    return elements(v, shape) / cache.getSlotWidth() * cache.getSlotBytes();
  }
  return elements(v, shape) * type.getElementTypeBitWidth() / 8;
}

/// Rows of the op's first operand: its new tokens.
int64_t rows(Operation *op, CostShape shape) {
  if (op->getNumOperands() == 0)
    return 0;
  auto type = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  if (!type || type.getRank() == 0)
    return 0;
  int64_t d = type.getDimSize(0);
  return ShapedType::isDynamic(d) ? shape.tokens : d;
}

int64_t dim(Value v, unsigned i) {
  return cast<RankedTensorType>(v.getType()).getDimSize(i);
}

/// Keys and values a cache write stores: 2 x tokens x slot (as stored).
int64_t cacheWrite(Value cache, int64_t tokens) {
  auto type = cast<KVCacheType>(cache.getType());
  return 2 * tokens * type.getSlotBytes();
}

/// A matmul's: the default bytes, 2 * S * N * K FLOPs.
KernelCost matmulCost(Operation *op, Value weight, CostShape shape) {
  KernelCost c = operandsAndResultsCost(op, shape);
  c.flops = 2 * rows(op, shape) * dim(weight, 0) * dim(weight, 1);
  return c;
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

KernelCost operandsAndResultsCost(Operation *op, CostShape shape) {
  KernelCost c;
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
  if (op->getNumResults() && isa<RankedTensorType>(op->getResultTypes()[0]))
    c.flops = elements(op->getResult(0), shape); // elementwise and norms
  return c;
}

KernelCost estimateCost(Operation *op, CostShape shape) {
  if (auto kernel = dyn_cast<KernelOpInterface>(op))
    return kernel.getKernelCost(shape);
  return {};
}

KernelCost EmbeddingOp::getKernelCost(CostShape shape) {
  KernelCost c = operandsAndResultsCost(*this, shape);
  // Only the looked-up rows of the table are read.
  c.weightBytes = bytes(getResult(), shape);
  c.flops = 0;
  return c;
}

KernelCost LinearOp::getKernelCost(CostShape shape) {
  return matmulCost(*this, getWeight(), shape);
}

KernelCost LogitsOp::getKernelCost(CostShape shape) {
  return matmulCost(*this, getWeight(), shape);
}

KernelCost FusedLinearOp::getKernelCost(CostShape shape) {
  return matmulCost(*this, getWeight(), shape);
}

KernelCost FusedQKVOp::getKernelCost(CostShape shape) {
  KernelCost c = matmulCost(*this, getWeight(), shape);
  c.kvWriteBytes = cacheWrite(getCache(), rows(*this, shape));
  return c;
}

KernelCost AttentionOp::getKernelCost(CostShape shape) {
  KernelCost c = operandsAndResultsCost(*this, shape);
  int64_t heads = getHeads(), dh = dim(getQuery(), 1) / heads;
  c.flops = 4 * rows(*this, shape) * shape.context * heads * dh; // QKᵀ, PV
  return c;
}

KernelCost QKOp::getKernelCost(CostShape shape) {
  KernelCost c = operandsAndResultsCost(*this, shape);
  c.flops = 2 * rows(*this, shape) * shape.context * dim(getQuery(), 1);
  return c;
}

KernelCost PVOp::getKernelCost(CostShape shape) {
  KernelCost c = operandsAndResultsCost(*this, shape);
  // [S, H*Dh] results, each a sum over T keys (its first operand is the
  // probabilities, [H, S, T]: rows() would count heads).
  int64_t s = dim(getResult(), 0);
  c.flops = 2 * (ShapedType::isDynamic(s) ? shape.tokens : s) * shape.context *
            dim(getResult(), 1);
  return c;
}

KernelCost KVWriteOp::getKernelCost(CostShape shape) {
  KernelCost c = operandsAndResultsCost(*this, shape);
  c.kvWriteBytes = cacheWrite(getCache(), rows(*this, shape));
  return c;
}

} // namespace kiln

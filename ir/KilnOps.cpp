//===- KilnOps.cpp - kiln operation verifiers -----------------------------===//
//
// The verifiers hold the shape facts of a Llama 2 decoder, so that a bad
// config or a hand-edited module fails here, with the op and the fault named,
// instead of producing wrong numbers later.
//
//===----------------------------------------------------------------------===//
#include "ir/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace kiln;

namespace {
/// True when two dimensions can be equal at run time.
bool compatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Activations are [tokens, features]: the feature count must be static.
LogicalResult verifyFeatures(Operation *op, Value v, StringRef what) {
  if (tensorType(v).isDynamicDim(1))
    return op->emitOpError() << what << " must have a static feature dimension";
  return success();
}

LogicalResult verifySameElement(Operation *op, Value a, StringRef aName,
                                Value b, StringRef bName) {
  Type ea = tensorType(a).getElementType(), eb = tensorType(b).getElementType();
  if (ea != eb)
    return op->emitOpError()
           << aName << " element type " << ea << " differs from " << bName
           << " element type " << eb;
  return success();
}

/// The input of x·Wᵀ has static features, and W [N, K] as many columns.
LogicalResult verifyWeightColumns(Operation *op, Value input, Value weight) {
  auto in = tensorType(input), w = tensorType(weight);
  if (failed(verifyFeatures(op, input, "input")))
    return failure();
  if (in.getDimSize(1) != w.getDimSize(1))
    return op->emitOpError()
           << "weight shape [" << w.getDimSize(0) << ", " << w.getDimSize(1)
           << "] does not match the input: expected [N, " << in.getDimSize(1)
           << "]";
  return success();
}

/// x·Wᵀ shapes, shared by kiln.linear and kiln.logits.
LogicalResult verifyMatmul(Operation *op, Value input, Value weight,
                           Value result) {
  auto in = tensorType(input), w = tensorType(weight), out = tensorType(result);
  if (failed(verifyWeightColumns(op, input, weight)))
    return failure();
  if (!compatible(in.getDimSize(0), out.getDimSize(0)))
    return op->emitOpError() << "result rows differ from input rows";
  if (out.getDimSize(1) != w.getDimSize(0))
    return op->emitOpError()
           << "result has " << out.getDimSize(1)
           << " columns, the weight gives " << w.getDimSize(0);
  return success();
}

LogicalResult verifyLayer(Operation *op, int64_t layer, KVCacheType cache) {
  if (layer < 0 || layer >= cache.getLayers())
    return op->emitOpError() << "layer " << layer << " is outside the cache's "
                             << cache.getLayers() << " layers";
  return success();
}

LogicalResult verifySlot(Operation *op, Value v, StringRef what,
                         KVCacheType cache) {
  auto t = tensorType(v);
  if (t.getDimSize(1) != cache.getSlotWidth())
    return op->emitOpError()
           << what << " width " << t.getDimSize(1)
           << " differs from the cache's kv_heads * head_dim = "
           << cache.getSlotWidth();
  // A quantized cache takes and gives the model's floats (of any type the
  // ops' operand constraints allow).
  if (!cache.isQuantized() && t.getElementType() != cache.getElementType())
    return op->emitOpError()
           << what << " element type " << t.getElementType()
           << " differs from the cache's " << cache.getElementType();
  return success();
}
/// The numerics contract of softmax: row maximum subtracted, f32 sums.
LogicalResult verifySafeSoftmax(Operation *op, bool subtractMax,
                                std::optional<Type> accumulator) {
  if (!subtractMax)
    return op->emitOpError()
           << "must subtract the row maximum (subtract_max = false lets exp "
              "overflow)";
  if (accumulator && !accumulator->isF32()) // absent means f32
    return op->emitOpError() << "accumulates in " << *accumulator
                             << "; softmax must accumulate in f32";
  return success();
}

/// A linear RoPE scaling factor divides positions: at least 1. A dynamic
/// one raises the base to Dh / (Dh - 2): a head wider than 2. One at most.
LogicalResult verifyScaling(Operation *op, std::optional<APFloat> linear,
                            RopeDynamicAttr dynamic, int64_t headDim) {
  if (linear && !(linear->convertToDouble() >= 1))
    return op->emitOpError() << "RoPE's linear scaling factor must be at "
                                "least 1, not "
                             << linear->convertToDouble();
  if (linear && dynamic)
    return op->emitOpError() << "scales RoPE both linearly and dynamically";
  if (dynamic && headDim <= 2)
    return op->emitOpError() << "head_dim " << headDim
                             << " is too narrow for dynamic RoPE scaling "
                                "(Dh / (Dh - 2))";
  return success();
}

/// RoPE attributes come as a pair (and a linear factor only with them);
/// the rotated head dimension must be even.
LogicalResult verifyRopeAttrs(Operation *op, std::optional<APFloat> theta,
                              bool hasLayout, int64_t headDim,
                              std::optional<APFloat> linear,
                              RopeDynamicAttr dynamic) {
  if (theta.has_value() != hasLayout)
    return op->emitOpError() << "needs both rope theta and rope layout, or "
                                "neither";
  if ((linear || dynamic) && !theta)
    return op->emitOpError() << "has a rope scaling without rope theta and "
                                "layout";
  if (failed(verifyScaling(op, linear, dynamic, headDim)))
    return failure();
  if (!theta)
    return success();
  if (theta->convertToDouble() <= 0)
    return op->emitOpError() << "rope theta must be positive";
  if (headDim % 2 != 0)
    return op->emitOpError() << "head_dim " << headDim
                             << " is odd: RoPE rotates pairs of dimensions";
  return success();
}

/// heads and kv_heads against a query width and a key width.
LogicalResult verifyHeads(Operation *op, int64_t heads, int64_t kvHeads,
                          int64_t qWidth, int64_t kWidth) {
  if (heads <= 0 || qWidth % heads != 0)
    return op->emitOpError()
           << "heads (" << heads << ") do not divide the hidden size ("
           << qWidth << ")";
  if (kvHeads <= 0 || heads % kvHeads != 0)
    return op->emitOpError() << "kv_heads (" << kvHeads
                             << ") do not divide heads (" << heads << ")";
  int64_t headDim = qWidth / heads;
  if (kWidth != kvHeads * headDim)
    return op->emitOpError()
           << "keys width " << kWidth
           << " differs from kv_heads * head_dim = " << kvHeads * headDim;
  return success();
}
} // namespace

/// A weight type's encoding is #kiln.quant or none.
static LogicalResult verifyWeightEncoding(Operation *op, Type type) {
  Attribute encoding = cast<RankedTensorType>(type).getEncoding();
  if (encoding && !isa<QuantAttr>(encoding))
    return op->emitOpError()
           << "a weight's encoding must be #kiln.quant, not " << encoding;
  return success();
}

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty weight name";
  if (failed(verifyWeightEncoding(*this, getType())))
    return failure();
  if (!getType().hasStaticShape())
    return emitOpError() << "weight '" << getName()
                         << "' must have a static shape";
  if (auto shard = getShardAttr();
      shard && shard.getAxis() >= getType().getRank())
    return emitOpError() << "weight '" << getName() << "' has rank "
                         << getType().getRank() << ": no axis "
                         << shard.getAxis() << " to shard";
  return success();
}

LogicalResult EmbeddingOp::verify() {
  auto table = tensorType(getTable()), out = tensorType(getResult());
  if (out.getDimSize(1) != table.getDimSize(1))
    return emitOpError() << "result width " << out.getDimSize(1)
                         << " differs from the table width "
                         << table.getDimSize(1);
  if (!compatible(out.getDimSize(0), tensorType(getTokens()).getDimSize(0)))
    return emitOpError() << "result rows differ from the token count";
  if (weightQuant(table))
    return emitOpError() << "cannot look rows up in a quantized table";
  return verifySameElement(*this, getTable(), "table", getResult(), "result");
}

LogicalResult RMSNormOp::verify() {
  if (failed(verifyFeatures(*this, getInput(), "input")))
    return failure();
  int64_t d = tensorType(getInput()).getDimSize(1);
  if (tensorType(getWeight()).getDimSize(0) != d)
    return emitOpError() << "weight has "
                         << tensorType(getWeight()).getDimSize(0)
                         << " elements, the input has " << d << " features";
  if (getEpsilon().convertToDouble() <= 0)
    return emitOpError() << "epsilon must be positive";
  return verifySameElement(*this, getInput(), "input", getWeight(), "weight");
}

LogicalResult LinearOp::verify() {
  if (failed(verifyMatmul(*this, getInput(), getWeight(), getResult())))
    return failure();
  if (failed(
          verifySameElement(*this, getInput(), "input", getWeight(), "weight")))
    return failure();
  return verifySameElement(*this, getInput(), "input", getResult(), "result");
}

LogicalResult LogitsOp::verify() {
  if (failed(verifyMatmul(*this, getInput(), getWeight(), getResult())))
    return failure();
  return verifySameElement(*this, getInput(), "input", getWeight(), "weight");
}

LogicalResult RopeOp::verify() {
  if (failed(verifyFeatures(*this, getInput(), "input")))
    return failure();
  int64_t d = tensorType(getInput()).getDimSize(1), heads = getHeads();
  if (heads <= 0 || d % heads != 0)
    return emitOpError() << "heads (" << heads
                         << ") do not divide the hidden size (" << d << ")";
  if ((d / heads) % 2 != 0)
    return emitOpError() << "head_dim " << d / heads
                         << " is odd: RoPE rotates pairs of dimensions";
  if (getTheta().convertToDouble() <= 0)
    return emitOpError() << "theta must be positive";
  if (failed(verifyScaling(*this, getLinear(), getDynamicAttr(), d / heads)))
    return failure();
  if (!compatible(tensorType(getInput()).getDimSize(0),
                  tensorType(getPositions()).getDimSize(0)))
    return emitOpError() << "positions differ in count from the input rows";
  return success();
}

LogicalResult QKOp::verify() {
  if (failed(verifyFeatures(*this, getQuery(), "query")) ||
      failed(verifyFeatures(*this, getKeys(), "keys")))
    return failure();
  int64_t heads = getHeads();
  if (failed(verifyHeads(*this, heads, getKvHeads(),
                         tensorType(getQuery()).getDimSize(1),
                         tensorType(getKeys()).getDimSize(1))))
    return failure();
  if (getScale().convertToDouble() <= 0)
    return emitOpError() << "scale must be positive";
  auto out = tensorType(getResult());
  if (out.getDimSize(0) != heads ||
      !compatible(out.getDimSize(1), tensorType(getQuery()).getDimSize(0)) ||
      !compatible(out.getDimSize(2), tensorType(getKeys()).getDimSize(0)))
    return emitOpError() << "result must be [heads, queries, keys]";
  return success();
}

LogicalResult CausalMaskOp::verify() {
  if (!compatible(tensorType(getScores()).getDimSize(1),
                  tensorType(getPositions()).getDimSize(0)))
    return emitOpError() << "positions differ in count from the queries";
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifySafeSoftmax(*this, getSubtractMax(), getAccumulator());
}

LogicalResult PVOp::verify() {
  if (failed(verifyFeatures(*this, getValues(), "values")))
    return failure();
  auto probs = tensorType(getProbs()), values = tensorType(getValues()),
       out = tensorType(getResult());
  int64_t heads = probs.getDimSize(0), kvHeads = getKvHeads();
  if (ShapedType::isDynamic(heads))
    return emitOpError() << "probs must have a static head count";
  if (kvHeads <= 0 || heads % kvHeads != 0)
    return emitOpError() << "kv_heads (" << kvHeads << ") do not divide heads ("
                         << heads << ")";
  if (values.getDimSize(1) % kvHeads != 0)
    return emitOpError() << "kv_heads (" << kvHeads
                         << ") do not divide the values width ("
                         << values.getDimSize(1) << ")";
  if (!compatible(probs.getDimSize(2), values.getDimSize(0)))
    return emitOpError() << "probs keys differ in count from the values rows";
  int64_t headDim = values.getDimSize(1) / kvHeads;
  if (out.getDimSize(1) != heads * headDim ||
      !compatible(out.getDimSize(0), probs.getDimSize(1)))
    return emitOpError() << "result must be [queries, heads * head_dim] = [?, "
                         << heads * headDim << "]";
  return verifySameElement(*this, getValues(), "values", getResult(), "result");
}

LogicalResult KVWriteOp::verify() {
  auto cache = cast<KVCacheType>(getCache().getType());
  if (failed(verifyLayer(*this, getLayer(), cache)) ||
      failed(verifySlot(*this, getKeys(), "keys", cache)) ||
      failed(verifySlot(*this, getValues(), "values", cache)))
    return failure();
  if (failed(verifyRopeAttrs(*this, getRopeTheta(), getRopeLayout().has_value(),
                             cache.getHeadDim(), getRopeLinear(),
                             getRopeDynamicAttr())))
    return failure();
  int64_t s = tensorType(getPositions()).getDimSize(0);
  if (!compatible(tensorType(getKeys()).getDimSize(0), s) ||
      !compatible(tensorType(getValues()).getDimSize(0), s))
    return emitOpError() << "keys, values and positions differ in count";
  return success();
}

LogicalResult KVReadOp::verify() {
  auto cache = cast<KVCacheType>(getCache().getType());
  if (failed(verifyLayer(*this, getLayer(), cache)) ||
      failed(verifySlot(*this, getKeys(), "keys", cache)) ||
      failed(verifySlot(*this, getValues(), "values", cache)))
    return failure();
  return success();
}

/// A row reduction keeps every dimension but the last, which becomes 1.
static LogicalResult verifyRowReduce(Operation *op, Value input, Value result) {
  auto in = tensorType(input), out = tensorType(result);
  if (out.getDimSize(2) != 1 || out.getDimSize(0) != in.getDimSize(0) ||
      !compatible(out.getDimSize(1), in.getDimSize(1)))
    return op->emitOpError() << "result must be the input's shape with a "
                                "last dimension of 1";
  return success();
}

/// The right operand is the left's shape, or a row value broadcast.
static LogicalResult verifyRowBinary(Operation *op, Value lhs, Value rhs) {
  auto l = tensorType(lhs), r = tensorType(rhs);
  if (l.getDimSize(0) != r.getDimSize(0) ||
      !compatible(l.getDimSize(1), r.getDimSize(1)) ||
      (r.getDimSize(2) != 1 && !compatible(l.getDimSize(2), r.getDimSize(2))))
    return op->emitOpError() << "rhs must have the lhs shape, or 1 in the "
                                "last dimension";
  return success();
}

LogicalResult ReduceMaxOp::verify() {
  return verifyRowReduce(*this, getInput(), getResult());
}
LogicalResult ReduceSumOp::verify() {
  return verifyRowReduce(*this, getInput(), getResult());
}
LogicalResult SubOp::verify() {
  return verifyRowBinary(*this, getLhs(), getRhs());
}
LogicalResult DivOp::verify() {
  return verifyRowBinary(*this, getLhs(), getRhs());
}

//===----------------------------------------------------------------------===//
// Fused ops
//===----------------------------------------------------------------------===//

LogicalResult PackedWeightOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty name";
  if (failed(verifyWeightEncoding(*this, getType())))
    return failure();
  if (getSources().empty() || getSources().size() != getRows().size())
    return emitOpError() << "needs one row count per source, and at least "
                            "one source";
  int64_t total = 0;
  for (int64_t r : getRows()) {
    if (r <= 0)
      return emitOpError() << "row counts must be positive";
    total += r;
  }
  auto type = tensorType(getResult());
  if (!type.hasStaticShape() || type.getDimSize(0) != total)
    return emitOpError() << "result has " << type.getDimSize(0)
                         << " rows, the sources give " << total;
  if (auto parts = getShardParts()) {
    if (parts->size() != getSources().size())
      return emitOpError() << "needs one shard_parts entry per source";
    if (llvm::any_of(*parts, [](int64_t p) { return p < 1; }))
      return emitOpError() << "shard_parts must be positive";
  }
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getRanks() < 2)
    return emitOpError() << "needs at least 2 ranks, not " << getRanks();
  if (getResidual() && getResidual().getType() != getInput().getType())
    return emitOpError() << "residual type " << getResidual().getType()
                         << " differs from the input type "
                         << getInput().getType();
  return success();
}

LogicalResult AllGatherOp::verify() {
  if (getRanks() < 2)
    return emitOpError() << "needs at least 2 ranks, not " << getRanks();
  auto in = tensorType(getInput()), out = tensorType(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "result element type " << out.getElementType()
                         << " differs from the input's " << in.getElementType();
  if (in.getDimSize(0) != out.getDimSize(0))
    return emitOpError() << "keeps the rows: result " << out.getDimSize(0)
                         << ", input " << in.getDimSize(0);
  if (in.isDynamicDim(1) || out.isDynamicDim(1) ||
      out.getDimSize(1) != int64_t(getRanks()) * in.getDimSize(1))
    return emitOpError() << "result has " << out.getDimSize(1)
                         << " columns, not " << getRanks() << " ranks x "
                         << in.getDimSize(1);
  return success();
}

LogicalResult FusedLinearOp::verify() {
  auto in = tensorType(getInput()), w = tensorType(getWeight());
  if (failed(verifyWeightColumns(*this, getInput(), getWeight())))
    return failure();
  if (failed(
          verifySameElement(*this, getInput(), "input", getWeight(), "weight")))
    return failure();
  if (getResults().empty())
    return emitOpError() << "needs at least one result";
  if (auto eps = getNormEpsilon(); eps && eps->convertToDouble() <= 0)
    return emitOpError() << "norm epsilon must be positive";
  int64_t width = 0;
  for (Value r : getResults()) {
    auto t = tensorType(r);
    if (!compatible(t.getDimSize(0), in.getDimSize(0)))
      return emitOpError() << "result rows differ from input rows";
    if (t.getElementType() != in.getElementType() &&
        !t.getElementType().isF32())
      return emitOpError() << "results must be of the input element type "
                              "or f32";
    width += t.getDimSize(1);
  }
  if ((getSwiglu() || getResidual()) && getResults().size() != 1)
    return emitOpError() << "a swiglu or residual epilogue has one result";
  if (getSwiglu() && getResidual())
    return emitOpError() << "swiglu and residual epilogues do not combine";
  int64_t expected = getSwiglu() ? 2 * width : width;
  if (expected != w.getDimSize(0))
    return emitOpError() << "the weight has " << w.getDimSize(0)
                         << " rows, the results need " << expected;
  if (getResidual() && getResidual().getType() != getResults()[0].getType())
    return emitOpError() << "residual type differs from the result type";
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyFeatures(*this, getQuery(), "query")) ||
      failed(verifyFeatures(*this, getKeys(), "keys")))
    return failure();
  int64_t qWidth = tensorType(getQuery()).getDimSize(1);
  int64_t kWidth = tensorType(getKeys()).getDimSize(1);
  if (failed(verifyHeads(*this, getHeads(), getKvHeads(), qWidth, kWidth)))
    return failure();
  if (tensorType(getValues()).getDimSize(1) != kWidth ||
      !compatible(tensorType(getValues()).getDimSize(0),
                  tensorType(getKeys()).getDimSize(0)))
    return emitOpError() << "values must have the keys' shape";
  if (getScale().convertToDouble() <= 0)
    return emitOpError() << "scale must be positive";
  if (failed(verifyRopeAttrs(*this, getRopeTheta(), getRopeLayout().has_value(),
                             qWidth / getHeads(), getRopeLinear(),
                             getRopeDynamicAttr())))
    return failure();
  // Its numerics are fixed (safe softmax, f32 sums): a softmax's options
  // carried onto it would otherwise be ignored in silence.
  for (StringRef numerics : {"subtract_max", "accumulator"})
    if ((*this)->hasAttr(numerics))
      return emitOpError() << "always subtracts the row maximum and sums in "
                              "f32: it takes no "
                           << numerics;
  auto out = tensorType(getResult());
  if (out.getDimSize(1) != qWidth ||
      !compatible(out.getDimSize(0), tensorType(getQuery()).getDimSize(0)) ||
      !compatible(out.getDimSize(0), tensorType(getPositions()).getDimSize(0)))
    return emitOpError() << "result must be [queries, heads * head_dim] with "
                            "one position per query";
  return verifySameElement(*this, getQuery(), "query", getResult(), "result");
}

LogicalResult FusedQKVOp::verify() {
  auto cache = cast<KVCacheType>(getCache().getType());
  auto in = tensorType(getInput()), w = tensorType(getWeight()),
       q = tensorType(getQuery());
  if (failed(verifyWeightColumns(*this, getInput(), getWeight())) ||
      failed(verifyLayer(*this, getLayer(), cache)))
    return failure();
  if (w.getDimSize(0) != q.getDimSize(1) + 2 * cache.getSlotWidth())
    return emitOpError() << "the weight has " << w.getDimSize(0)
                         << " rows, q, k and v need "
                         << q.getDimSize(1) + 2 * cache.getSlotWidth();
  if (in.getElementType() != w.getElementType() ||
      q.getElementType() != in.getElementType() ||
      (!cache.isQuantized() && cache.getElementType() != in.getElementType()))
    return emitOpError() << "input, weight, query and cache must share one "
                            "element type (a quantized cache holds any)";
  if (!compatible(q.getDimSize(0), in.getDimSize(0)) ||
      !compatible(tensorType(getPositions()).getDimSize(0), in.getDimSize(0)))
    return emitOpError() << "input, query and positions differ in count";
  if (auto eps = getNormEpsilon(); eps && eps->convertToDouble() <= 0)
    return emitOpError() << "norm epsilon must be positive";
  return verifyRopeAttrs(*this, getRopeTheta(), getRopeLayout().has_value(),
                         cache.getHeadDim(), getRopeLinear(),
                         getRopeDynamicAttr());
}

std::optional<int64_t> FusedQKVOp::getCacheLayer() { return getLayer(); }

std::optional<int64_t> AttentionOp::getCacheLayer() {
  // Its keys and values are one kv_read's view of a layer of the cache.
  auto read = getKeys().getDefiningOp<KVReadOp>();
  if (!read || getValues().getDefiningOp() != read.getOperation())
    return std::nullopt;
  return read.getLayer();
}

#define GET_OP_CLASSES
#include "ir/KilnOps.cpp.inc"

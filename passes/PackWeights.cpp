//===- PackWeights.cpp ----------------------------------------------------===//
#include "passes/PackWeights.h"

#include "llvm/ADT/STLExtras.h"

#include <numeric>

using namespace mlir;

namespace kiln {
namespace {
/// "model.layers.0.self_attn.q_proj.weight", "...k_proj.weight" ->
/// "model.layers.0.self_attn.q_proj+k_proj": the shared module path once,
/// then what tells the sources apart.
std::string packedName(ArrayRef<StringRef> sources) {
  SmallVector<StringRef> stems;
  for (StringRef s : sources) {
    s.consume_back(".weight");
    stems.push_back(s);
  }
  size_t common = stems.front().size();
  for (StringRef s : stems) {
    size_t n = 0;
    while (n < common && n < s.size() && s[n] == stems.front()[n])
      ++n;
    common = n;
  }
  // Cut at a module boundary, so "q_proj" stays whole.
  size_t dot = stems.front().substr(0, common).rfind('.');
  common = (stems.size() == 1 || dot == StringRef::npos) ? 0 : dot + 1;
  std::string name = stems.front().substr(0, common).str();
  for (auto [i, s] : llvm::enumerate(stems))
    name += (i ? "+" : "") + s.substr(common).str();
  return name;
}
} // namespace

std::optional<StringRef> weightName(Value weight) {
  if (auto op = weight ? weight.getDefiningOp<WeightOp>() : WeightOp())
    return op.getName();
  return std::nullopt;
}

PackedWeightOp packWeights(PatternRewriter &rewriter, ArrayRef<Value> weights,
                           Value normWeight) {
  SmallVector<StringRef> sources;
  SmallVector<int64_t> rows, parts; // parts: each source's row slices
  bool sharded = false;
  SmallVector<Location> locs;
  auto first = cast<RankedTensorType>(weights.front().getType());
  for (Value w : weights) {
    auto name = weightName(w);
    auto type = cast<RankedTensorType>(w.getType());
    if (!name || type.getDimSize(1) != first.getDimSize(1) ||
        type.getElementType() != first.getElementType() ||
        type.getEncoding() != first.getEncoding()) // one format a buffer
      return nullptr;
    // A rank's slice of rows stacks as any weight; one of columns does not.
    ShardAttr shard = w.getDefiningOp<WeightOp>().getShardAttr();
    if (shard && shard.getAxis() != 0)
      return nullptr;
    sharded |= bool(shard);
    parts.push_back(shard ? shard.getParts() : 1);
    sources.push_back(*name);
    rows.push_back(type.getDimSize(0));
    locs.push_back(w.getLoc());
  }
  StringAttr scaledBy;
  if (normWeight) {
    auto name = weightName(normWeight);
    if (!name)
      return nullptr;
    scaledBy = rewriter.getStringAttr(*name);
  }
  int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t(0));
  auto type =
      RankedTensorType::get({total, first.getDimSize(1)},
                            first.getElementType(), first.getEncoding());
  return rewriter.create<PackedWeightOp>(
      rewriter.getFusedLoc(locs), type, packedName(sources),
      rewriter.getStrArrayAttr(sources), rewriter.getDenseI64ArrayAttr(rows),
      scaledBy, sharded ? rewriter.getDenseI64ArrayAttr(parts) : nullptr);
}

} // namespace kiln

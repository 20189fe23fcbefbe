//===- ShardTensorParallel.cpp - kiln-shard-tensor-parallel ---------------===//
//
// The tensor-level module becomes one rank's: Megatron-LM's split of each
// decoder layer (column-parallel QKV and gate/up, row-parallel O and down
// followed by an all-reduce), the vocabulary-parallel LM head and its
// all-gather. Types shrink to the rank's heads and slices; which slice of
// a checkpoint tensor a rank reads is #kiln.shard on its kiln.weight.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSHARDTENSORPARALLEL
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// How one of Llama's linears splits: the axis of its weight and the parts.
struct Split {
  int64_t axis, parts;
};

RankedTensorType withDim(Type type, int64_t dim, int64_t size) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, t.getElementType(), t.getEncoding());
}

struct KilnShardTensorParallel
    : kiln::impl::KilnShardTensorParallelBase<KilnShardTensorParallel> {
  using Base::Base;

  int64_t heads = 0, kvHeads = 0, headDim = 0, kvParts = 0;

  /// The split of the weight `name` (by its checkpoint name), or none for
  /// a replicated one.
  std::optional<Split> splitOf(StringRef name) const {
    auto is = [&](StringRef module) {
      return name.ends_with(("." + module + ".weight").str());
    };
    if (is("q_proj") || is("gate_proj") || is("up_proj"))
      return Split{0, ranks};
    if (is("k_proj") || is("v_proj"))
      return Split{0, kvParts};
    if (is("o_proj") || is("down_proj"))
      return Split{1, ranks};
    return std::nullopt;
  }

  /// The rank's slice of weight `w` (a new op when `w` is also read whole,
  /// as tied embeddings are), or `w` itself when it is replicated.
  Value shard(OpBuilder &b, WeightOp w, Split split, Operation *user) {
    int64_t size = w.getType().getDimSize(split.axis) / split.parts;
    auto shardAttr = ShardAttr::get(b.getContext(), split.axis, split.parts);
    if (w.getShardAttr())
      return w;
    if (!w->hasOneUse()) {
      b.setInsertionPoint(user);
      return b.create<WeightOp>(w.getLoc(),
                                withDim(w.getType(), split.axis, size),
                                w.getName(), shardAttr);
    }
    w.setShardAttr(shardAttr);
    w.getResult().setType(withDim(w.getType(), split.axis, size));
    return w;
  }

  LogicalResult check(ModuleOp module) {
    auto config = module->getAttrOfType<DictionaryAttr>("kiln.config");
    auto get = [&](StringRef key) -> int64_t {
      auto v = config ? config.getAs<IntegerAttr>(key) : IntegerAttr();
      return v ? v.getInt() : 0;
    };
    heads = get("num_attention_heads");
    kvHeads = get("num_key_value_heads");
    int64_t hidden = get("hidden_size"), ffn = get("intermediate_size"),
            vocab = get("vocab_size");
    if (!heads || !kvHeads || !hidden || !ffn || !vocab)
      return module.emitError("kiln-shard-tensor-parallel: needs the "
                              "module's kiln.config (heads, kv heads, hidden, "
                              "ffn and vocabulary sizes)");
    headDim = hidden / heads;
    auto refuse = [&](const Twine &what) {
      return module.emitError() << "--tp " << int64_t(ranks) << ": " << what;
    };
    if (ranks < 2)
      return refuse("needs at least 2 ranks");
    if (heads % ranks)
      return refuse(Twine(heads) + " attention heads do not split over " +
                    Twine(ranks) + " ranks");
    if (kvHeads % ranks && ranks % kvHeads)
      return refuse(Twine(kvHeads) + " key/value heads and " + Twine(ranks) +
                    " ranks: one must divide the other");
    if (ffn % ranks)
      return refuse("the FFN width " + Twine(ffn) + " does not split over " +
                    Twine(ranks) + " ranks");
    if (vocab % ranks)
      return refuse("the vocabulary of " + Twine(vocab) +
                    " does not split over " + Twine(ranks) + " ranks");
    kvParts = std::min(kvHeads, int64_t(ranks));
    WalkResult walk = module.walk([&](Operation *op) {
      if (isa<FusedLinearOp, FusedQKVOp, AttentionOp, PackedWeightOp>(op)) {
        op->emitError("kiln-shard-tensor-parallel runs on the tensor-level "
                      "module, before the fusions");
        return WalkResult::interrupt();
      }
      // A row-parallel quantized weight's slice keeps whole groups of
      // columns (a column-parallel one keeps whole rows: any format).
      auto w = dyn_cast<WeightOp>(op);
      auto quant = w ? dyn_cast_or_null<QuantAttr>(w.getType().getEncoding())
                     : QuantAttr();
      std::optional<Split> split = w ? splitOf(w.getName()) : std::nullopt;
      if (!quant || !split || split->axis != 1)
        return WalkResult::advance();
      const QuantFormat &f = quant.getFormat();
      const int64_t cols = w.getType().getDimSize(1) / split->parts;
      if (f.actOrder) {
        op->emitError() << "--tp " << int64_t(ranks) << ": weight '"
                        << w.getName()
                        << "' is in act-order groups (GPTQ's desc_act), which "
                           "span its column slices; quantize it without "
                           "desc_act to split it";
        return WalkResult::interrupt();
      }
      if (f.group && cols % f.group) {
        op->emitError() << "--tp " << int64_t(ranks) << ": weight '"
                        << w.getName() << "' splits into slices of " << cols
                        << " columns, not whole groups of " << f.group;
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  /// The cache type of one rank: its key/value heads.
  Type rankCache(Type type) {
    auto cache = dyn_cast<KVCacheType>(type);
    if (!cache)
      return type;
    return KVCacheType::get(type.getContext(), cache.getLayers(),
                            cache.getCapacity(), kvHeads / kvParts,
                            cache.getHeadDim(), cache.getElementType());
  }

  LogicalResult shardFunction(func::FuncOp func) {
    Block &body = func.getBody().front();
    for (BlockArgument arg : body.getArguments())
      arg.setType(rankCache(arg.getType()));
    OpBuilder b(func.getContext());
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (auto linear = dyn_cast<LinearOp>(op)) {
        auto w = linear.getWeight().getDefiningOp<WeightOp>();
        std::optional<Split> split = w ? splitOf(w.getName()) : std::nullopt;
        if (!split)
          return linear.emitError("kiln-shard-tensor-parallel knows Llama's "
                                  "linears by their weights' names; this one "
                                  "is not one of them");
        linear->setOperand(1, shard(b, w, *split, linear));
        linear.getResult().setType(
            withDim(linear.getType(), 1,
                    cast<RankedTensorType>(linear.getWeight().getType())
                        .getDimSize(0)));
      } else if (auto logits = dyn_cast<LogitsOp>(op)) {
        auto w = logits.getWeight().getDefiningOp<WeightOp>();
        if (!w)
          return logits.emitError("the LM head is not a named weight");
        logits->setOperand(1, shard(b, w, {0, ranks}, logits));
        auto whole = logits.getType();
        logits.getResult().setType(
            withDim(whole, 1, whole.getDimSize(1) / ranks));
        b.setInsertionPointAfter(logits);
        auto gather = b.create<AllGatherOp>(logits.getLoc(), whole,
                                            logits.getResult(), ranks);
        logits.getResult().replaceAllUsesExcept(gather, gather);
      } else if (auto rope = dyn_cast<RopeOp>(op)) {
        rope.getResult().setType(rope.getInput().getType());
        rope.setHeads(rope.getType().getDimSize(1) / headDim);
      } else if (auto write = dyn_cast<KVWriteOp>(op)) {
        write.getResult().setType(write.getCache().getType());
      } else if (auto read = dyn_cast<KVReadOp>(op)) {
        auto cache = cast<KVCacheType>(read.getCache().getType());
        for (Value r : read->getResults())
          r.setType(withDim(r.getType(), 1, cache.getSlotWidth()));
      } else if (auto qk = dyn_cast<QKOp>(op)) {
        int64_t h = tensorWidth(qk.getQuery()) / headDim;
        qk.setHeads(h);
        qk.setKvHeads(tensorWidth(qk.getKeys()) / headDim);
        qk.getResult().setType(withDim(qk.getType(), 0, h));
      } else if (auto pv = dyn_cast<PVOp>(op)) {
        pv.setKvHeads(tensorWidth(pv.getValues()) / headDim);
        int64_t h =
            cast<RankedTensorType>(pv.getProbs().getType()).getDimSize(0);
        pv.getResult().setType(withDim(pv.getType(), 1, h * headDim));
      } else if (auto add = dyn_cast<AddOp>(op)) {
        // add(h, partial O or down product): the sum over the ranks, with
        // the residual once.
        Value partial = add.getRhs(), residual = add.getLhs();
        if (!isPartial(partial))
          std::swap(partial, residual);
        if (!isPartial(partial))
          return add.emitError("a residual add whose addend is not a "
                               "row-parallel (O or down) product");
        b.setInsertionPoint(add);
        auto reduce = b.create<AllReduceOp>(add.getLoc(), add.getType(),
                                            partial, residual, ranks);
        add.replaceAllUsesWith(reduce.getResult());
        add.erase();
      } else if (isa<CausalMaskOp, SoftmaxOp, SiLUOp, ExpOp, MulOp, SubOp,
                     DivOp>(op)) {
        op.getResult(0).setType(op.getOperand(0).getType());
      } else if (isa<ReduceMaxOp, ReduceSumOp>(op)) {
        op.getResult(0).setType(withDim(
            op.getOperand(0).getType(), 2,
            cast<RankedTensorType>(op.getResult(0).getType()).getDimSize(2)));
      }
    }
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                   ret.getOperandTypes()));
    return success();
  }

  static int64_t tensorWidth(Value v) {
    return cast<RankedTensorType>(v.getType()).getDimSize(1);
  }

  /// A linear of a row-parallel weight: each rank's partial product.
  static bool isPartial(Value v) {
    auto linear = v.getDefiningOp<LinearOp>();
    auto w = linear ? linear.getWeight().getDefiningOp<WeightOp>() : nullptr;
    return w && w.getShardAttr() && w.getShardAttr().getAxis() == 1;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(check(module)))
      return signalPassFailure();
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(shardFunction(func)))
        return signalPassFailure();
    module->setAttr(
        "kiln.tensor_parallel",
        IntegerAttr::get(IntegerType::get(&getContext(), 64), ranks));
  }
};

} // namespace

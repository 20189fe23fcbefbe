//===- PlanBuffers.cpp - kiln-plan-buffers --------------------------------===//
//
// Activations by liveness in one arena. The functions are single blocks, so
// a value's life is the interval [its op's index, its last user's index];
// two values whose intervals overlap must not overlap in bytes. Placing the
// largest first at the lowest free offset keeps the arena close to the most
// bytes ever alive at once (the lower bound).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>

namespace kiln {
#define GEN_PASS_DEF_KILNPLANBUFFERS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

constexpr int64_t kAlignment = 256; // bytes; what GPU loads like to start at

int64_t alignUp(int64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

/// True for values that live in the arena: activations kiln ops compute.
/// Weights live in the weight buffer, the cache and kv_read's views of it
/// in the KV pool, arguments in host-written input buffers.
bool inArena(Value v) {
  Operation *op = v.getDefiningOp();
  return op && isa<RankedTensorType>(v.getType()) &&
         !isa<WeightOp, PackedWeightOp, KVReadOp>(op);
}

struct Buffer {
  Value value;
  int64_t size, begin, end; // bytes; op indices of definition and last use
  int64_t offset = -1;
};

struct KilnPlanBuffers : kiln::impl::KilnPlanBuffersBase<KilnPlanBuffers> {
  using Base::Base;

  /// Bytes of a value, with dynamic dims bounded: scores' key dimension by
  /// the context, every other dynamic dimension by the prefill tokens.
  int64_t bytes(Value v, int64_t tokens, int64_t context) {
    auto type = cast<RankedTensorType>(v.getType());
    int64_t n = type.getElementTypeBitWidth() / 8;
    for (auto [i, d] : llvm::enumerate(type.getShape()))
      n *= !ShapedType::isDynamic(d)         ? d
           : (type.getRank() == 3 && i == 2) ? context
                                             : tokens;
    return alignUp(n);
  }

  void plan(func::FuncOp fn, int64_t tokens, int64_t context, int64_t &arena,
            int64_t &peak) {
    Block &body = fn.getBody().front();
    llvm::DenseMap<Operation *, int64_t> index;
    for (auto [i, op] : llvm::enumerate(body))
      index[&op] = int64_t(i);

    std::vector<Buffer> buffers;
    for (Operation &op : body)
      for (Value r : op.getResults()) {
        if (!inArena(r))
          continue;
        int64_t end = index[&op];
        for (Operation *user : r.getUsers())
          end = std::max(end, index[body.findAncestorOpInBlock(*user)]);
        buffers.push_back({r, bytes(r, tokens, context), index[&op], end});
      }

    // The lower bound: the most bytes alive at any op.
    peak = 0;
    for (int64_t i = 0; i < int64_t(index.size()); ++i) {
      int64_t live = 0;
      for (const Buffer &b : buffers)
        if (b.begin <= i && i <= b.end)
          live += b.size;
      peak = std::max(peak, live);
    }

    // First fit, largest first; ties by definition order, so the plan is
    // the same on every run.
    std::vector<Buffer *> order;
    for (Buffer &b : buffers)
      order.push_back(&b);
    std::sort(order.begin(), order.end(), [](Buffer *a, Buffer *b) {
      return a->size != b->size ? a->size > b->size : a->begin < b->begin;
    });
    arena = 0;
    std::vector<Buffer *> placed;
    for (Buffer *b : order) {
      std::vector<std::pair<int64_t, int64_t>> taken; // byte ranges in use
      for (Buffer *p : placed)
        if (p->begin <= b->end && b->begin <= p->end)
          taken.push_back({p->offset, p->offset + p->size});
      std::sort(taken.begin(), taken.end());
      int64_t offset = 0;
      for (auto [lo, hi] : taken) {
        if (offset + b->size <= lo)
          break;
        offset = std::max(offset, hi);
      }
      b->offset = offset;
      arena = std::max(arena, offset + b->size);
      placed.push_back(b);
    }

    llvm::DenseMap<Value, int64_t> offsets;
    for (const Buffer &b : buffers)
      offsets[b.value] = b.offset;
    Builder builder(fn.getContext());
    for (Operation &op : body) {
      if (op.getNumResults() == 0 || !llvm::any_of(op.getResults(), inArena))
        continue;
      SmallVector<int64_t> perResult;
      for (Value r : op.getResults())
        perResult.push_back(inArena(r) ? offsets[r] : -1);
      op.setAttr("kiln.arena_offsets", builder.getDenseI64ArrayAttr(perResult));
    }
    fn->setAttr("kiln.arena_bytes", builder.getI64IntegerAttr(arena));
    fn->setAttr("kiln.arena_peak_bytes", builder.getI64IntegerAttr(peak));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (prefillTokens <= 0) {
      module.emitError() << "kiln-plan-buffers: prefill-tokens must be "
                            "positive";
      return signalPassFailure();
    }
    int64_t largest = 0, largestPeak = 0;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (!fn.getBody().hasOneBlock()) {
        fn.emitError() << "kiln-plan-buffers: expects single-block functions";
        return signalPassFailure();
      }
      // The context bounds the tokens, the keys, and so every dimension.
      int64_t context = int64_t(prefillTokens);
      for (Type t : fn.getArgumentTypes())
        if (auto cache = dyn_cast<KVCacheType>(t))
          context = cache.getCapacity();
      int64_t tokens = std::min<int64_t>(prefillTokens, context);
      int64_t arena = 0, peak = 0;
      plan(fn, tokens, context, arena, peak);
      // The most tokens one call may bring: prefill's largest bucket.
      fn->setAttr("kiln.arena_tokens",
                  Builder(&getContext()).getI64IntegerAttr(tokens));
      largest = std::max(largest, arena);
      largestPeak = std::max(largestPeak, peak);
    }
    Builder builder(&getContext());
    module->setAttr("kiln.arena_bytes", builder.getI64IntegerAttr(largest));
    module->setAttr("kiln.arena_peak_bytes",
                    builder.getI64IntegerAttr(largestPeak));
  }
};

} // namespace

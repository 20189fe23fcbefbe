//===- Program.cpp - bind every kernel argument of the decode step --------===//
#include "codegen/Program.h"
#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace kiln {
namespace {

struct Binder {
  KVPoolAttr pool;
  std::string error;

  /// Where a tensor value lives.
  Argument bind(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return {arg.getArgNumber() == 0 ? Region::Tokens : Region::Positions};
    Operation *def = v.getDefiningOp();
    if (auto w = dyn_cast<WeightOp>(def))
      return {Region::Weight, 0, w.getName().str()};
    if (auto p = dyn_cast<PackedWeightOp>(def))
      return {Region::Weight, 0, p.getName().str()};
    auto offsets = def->getAttrOfType<DenseI64ArrayAttr>("kiln.arena_offsets");
    unsigned n = cast<OpResult>(v).getResultNumber();
    if (!offsets || offsets.asArrayRef()[n] < 0) {
      error = "'" + def->getName().getStringRef().str() +
              "' has no arena offset: run kiln-plan-buffers";
      return {Region::Arena};
    }
    return {Region::Arena, offsets.asArrayRef()[n]};
  }

  /// A layer's keys (or values) in the pool.
  Argument cache(int64_t layer, bool values) {
    int64_t offset = layer * pool.getLayerBytes() +
                     (values ? pool.getBlocks() * pool.getBlockBytes() : 0);
    return {Region::Pool, offset};
  }
};

WeightBuffer manifestEntry(Operation *op) {
  WeightBuffer w;
  if (auto weight = dyn_cast<WeightOp>(op)) {
    auto type = weight.getType();
    w.name = weight.getName().str();
    w.sources = {{w.name, {type.getShape().begin(), type.getShape().end()}}};
    w.cols = type.getDimSize(type.getRank() - 1);
    return w;
  }
  auto packed = cast<PackedWeightOp>(op);
  w.name = packed.getName().str();
  w.cols = packed.getType().getDimSize(1);
  for (auto [s, rows] : llvm::zip(packed.getSources(), packed.getRows()))
    w.sources.push_back({cast<StringAttr>(s).str(), {rows, w.cols}});
  if (auto norm = packed.getScaledBy())
    w.scaledBy = norm->str();
  return w;
}

} // namespace

llvm::Expected<Program> buildProgram(ModuleOp module,
                                     const CodegenOptions &opts) {
  auto decode = module.lookupSymbol<func::FuncOp>("decode");
  auto pool = module->getAttrOfType<KVPoolAttr>("kiln.kv_pool");
  auto arena = decode ? decode->getAttrOfType<IntegerAttr>("kiln.arena_bytes")
                      : IntegerAttr();
  if (!decode || !pool || !arena)
    return llvm::createStringError(
        "the module needs @decode with the kiln pipeline's plans (KV pool, "
        "arena): compile it with the fusion pipeline");
  auto kernels = emitCudaKernels(decode, opts);
  if (!kernels)
    return kernels.takeError();

  Program p;
  auto cache = cast<KVCacheType>(decode.getArgumentTypes()[2]);
  p.maxPositions = cache.getCapacity();
  p.arenaBytes = arena.getInt();
  p.poolBytes = pool.getBytes();
  p.poolBlocks = pool.getBlocks();
  p.blockSize = pool.getBlockSize();
  llvm::StringMap<int> index;
  for (const CudaKernel &k : *kernels) {
    index[k.kernel] = int(p.kernels.size());
    p.kernels.push_back(
        {k.kernel, k.entry, k.source, k.provenance, int(k.params.size())});
    p.workspaceFloats = std::max(p.workspaceFloats, k.workspaceFloats);
    p.counters = std::max(p.counters, k.counters);
  }

  Binder b{pool, ""};
  llvm::StringMap<bool> seenWeights;
  for (Operation &op : decode.getBody().front()) {
    if (isa<WeightOp, PackedWeightOp>(op)) {
      WeightBuffer w = manifestEntry(&op);
      if (seenWeights.insert({w.name, true}).second)
        p.weights.push_back(std::move(w));
      continue;
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      Argument logits = b.bind(ret.getOperand(0));
      p.decodeLogits = logits.offset;
      p.vocab =
          cast<RankedTensorType>(ret.getOperand(0).getType()).getDimSize(1);
      continue;
    }
    if (!isKernel(&op))
      continue;
    std::string kernel = op.getAttrOfType<StringAttr>("kiln.kernel").str();
    const CudaKernel &k = (*kernels)[index[kernel]];
    Launch l{index[kernel],
             op.getAttrOfType<StringAttr>("kiln.name").str(),
             k.grid,
             k.blockThreads,
             {}};
    if (auto qkv = dyn_cast<FusedQKVOp>(op)) {
      l.args = {b.bind(qkv.getInput()),         b.bind(qkv.getWeight()),
                b.cache(qkv.getLayer(), false), b.cache(qkv.getLayer(), true),
                {Region::BlockTable},           {Region::Positions},
                b.bind(qkv.getQuery())};
    } else if (auto att = dyn_cast<AttentionOp>(op)) {
      auto read = att.getKeys().getDefiningOp<KVReadOp>();
      if (!read || att.getValues().getDefiningOp() != read.getOperation())
        return llvm::createStringError(
            "attention " + l.name +
            " must read its keys and values from one "
            "kiln.kv_read");
      l.args = {b.bind(att.getQuery()),
                b.cache(read.getLayer(), false),
                b.cache(read.getLayer(), true),
                {Region::BlockTable},
                {Region::Positions},
                b.bind(att.getResult()),
                {Region::Workspace},
                {Region::Counters}};
    } else if (auto emb = dyn_cast<EmbeddingOp>(op)) {
      l.args = {b.bind(emb.getTokens()), b.bind(emb.getTable()),
                b.bind(emb.getResult())};
    } else {
      // The GEMVs: x, w (and the residual), then the results.
      for (Value v : op.getOperands())
        l.args.push_back(b.bind(v));
      for (Value r : op.getResults())
        l.args.push_back(b.bind(r));
    }
    if (!b.error.empty())
      return llvm::createStringError(b.error);
    if (l.args.size() != k.params.size())
      return llvm::createStringError(
          "kernel " + kernel + " takes " + std::to_string(k.params.size()) +
          " arguments, the op gives " + std::to_string(l.args.size()));
    p.decode.push_back(std::move(l));
  }
  // Greedy sampling on the device, after the logits.
  CudaKernel argmax = emitArgmax(p.vocab);
  p.decode.push_back(
      {int(p.kernels.size()),
       "sampling.argmax",
       argmax.grid,
       argmax.blockThreads,
       {Argument(Region::Arena, p.decodeLogits), Argument(Region::Sampled)}});
  p.kernels.push_back({argmax.kernel, argmax.entry, argmax.source,
                       argmax.provenance, int(argmax.params.size())});
  return p;
}

} // namespace kiln

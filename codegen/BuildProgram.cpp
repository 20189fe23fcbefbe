//===- BuildProgram.cpp - bind every kernel argument of prefill and decode ===//
#include "codegen/BuildProgram.h"

#include "ir/KilnOps.h"
#include "llvm/Support/FormatVariadic.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace kiln {
namespace {

/// The region of a step input or scratch parameter.
Region regionOf(ParamKind kind) {
  switch (kind) {
  case ParamKind::BlockTable:
    return Region::BlockTable;
  case ParamKind::Positions:
    return Region::Positions;
  case ParamKind::Tokens:
    return Region::Tokens;
  case ParamKind::Workspace:
    return Region::Workspace;
  case ParamKind::Counters:
    return Region::Counters;
  case ParamKind::Count:
    return Region::Count;
  case ParamKind::Sampling:
    return Region::Sampling;
  case ParamKind::History:
    return Region::History;
  case ParamKind::LogitBias:
    return Region::LogitBias;
  case ParamKind::RowSequence:
    return Region::RowSequence;
  case ParamKind::Dequantized:
    return Region::Dequantized;
  default: // activations, weights and caches are bound by the op
    return Region::Arena;
  }
}

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

  /// A layer's keys (or values; or their scales) in the pool.
  Argument cache(int64_t layer, bool values, bool scales = false) {
    return {Region::Pool, pool.getOffset(layer, values, scales)};
  }
};

WeightBuffer manifestEntry(Operation *op) {
  WeightBuffer w;
  if (auto weight = dyn_cast<WeightOp>(op)) {
    auto type = weight.getType();
    w.name = weight.getName().str();
    w.sources = {{w.name, {type.getShape().begin(), type.getShape().end()}}};
    if (ShardAttr shard = weight.getShardAttr()) {
      w.sources[0].shardAxis = shard.getAxis();
      w.sources[0].shardParts = shard.getParts();
    }
    w.cols = type.getDimSize(type.getRank() - 1);
    w.quant = weightQuant(type);
    return w;
  }
  auto packed = cast<PackedWeightOp>(op);
  w.quant = weightQuant(packed.getType());
  w.name = packed.getName().str();
  w.cols = packed.getType().getDimSize(1);
  auto parts = packed.getShardParts();
  for (auto [i, s] : llvm::enumerate(packed.getSources()))
    w.sources.push_back({cast<StringAttr>(s).str(),
                         {packed.getRows()[i], w.cols},
                         0,
                         parts ? (*parts)[i] : 1});
  if (auto norm = packed.getScaledBy())
    w.scaledBy = norm->str();
  return w;
}

/// The launches of function `fn` for `tokens` rows, each argument bound.
class LaunchBuilder {
public:
  LaunchBuilder(Program &p, KVPoolAttr pool, const llvm::StringMap<int> &index,
                const std::vector<CudaKernel> &kernels)
      : p(p), b{pool, ""}, index(index), kernels(kernels) {}

  /// The launches of `fn` for `tokens` rows: one sequence's (a prefill or
  /// decode), or with `batch` one token each of `tokens` sequences (from
  /// @prefill, with the batched decode attention). A plan with knobs of
  /// its own runs the kernels named with `suffix` where there are such,
  /// and its GEMMs with algorithm `gemmAlgo` (GemmShape::algo); `quant`
  /// says how its quantized weights' matmuls multiply (QuantGemm).
  llvm::Expected<std::vector<Launch>>
  build(func::FuncOp fn, int64_t tokens, int64_t &logits, bool batch = false,
        const std::string &suffix = "", int gemmAlgo = -1,
        QuantGemm quant = QuantGemm::Quantized) {
    std::vector<Launch> out;
    // The LM head: the op whose result the function returns.
    Operation *head = nullptr;
    if (auto ret = dyn_cast<func::ReturnOp>(fn.getBody().front().back()))
      head = ret.getOperand(0).getDefiningOp();
    for (Operation &op : fn.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        logits = b.bind(ret.getOperand(0)).offset;
        continue;
      }
      if (auto reduce = dyn_cast<AllReduceOp>(op)) {
        Launch l{kAllReduce, "all_reduce", {1, 1, 1}, 0, {}};
        l.args.push_back(b.bind(reduce.getInput()));
        if (reduce.getResidual())
          l.args.push_back(b.bind(reduce.getResidual()));
        l.args.push_back(b.bind(reduce.getResult()));
        l.collectiveCols = reduce.getType().getDimSize(1);
        out.push_back(std::move(l));
        continue;
      }
      if (auto gather = dyn_cast<AllGatherOp>(op)) {
        Launch l{kAllGather, "all_gather", {1, 1, 1}, 0, {}};
        l.args = {b.bind(gather.getInput()), b.bind(gather.getResult())};
        l.collectiveCols =
            cast<RankedTensorType>(gather.getInput().getType()).getDimSize(1);
        out.push_back(std::move(l));
        continue;
      }
      if (!isa<KernelOpInterface>(op))
        continue;
      // The plan's variant of a kernel, where its knobs made one.
      auto variant = [&](std::string kernel) {
        if (!suffix.empty() && index.count(kernel + suffix))
          kernel += suffix;
        return kernel;
      };
      auto kernelName = op.getAttrOfType<StringAttr>("kiln.kernel");
      auto provenance = op.getAttrOfType<StringAttr>("kiln.name");
      if (!kernelName || !provenance)
        return llvm::createStringError(
            "'" + op.getName().getStringRef().str() +
            "' has no kiln.kernel and kiln.name: run the kiln pipeline first");
      std::string base = kernelName.str();
      std::string kernel =
          variant(batch && hasBatchKernel(cast<KernelOpInterface>(op))
                      ? base + kBatchSuffix
                      : base);
      if (!index.count(kernel))
        return llvm::createStringError("no kernel " + kernel + " for " +
                                       provenance.str());
      const CudaKernel &k = kernels[index.lookup(kernel)];
      if (k.afterGemm) {
        // A batch plan is a CUDA graph: its GEMMs multiply every row. A
        // prefill's multiply its real rows; its LM head, when sampling
        // alone reads it, the last of them (a second pair of launches).
        bool lastToo =
            !batch && &op == head && index.count(base + kLastRowSuffix);
        LaunchWhen when = lastToo ? LaunchWhen::EveryLogit : LaunchWhen::Always;
        if (llvm::Error e = matmul(op, k, base, tokens,
                                   batch ? GemmRows::All : GemmRows::Count,
                                   when, variant, gemmAlgo, quant, out))
          return std::move(e);
        if (lastToo)
          if (llvm::Error e = matmul(
                  op, kernels[index.lookup(variant(base + kLastRowSuffix))],
                  base, tokens, GemmRows::Last, LaunchWhen::LastLogit, variant,
                  gemmAlgo, quant, out))
            return std::move(e);
        continue;
      }
      if (llvm::Error e = launch(op, k, tokens, LaunchWhen::Always, out))
        return std::move(e);
    }
    // Sampling on the device, after the logits: the last row of a prefill,
    // every row of a batch.
    const CudaKernel &sample = kernels[index.lookup("sampling.sample")];
    Launch l{index.lookup("sampling.sample"),
             "sampling.sample",
             {batch ? tokens : 1, 1, 1},
             sample.blockThreads,
             {Argument(Region::Arena, logits), Argument(Region::Count),
              Argument(Region::Sampling), Argument(Region::Tokens),
              Argument(Region::RowSequence), Argument(Region::History),
              Argument(Region::LogitBias), Argument(Region::Workspace),
              Argument(Region::Sampled)}};
    p.workspaceFloats =
        std::max(p.workspaceFloats, l.grid[0] * sample.workspacePerBlock);
    out.push_back(std::move(l));
    return out;
  }

private:
  /// Appends the launch of kernel `k` for `op` over `tokens` rows.
  llvm::Error launch(Operation &op, const CudaKernel &k, int64_t tokens,
                     LaunchWhen when, std::vector<Launch> &out) {
    Launch l{index.lookup(k.kernel),
             op.getAttrOfType<StringAttr>("kiln.name").str(), k.gridFor(tokens),
             k.blockThreads, arguments(op, k)};
    l.when = when;
    int64_t blocks = l.grid[0] * l.grid[1] * l.grid[2];
    p.workspaceFloats =
        std::max(p.workspaceFloats, blocks * k.workspacePerBlock);
    p.counters = std::max(p.counters, blocks * k.countersPerBlock);
    if (!b.error.empty())
      return llvm::createStringError(b.error);
    out.push_back(std::move(l));
    return llvm::Error::success();
  }

  /// The launches of a prefill matmul `op` whose kernel `epilogue` follows
  /// a GEMM of its first two operands over the rows `rows` says: the GEMM
  /// (cuBLAS's, or kiln's own with gemm-algo=-2; a quantized weight's as
  /// `quant` says: the quantized GEMM, the weight dequantized and cuBLAS's,
  /// or an fp8 weight's FP8 GEMM), then the epilogue, unless the GEMM
  /// writes the op's result itself (gemmWritesResult: D = x . W^T +
  /// residual in one rounding, as the epilogue would).
  llvm::Error matmul(Operation &op, const CudaKernel &epilogue,
                     const std::string &base, int64_t tokens, GemmRows rows,
                     LaunchWhen when,
                     llvm::function_ref<std::string(std::string)> variant,
                     int gemmAlgo, QuantGemm quant, std::vector<Launch> &out) {
    std::string name = op.getAttrOfType<StringAttr>("kiln.name").str();
    // A quantized LM head (a prefill's, whose launches depend on the
    // logits read back) runs on the quantized GEMM whatever the plan: its
    // last row by decode's loop, all rows only when every logit is read
    // back (kiln eval), where dequantizing it would grow the scratch from
    // the largest projection to the head (250 MiB for a 7B).
    if (hasQuantizedWeight(&op))
      quant = when != LaunchWhen::Always ? QuantGemm::Quantized
                                         : quantGemmOf(&op, quant);
    bool dequantize = hasQuantizedWeight(&op) && quant != QuantGemm::Quantized;
    // A dequantized weight's GEMM (or the FP8 GEMM) adds o_proj's and
    // down_proj's residual itself, as an f16 weight's does.
    bool direct = gemmWritesResult(&op, dequantize);
    std::string last = rows == GemmRows::Last ? kLastRowSuffix : "";
    // kiln's own GEMM `gemm` into the workspace, C[tokens, n] f32, for
    // the epilogue (it reads the real row count itself).
    auto intoWorkspace = [&](const CudaKernel &g) {
      int64_t n =
          cast<RankedTensorType>(op.getOperand(1).getType()).getDimSize(0);
      p.workspaceFloats = std::max(p.workspaceFloats, tokens * n);
      Launch l{index.lookup(g.kernel),
               name,
               g.gridFor(tokens),
               g.blockThreads,
               {b.bind(op.getOperand(0)), b.bind(op.getOperand(1)),
                Argument(Region::Workspace), Argument(Region::Count)}};
      l.when = when;
      out.push_back(std::move(l));
    };
    // cuBLAS's D[tokens, n] = x . W^T, W the weight `w` (dense f16): into
    // the workspace (f32, for the epilogue), or the op's result (+ C, the
    // residual: cuBLASLt with beta 1).
    // The FP8 GEMM's A is the quantized activation `a`, its scales at the
    // end of the arguments (`scales`: A's, then W's).
    auto cublas = [&](Argument w, int algo, std::optional<Argument> a = {},
                      std::vector<Argument> scales = {}) -> llvm::Error {
      auto type = cast<RankedTensorType>(op.getOperand(1).getType());
      GemmShape shape{tokens, type.getDimSize(0), type.getDimSize(1), algo};
      shape.rows = rows;
      shape.fp8 = a.has_value();
      std::vector<Argument> args = {a ? *a : b.bind(op.getOperand(0)),
                                    std::move(w)};
      if (direct) {
        Value residual = linearShape(&op)->residual;
        shape.beta = residual ? 1 : 0;
        shape.f16Out = cast<RankedTensorType>(op.getResult(0).getType())
                           .getElementType()
                           .isF16();
        args.push_back(b.bind(op.getResult(0)));
        if (residual)
          args.push_back(b.bind(residual));
      } else {
        p.workspaceFloats = std::max(p.workspaceFloats, shape.m * shape.n);
        args.push_back(Argument(Region::Workspace));
      }
      llvm::append_range(args, scales);
      if (!b.error.empty())
        return llvm::createStringError(b.error);
      Launch l{kGemm, name, {1, 1, 1}, 0, std::move(args), shape};
      l.when = when;
      out.push_back(std::move(l));
      return llvm::Error::success();
    };
    // A kernel of this op's named `kernel`, launched with `args`.
    auto helper = [&](const std::string &kernel, std::array<int64_t, 3> grid,
                      std::vector<Argument> args) -> llvm::Error {
      if (!index.count(kernel))
        return llvm::createStringError("no kernel " + kernel + " for " + name);
      const CudaKernel &k = kernels[index.lookup(kernel)];
      if (!b.error.empty())
        return llvm::createStringError(b.error);
      Launch l{index.lookup(kernel), name, grid[0] ? grid : k.grid,
               k.blockThreads, std::move(args)};
      l.when = when;
      out.push_back(std::move(l));
      return llvm::Error::success();
    };
    if (dequantize && quant == QuantGemm::Fp8) {
      // W's codes row-major and its row scales, the activation's codes and
      // scales (Fp8GemmLayout, in Region::Dequantized), then cuBLASLt's
      // FP8 GEMM of them.
      auto w = cast<RankedTensorType>(op.getOperand(1).getType());
      Fp8GemmLayout at =
          fp8GemmLayout(w.getDimSize(0), w.getDimSize(1), tokens);
      p.dequantizedHalves = std::max(p.dequantizedHalves, (at.bytes + 1) / 2);
      auto region = [](int64_t offset) {
        return Argument(Region::Dequantized, offset);
      };
      Value weight = op.getOperand(1);
      if (llvm::Error e =
              helper(base + kFp8WeightSuffix, {0, 0, 0},
                     {b.bind(weight), region(0), region(at.wScales)}))
        return e;
      const std::string quantizer = base + kQuantizeActivationSuffix;
      if (llvm::Error e = helper(
              quantizer,
              index.count(quantizer)
                  ? kernels[index.lookup(quantizer)].gridFor(tokens)
                  : std::array<int64_t, 3>{0, 0, 0},
              {b.bind(op.getOperand(0)), b.bind(weight),
               Argument(Region::Count), region(at.a), region(at.aScales)}))
        return e;
      if (llvm::Error e =
              cublas(region(0), gemmAlgo == kSmallGemmAlgo ? -1 : gemmAlgo,
                     region(at.a), {region(at.aScales), region(at.wScales)}))
        return e;
    } else if (dequantize) {
      // W[n, k] f16 into Region::Dequantized, then cuBLAS's GEMM of it (of
      // the plan's algorithm, cuBLAS's own choice for kiln's GEMM's -2).
      auto w = cast<RankedTensorType>(op.getOperand(1).getType());
      p.dequantizedHalves =
          std::max(p.dequantizedHalves, w.getDimSize(0) * w.getDimSize(1));
      if (llvm::Error e =
              helper(base + kDequantizeSuffix, {0, 0, 0},
                     {b.bind(op.getOperand(1)), Argument(Region::Dequantized)}))
        return e;
      if (llvm::Error e = cublas(Argument(Region::Dequantized),
                                 gemmAlgo == kSmallGemmAlgo ? -1 : gemmAlgo))
        return e;
    } else if (hasQuantizedWeight(&op)) {
      // The quantized GEMM, whatever the plan's gemm-algo.
      std::string gemm = base + kQuantGemmSuffix + last;
      if (!index.count(gemm))
        return llvm::createStringError("no kernel " + gemm + " for " + name);
      intoWorkspace(kernels[index.lookup(gemm)]);
    } else if (gemmAlgo == kSmallGemmAlgo) {
      std::string gemm = variant(base + kSmallGemmSuffix + last);
      if (!index.count(gemm))
        return llvm::createStringError("no kernel " + gemm +
                                       " for gemm-algo=-2");
      const CudaKernel &g = kernels[index.lookup(gemm)];
      if (direct) {
        if (llvm::Error e = launch(op, g, tokens, when, out))
          return e;
      } else {
        intoWorkspace(g);
      }
    } else if (llvm::Error e = cublas(b.bind(op.getOperand(1)), gemmAlgo)) {
      return e;
    }
    if (direct)
      return llvm::Error::success();
    return launch(op, epilogue, tokens, when, out);
  }

  /// The arguments of `op`'s kernel, in its parameter order, bound by each
  /// parameter's kind: activations to the op's tensors in the arena (its
  /// operands that kernels produced, then its results, in order), weights
  /// to its weight operands, caches to its cache layer in the pool, the
  /// rest to their regions. Every tensor of the op must be used.
  std::vector<Argument> arguments(Operation &op, const CudaKernel &k) {
    SmallVector<Value> activations, weights;
    for (Value v : op.getOperands()) {
      Operation *def = v.getDefiningOp();
      if (isa_and_nonnull<WeightOp, PackedWeightOp>(def))
        weights.push_back(v);
      else if (def && !isa<KVReadOp>(def) && isa<RankedTensorType>(v.getType()))
        activations.push_back(v); // not a step input, not the cache
    }
    for (Value r : op.getResults())
      if (isa<RankedTensorType>(r.getType()))
        activations.push_back(r);
    std::optional<int64_t> layer = cast<KernelOpInterface>(op).getCacheLayer();
    std::vector<Argument> args;
    size_t activation = 0, weight = 0;
    for (const KernelParam &param : k.params) {
      switch (param.kind) {
      case ParamKind::Activation:
        if (activation < activations.size())
          args.push_back(b.bind(activations[activation]));
        ++activation;
        break;
      case ParamKind::Weight:
        if (weight < weights.size())
          args.push_back(b.bind(weights[weight]));
        ++weight;
        break;
      case ParamKind::KCache:
      case ParamKind::VCache:
      case ParamKind::KScales:
      case ParamKind::VScales:
        if (!layer) {
          b.error = "kernel " + k.kernel + " reads a cache, '" +
                    op.getName().getStringRef().str() + "' names no layer";
          return {};
        }
        args.push_back(b.cache(*layer,
                               param.kind == ParamKind::VCache ||
                                   param.kind == ParamKind::VScales,
                               param.kind == ParamKind::KScales ||
                                   param.kind == ParamKind::VScales));
        break;
      default:
        args.push_back({regionOf(param.kind)});
      }
    }
    // A GEMM's epilogue leaves the weight to the GEMM before it.
    size_t usedWeights = k.afterGemm ? weights.size() : weight;
    if (activation != activations.size() || weight > weights.size() ||
        usedWeights != weights.size())
      b.error = "kernel " + k.kernel + " takes " + std::to_string(activation) +
                " activations and " + std::to_string(weight) + " weights, '" +
                op.getName().getStringRef().str() + "' has " +
                std::to_string(activations.size()) + " and " +
                std::to_string(weights.size());
    return args;
  }

  Program &p;
  Binder b;
  const llvm::StringMap<int> &index;
  const std::vector<CudaKernel> &kernels;
};

/// Every weight buffer `fn` reads, once.
void collectManifest(func::FuncOp fn, Program &p) {
  for (Operation &op : fn.getBody().front()) {
    if (!isa<WeightOp, PackedWeightOp>(op))
      continue;
    WeightBuffer w = manifestEntry(&op);
    if (llvm::none_of(p.weights, [&](auto &e) { return e.name == w.name; }))
      p.weights.push_back(std::move(w));
  }
}

} // namespace

std::vector<int64_t> prefillBuckets(const CodegenOptions &opts,
                                    int64_t maxTokens) {
  std::vector<int64_t> buckets;
  for (int64_t b : opts.prefillBuckets)
    if (b > 0 && b <= maxTokens)
      buckets.push_back(b);
  if (opts.prefillBuckets.empty())
    for (int64_t b = 16; b < maxTokens; b *= 2)
      buckets.push_back(b);
  // The largest prefill the arena holds always has a plan; longer prompts
  // run in chunks of it.
  buckets.push_back(maxTokens);
  llvm::sort(buckets);
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
  return buckets;
}

/// A kernel's source with its own names (kernel and entry) blanked: equal
/// for two kernels that differ in name only.
std::string blankNames(const CudaKernel &k) {
  std::string code = k.source;
  for (const std::string &name : {k.entry, k.kernel})
    for (size_t at = code.find(name); at != std::string::npos;
         at = code.find(name, at + 1))
      code.replace(at, name.size(), "@");
  return code;
}

/// Removes the kernels no launch runs (those every plan replaced with a
/// tuned variant), renumbering the launches'.
void dropUnusedKernels(Program &p) {
  std::vector<std::vector<Launch> *> plans = {&p.decode};
  for (auto *list : {&p.prefill, &p.batches})
    for (StepPlan &plan : *list)
      plans.push_back(&plan.launches);
  std::vector<int> renumber(p.kernels.size(), -1);
  for (auto *plan : plans)
    for (const Launch &l : *plan)
      if (runsKernel(l.kernel))
        renumber[l.kernel] = 0;
  std::vector<KernelCode> kept;
  for (size_t i = 0; i < p.kernels.size(); ++i)
    if (renumber[i] == 0) {
      renumber[i] = int(kept.size());
      kept.push_back(std::move(p.kernels[i]));
    }
  p.kernels = std::move(kept);
  for (auto *plan : plans)
    for (Launch &l : *plan)
      if (runsKernel(l.kernel))
        l.kernel = renumber[l.kernel];
}

std::vector<int64_t> batchBuckets(int64_t sequences) {
  std::vector<int64_t> buckets;
  for (int64_t b = 2; b < sequences; b *= 2)
    buckets.push_back(b);
  if (sequences > 1)
    buckets.push_back(sequences);
  return buckets;
}

llvm::Expected<Program> buildProgram(ModuleOp module,
                                     const CodegenOptions &opts) {
  if (auto ranks = module->getAttrOfType<IntegerAttr>("kiln.tensor_parallel"))
    return llvm::createStringError(llvm::formatv(
        "the plans of a module split over {0} ranks (kiln.all_reduce, "
        "kiln.all_gather, sliced weights) are not built yet for bundles, the "
        "cuda device or the cost model: --tp {0} shows the ranks' IR "
        "(--emit=mlir) and their sizes (--stats), and runs on emu (kiln run "
        "--tp {0} --device emu)",
        ranks.getInt()));
  return buildRankProgram(module, opts);
}

llvm::Expected<Program> buildRankProgram(ModuleOp module,
                                         const CodegenOptions &opts) {
  auto prefill = module.lookupSymbol<func::FuncOp>("prefill");
  auto decode = module.lookupSymbol<func::FuncOp>("decode");
  auto pool = module->getAttrOfType<KVPoolAttr>("kiln.kv_pool");
  auto arenaOf = [](func::FuncOp fn) {
    return fn ? fn->getAttrOfType<IntegerAttr>("kiln.arena_bytes")
              : IntegerAttr();
  };
  auto missing = [] {
    return llvm::createStringError(
        "the module needs @prefill and @decode with the kiln pipeline's plans "
        "(KV pool, arena): compile it with the fusion pipeline");
  };
  if (!prefill || !decode)
    return missing();
  // Kernels first: an op without a template is the more useful complaint.
  std::vector<CudaKernel> kernels;
  for (func::FuncOp fn : {prefill, decode}) {
    auto emitted = emitCudaKernels(fn, opts);
    if (!emitted)
      return emitted.takeError();
    llvm::append_range(kernels, *emitted);
    auto quantized = emitQuantGemms(fn, opts);
    if (!quantized)
      return quantized.takeError();
    llvm::append_range(kernels, *quantized);
  }
  // The dequantize kernels of the plans that run cuBLAS on quantized
  // weights (those no plan runs are dropped below).
  auto dequantizers = emitDequantizeWeights(prefill, opts);
  if (!dequantizers)
    return dequantizers.takeError();
  llvm::append_range(kernels, *dequantizers);
  auto maxTokens = prefill->getAttrOfType<IntegerAttr>("kiln.arena_tokens");
  if (!pool || !arenaOf(prefill) || !arenaOf(decode) || !maxTokens)
    return missing();
  // Batched decode: @prefill's attention ops, a row per sequence.
  if (pool.getSequences() > 1) {
    auto batch = emitBatchKernels(prefill, opts);
    if (!batch)
      return batch.takeError();
    llvm::append_range(kernels, *batch);
  }
  // kiln's own GEMMs, for the plans that run them instead of cuBLAS's
  // (once per suffix: a batch and a prefill variant may share knobs).
  llvm::StringSet<> smallGemms;
  auto addSmallGemms = [&](const CodegenOptions &o) -> llvm::Error {
    if (o.gemmAlgo != kSmallGemmAlgo ||
        !smallGemms.insert(o.kernelSuffix).second)
      return llvm::Error::success();
    auto made = emitSmallGemms(prefill, o);
    if (!made)
      return made.takeError();
    llvm::append_range(kernels, *made);
    return llvm::Error::success();
  };
  if (llvm::Error e = addSmallGemms(opts))
    return std::move(e);
  // Decode's GEMMs before an epilogue (a fused_qkv into a quantized cache
  // with f16 weights) are kiln's own, a row a tile: the decode plan is a
  // CUDA graph of kiln's kernels only.
  CodegenOptions decodeGemm = opts;
  decodeGemm.gemmAlgo = kSmallGemmAlgo;
  decodeGemm.gemmTile = 1;
  auto decodeGemms = emitSmallGemms(decode, decodeGemm);
  if (!decodeGemms)
    return decodeGemms.takeError();
  llvm::append_range(kernels, *decodeGemms);
  // The LM head's kernels for a prefill whose logits are not read back:
  // the last real row's (once per suffix).
  llvm::StringSet<> lastRows;
  auto addLastRow = [&](const CodegenOptions &o) -> llvm::Error {
    auto ret = dyn_cast<func::ReturnOp>(prefill.getBody().front().back());
    auto head = ret ? dyn_cast_or_null<KernelOpInterface>(
                          ret.getOperand(0).getDefiningOp())
                    : nullptr;
    if (!head ||
        head.getKernelTemplate(Phase::prefill) !=
            KernelTemplate::linear_epilogue ||
        !lastRows.insert(o.kernelSuffix).second)
      return llvm::Error::success();
    auto epilogue = emitLinearEpilogue(head, o, /*lastRow=*/true);
    if (!epilogue)
      return epilogue.takeError();
    kernels.push_back(std::move(*epilogue));
    if (hasQuantizedWeight(head)) {
      // The quantized last-row GEMM, once: every plan's (matmul's lookup
      // takes no knobs' suffix).
      if (!o.kernelSuffix.empty())
        return llvm::Error::success();
      auto gemm = emitQuantGemm(head, o, Phase::decode, /*fused=*/false,
                                /*lastRow=*/true);
      if (!gemm)
        return gemm.takeError();
      kernels.push_back(std::move(*gemm));
    } else if (o.gemmAlgo == kSmallGemmAlgo) {
      auto gemm = emitSmallGemm(head, o, /*lastRow=*/true);
      if (!gemm)
        return gemm.takeError();
      kernels.push_back(std::move(*gemm));
    }
    return llvm::Error::success();
  };
  if (llvm::Error e = addLastRow(opts))
    return std::move(e);
  // Plans with knobs of their own (the tuner's winners) run variants of
  // the kernels the knobs change, named with "@" and the knobs.
  std::vector<int64_t> buckets = prefillBuckets(opts, maxTokens.getInt());
  std::map<int64_t, std::string> prefillSuffix, batchSuffix; // by rows
  llvm::StringSet<> emitted;
  auto variant = [&](const std::string &knobs,
                     bool batch) -> llvm::Expected<std::string> {
    CodegenOptions v = opts;
    if (llvm::Error e = parseCodegenOptions(knobs, v))
      return llvm::createStringError("tuned knobs '" + knobs +
                                     "': " + toString(std::move(e)));
    v.kernelSuffix = "@" + knobs;
    if (!emitted.insert((batch ? "batch" : "prefill") + v.kernelSuffix).second)
      return v.kernelSuffix;
    auto made =
        batch ? emitBatchKernels(prefill, v) : emitCudaKernels(prefill, v);
    if (!made)
      return made.takeError();
    // Every kernel: those the knobs did not change are aliased to the base
    // kernels below.
    for (CudaKernel &k : *made)
      kernels.push_back(std::move(k));
    if (llvm::Error e = addSmallGemms(v))
      return std::move(e);
    if (!batch)
      if (llvm::Error e = addLastRow(v))
        return std::move(e);
    return v.kernelSuffix;
  };
  for (int64_t rows : buckets)
    if (auto it = opts.prefillKnobs.find(rows);
        it != opts.prefillKnobs.end() && !it->second.empty()) {
      auto suffix = variant(it->second, false);
      if (!suffix)
        return suffix.takeError();
      prefillSuffix[rows] = *suffix;
    }
  for (int64_t rows : batchBuckets(pool.getSequences()))
    if (auto it = opts.batchKnobs.find(rows);
        it != opts.batchKnobs.end() && !it->second.empty()) {
      auto suffix = variant(it->second, true);
      if (!suffix)
        return suffix.takeError();
      batchSuffix[rows] = *suffix;
    }
  auto vocab = cast<RankedTensorType>(decode.getResultTypes()[0]);
  kernels.push_back(emitSampler(vocab.getDimSize(1)));

  Program p;
  auto cache = cast<KVCacheType>(decode.getArgumentTypes()[2]);
  p.vocab = vocab.getDimSize(1);
  p.maxPositions = cache.getCapacity();
  // One arena: prefill and decode never run at once.
  p.arenaBytes = std::max(arenaOf(prefill).getInt(), arenaOf(decode).getInt());
  p.poolBytes = pool.getBytes();
  p.poolBlocks = pool.getBlocks();
  p.blockSize = pool.getBlockSize();
  p.sequences = pool.getSequences();
  if (auto ranks = module->getAttrOfType<IntegerAttr>("kiln.tensor_parallel"))
    p.ranks = ranks.getInt();
  p.tableBlocks = pool.getTableBlocks();
  mlir::Type stored = cache.getElementType();
  p.kvDtype = isa<Float8E4M3FNType>(stored) ? "fp8"
              : stored.isInteger(8)         ? "int8"
              : stored.isF32()              ? "f32"
              : stored.isBF16()             ? "bf16"
                                            : "f16";
  if (p.sequences > maxTokens.getInt())
    return llvm::createStringError(
        "a batch of " + std::to_string(p.sequences) +
        " sequences does not fit the arena's " +
        std::to_string(maxTokens.getInt()) +
        " rows: raise --prefill-tokens or lower --max-batch");
  // A variant whose code is another kernel's (its knobs changed nothing in
  // it) is that kernel, under both names.
  llvm::StringMap<std::string> alias;
  std::map<std::string, std::string> byCode; // code, names blanked -> name
  std::vector<CudaKernel> unique;
  for (CudaKernel &k : kernels) {
    bool isVariant = k.kernel.find('@') != std::string::npos;
    auto [it, fresh] = byCode.emplace(blankNames(k), k.kernel);
    if (fresh || !isVariant)
      unique.push_back(std::move(k));
    else
      alias[k.kernel] = it->second;
  }
  kernels = std::move(unique);
  llvm::StringMap<int> index;
  for (const CudaKernel &k : kernels) {
    index[k.kernel] = int(p.kernels.size());
    p.kernels.push_back(kernelCode(k));
    p.workspaceFloats = std::max(p.workspaceFloats, k.workspaceFloats);
    p.counters = std::max(p.counters, k.counters);
  }
  for (const auto &a : alias)
    index[a.first()] = index.lookup(a.second);
  collectManifest(prefill, p);
  collectManifest(decode, p);

  LaunchBuilder builder(p, pool, index, kernels);
  auto step =
      builder.build(decode, 1, p.decodeLogits, false, "", kSmallGemmAlgo);
  if (!step)
    return step.takeError();
  p.decode = std::move(*step);
  // A plan's knobs (checked above), else the compile's.
  auto planOptions = [&](const std::map<int64_t, std::string> &knobs,
                         int64_t rows) {
    CodegenOptions v = opts;
    if (auto it = knobs.find(rows); it != knobs.end())
      llvm::consumeError(parseCodegenOptions(it->second, v));
    return v;
  };
  // How a plan of `rows` rows multiplies its quantized weights
  // (quant-gemm; by default dequantized for cuBLAS from kDequantizeRows
  // rows on).
  auto quant = [](const CodegenOptions &v, int64_t rows) {
    return v.quantGemm == 2 ? QuantGemm::Fp8
           : v.quantGemm == 1 || (v.quantGemm == -1 && rows >= kDequantizeRows)
               ? QuantGemm::Dequantized
               : QuantGemm::Quantized;
  };
  for (int64_t tokens : buckets) {
    CodegenOptions v = planOptions(opts.prefillKnobs, tokens);
    auto launches =
        builder.build(prefill, tokens, p.prefillLogits, false,
                      prefillSuffix[tokens], v.gemmAlgo, quant(v, tokens));
    if (!launches)
      return launches.takeError();
    p.prefill.push_back({tokens, std::move(*launches)});
  }
  for (int64_t rows : batchBuckets(p.sequences)) {
    CodegenOptions v = planOptions(opts.batchKnobs, rows);
    auto launches =
        builder.build(prefill, rows, p.prefillLogits, true, batchSuffix[rows],
                      v.gemmAlgo, quant(v, rows));
    if (!launches)
      return launches.takeError();
    p.batches.push_back({rows, std::move(*launches)});
  }
  dropUnusedKernels(p);
  return p;
}

} // namespace kiln

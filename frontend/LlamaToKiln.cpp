//===- LlamaToKiln.cpp - build kiln IR for a Llama 2 model ----------------===//
//
// One decoder layer, as Meta's llama/model.py and Hugging Face's
// modeling_llama.py compute it (shapes per the KilnOps.td legend):
//
//   x  = rms_norm(h, input_layernorm)              [S, D]
//   q  = rope(x·Wqᵀ)  k = rope(x·Wkᵀ)  v = x·Wvᵀ    [S, H*Dh] [S, Hkv*Dh]
//   cache[layer, positions] = k, v
//   K, V = cache[layer, 0 .. max(positions)]       [T, Hkv*Dh]
//   a  = softmax(mask(q·Kᵀ / sqrt(Dh))) · V         [S, H*Dh]
//   h  = h + a·Woᵀ
//   x  = rms_norm(h, post_attention_layernorm)
//   h  = h + (silu(x·Wgᵀ) * x·Wuᵀ)·Wdᵀ               [S, D]
//
//===----------------------------------------------------------------------===//
#include "frontend/LlamaToKiln.h"
#include "ir/KilnOps.h"
#include "runtime/QuantLayout.h"

#include "absl/strings/str_cat.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>
#include <map>

using namespace mlir;

namespace kiln {
namespace {

class LlamaBuilder {
public:
  LlamaBuilder(MLIRContext &ctx, const LlamaConfig &c,
               const FrontendOptions &opts)
      : b(&ctx), c(c), opts(opts) {
    if (opts.dtype == "f32")
      et = b.getF32Type();
    else if (opts.dtype == "bf16")
      et = b.getBF16Type();
    else
      et = b.getF16Type();
    Type stored = opts.kvDtype == "fp8"    ? b.getType<Float8E4M3FNType>()
                  : opts.kvDtype == "int8" ? b.getI8Type()
                                           : et;
    // --max-context may pass max_position_embeddings where RoPE is scaled
    // (optionsFor checks how far).
    cacheType = KVCacheType::get(&ctx, c.numLayers,
                                 std::max(c.maxPositions, opts.maxContext),
                                 c.numKVHeads, c.headDim(), stored);
  }

  /// Adds `func.func @name` over `seq` new tokens (dynamic for prefill),
  /// marked with its phase (codegen picks each op's template by it).
  void buildFunction(ModuleOp module, StringRef name, int64_t seq,
                     Phase phase) {
    auto tokensType = RankedTensorType::get({seq}, b.getI32Type());
    auto logitsType = RankedTensorType::get({seq, c.vocabSize}, b.getF32Type());
    auto fnType = b.getFunctionType({tokensType, tokensType, cacheType},
                                    {logitsType, cacheType});
    b.setInsertionPointToEnd(module.getBody());
    auto fn = b.create<func::FuncOp>(loc("model"), name, fnType);
    fn->setAttr("kiln.phase", PhaseAttr::get(b.getContext(), phase));
    b.setInsertionPointToStart(fn.addEntryBlock());
    Value tokens = fn.getArgument(0); // [S] i32
    positions = fn.getArgument(1);    // [S] i32
    Value cache = fn.getArgument(2);
    this->seq = seq;

    Value table =
        weight("model.embed_tokens.weight", {c.vocabSize, c.hiddenSize});
    Value h = b.create<EmbeddingOp>(loc("model.embed_tokens"),
                                    act(c.hiddenSize), table, tokens);
    for (int64_t l = 0; l < c.numLayers; ++l)
      h = layer(l, h, cache);
    Value x = rmsNorm("model.norm", h);
    std::string head =
        c.tieWordEmbeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    // A head stored quantized (GGUF's output.weight) keeps its format.
    Attribute headQuant;
    if (auto it = opts.weightFormats.find(head); it != opts.weightFormats.end())
      headQuant = QuantAttr::get(b.getContext(), it->second);
    Value logits = b.create<LogitsOp>(
        loc("lm_head"), logitsType, x,
        weight(head, {c.vocabSize, c.hiddenSize}, headQuant));
    b.create<func::ReturnOp>(loc("model"), ValueRange{logits, cache});
  }

private:
  Location loc(StringRef name) { return NameLoc::get(b.getStringAttr(name)); }

  /// [S, width] activation of the storage type.
  RankedTensorType act(int64_t width, Type elem = {}) {
    return RankedTensorType::get({seq, width}, elem ? elem : et);
  }

  /// A weight of the storage type; `quant` its #kiln.quant, if stored so.
  Value weight(const std::string &name, ArrayRef<int64_t> shape,
               Attribute quant = {}) {
    return b.create<WeightOp>(
        loc(name), RankedTensorType::get(shape, et, quant), name, ShardAttr());
  }

  Value rmsNorm(const std::string &module, Value x) {
    Value w = weight(module + ".weight", {c.hiddenSize});
    return b.create<RMSNormOp>(loc(module), x.getType(), x, w,
                               b.getF64FloatAttr(c.rmsNormEps));
  }

  Value linear(const std::string &module, Value x, int64_t out) {
    int64_t in = cast<RankedTensorType>(x.getType()).getDimSize(1);
    Attribute quant;
    std::string name = module + ".weight";
    if (auto it = opts.weightFormats.find(name); it != opts.weightFormats.end())
      quant = QuantAttr::get(b.getContext(), it->second);
    else if (opts.quantize)
      quant = QuantAttr::get(b.getContext(), *opts.quantize);
    return b.create<LinearOp>(loc(module), act(out), x,
                              weight(name, {out, in}, quant));
  }

  Value layer(int64_t l, Value h, Value &cache) {
    std::string p = absl::StrCat("model.layers.", l, ".");
    std::string attn = p + "self_attn";
    int64_t qWidth = c.numHeads * c.headDim();
    int64_t kvWidth = c.numKVHeads * c.headDim();

    Value x = rmsNorm(p + "input_layernorm", h);
    Value q = linear(attn + ".q_proj", x, qWidth);
    Value k = linear(attn + ".k_proj", x, kvWidth);
    Value v = linear(attn + ".v_proj", x, kvWidth);
    auto layout = RopeLayoutAttr::get(b.getContext(), opts.ropeLayout);
    // --rope-ntk-scale's fixed NTK-aware base; config.json's linear
    // scaling divides the positions, its dynamic one grows the base with
    // the sequence past max_position_embeddings.
    double base = c.ropeTheta;
    if (opts.ropeNtkScale > 0)
      base *= std::pow(opts.ropeNtkScale,
                       double(c.headDim()) / double(c.headDim() - 2));
    auto theta = b.getF64FloatAttr(base);
    FloatAttr positionDivisor;
    if (c.ropeScaling == "linear")
      positionDivisor = b.getF64FloatAttr(c.ropeScalingFactor);
    RopeDynamicAttr dynamic;
    if (c.ropeScaling == "dynamic")
      dynamic = RopeDynamicAttr::get(
          b.getContext(), APFloat(c.ropeScalingFactor), c.maxPositions);
    Location rope = loc(attn + ".rotary_emb");
    q = b.create<RopeOp>(rope, q.getType(), q, positions,
                         b.getI64IntegerAttr(c.numHeads), theta, layout,
                         positionDivisor, dynamic);
    k = b.create<RopeOp>(rope, k.getType(), k, positions,
                         b.getI64IntegerAttr(c.numKVHeads), theta, layout,
                         positionDivisor, dynamic);

    Location at = loc(attn);
    auto layerAttr = b.getI64IntegerAttr(l);
    cache =
        b.create<KVWriteOp>(at, cacheType, k, v, cache, layerAttr, positions,
                            /*rope_theta=*/FloatAttr(),
                            /*rope_layout=*/RopeLayoutAttr(),
                            /*rope_linear=*/FloatAttr(),
                            /*rope_dynamic=*/RopeDynamicAttr());
    auto kvType = RankedTensorType::get({ShapedType::kDynamic, kvWidth}, et);
    auto read =
        b.create<KVReadOp>(at, kvType, kvType, cache, layerAttr, positions);
    auto scoresType = RankedTensorType::get(
        {c.numHeads, seq, ShapedType::kDynamic}, b.getF32Type());
    Value s = b.create<QKOp>(
        at, scoresType, q, read.getKeys(), b.getI64IntegerAttr(c.numHeads),
        b.getI64IntegerAttr(c.numKVHeads),
        b.getF64FloatAttr(1.0 / std::sqrt(double(c.headDim()))));
    s = b.create<CausalMaskOp>(at, scoresType, s, positions);
    if (opts.decomposeSoftmax) {
      auto rowType =
          RankedTensorType::get({c.numHeads, seq, 1}, b.getF32Type());
      Value max = b.create<ReduceMaxOp>(at, rowType, s);
      Value e = b.create<ExpOp>(at, scoresType,
                                b.create<SubOp>(at, scoresType, s, max));
      s = b.create<DivOp>(at, scoresType, e,
                          b.create<ReduceSumOp>(at, rowType, e));
    } else {
      s = b.create<SoftmaxOp>(at, scoresType, s);
    }
    Value a = b.create<PVOp>(at, act(qWidth), s, read.getValues(),
                             b.getI64IntegerAttr(c.numKVHeads));
    Value o = linear(attn + ".o_proj", a, c.hiddenSize);
    h = b.create<AddOp>(loc(p + "residual"), h.getType(), h, o);

    std::string mlp = p + "mlp";
    x = rmsNorm(p + "post_attention_layernorm", h);
    Value g = linear(mlp + ".gate_proj", x, c.intermediateSize);
    Value u = linear(mlp + ".up_proj", x, c.intermediateSize);
    g = b.create<SiLUOp>(loc(mlp + ".act_fn"), g.getType(), g);
    Value m = b.create<MulOp>(loc(mlp), g.getType(), g, u);
    Value d = linear(mlp + ".down_proj", m, c.hiddenSize);
    return b.create<AddOp>(loc(p + "residual"), h.getType(), h, d);
  }

  OpBuilder b;
  const LlamaConfig &c;
  const FrontendOptions &opts;
  Type et;
  KVCacheType cacheType;
  Value positions;
  int64_t seq = 0;
};

} // namespace

namespace {
/// The first projection `f` cannot hold, as "weight 'W' <verb>: why";
/// empty when none.
std::string unquantizable(const LlamaConfig &c, const QuantFormat &f,
                          const char *verb) {
  struct Projection {
    const char *module;
    int64_t cols;
  };
  for (Projection p : {Projection{"self_attn.q_proj", c.hiddenSize},
                       {"mlp.down_proj", c.intermediateSize}})
    if (std::string e = quantShapeError(f, p.cols); !e.empty())
      return absl::StrCat("weight 'model.layers.0.", p.module, ".weight' ",
                          verb, ": ", e);
  return "";
}
} // namespace

absl::Status checkQuantizable(const LlamaConfig &c, const QuantFormat &f) {
  if (std::string e = unquantizable(c, f, "cannot be quantized"); !e.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("--quantize ", f.name(), ": ", e));
  return absl::OkStatus();
}

std::string contextWarning(const ModelSource &source,
                           const FrontendOptions &opts) {
  const LlamaConfig &c = source.config;
  const double scale = opts.ropeNtkScale > 0    ? opts.ropeNtkScale
                       : !c.ropeScaling.empty() ? c.ropeScalingFactor
                                                : 1.0;
  if (opts.maxContext <= c.maxPositions ||
      double(opts.maxContext) <= scale * double(c.maxPositions))
    return "";
  return absl::StrCat(
      "--max-context: ", opts.maxContext, " tokens exceed ", source.name,
      "'s context of ", int64_t(scale * double(c.maxPositions)),
      " (max_position_embeddings",
      scale > 1 ? absl::StrCat(" times its RoPE scaling's ", scale) : "",
      "): positions past it were never trained",
      scale > 1 ? "" : "; --rope-ntk-scale stretches RoPE to them");
}

absl::StatusOr<FrontendOptions> optionsFor(const ModelSource &source,
                                           FrontendOptions opts) {
  const LlamaConfig &c = source.config;
  if (opts.ropeNtkScale > 0 && !c.ropeScaling.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "--rope-ntk-scale: ", source.name, "'s config already scales RoPE (",
        c.ropeScaling, ", factor ", c.ropeScalingFactor, ")"));
  // Single-file checkpoints (GGUF, llama2.c): their converters write q
  // and k rows in Meta's order, and what they store quantized is used as
  // it is, never quantized again.
  if (source.metaRowOrder)
    opts.ropeLayout = RopeLayout::interleaved;
  if (!source.storedQuantized.empty()) {
    if (opts.quantize)
      return absl::InvalidArgumentError(absl::StrCat(
          source.name, " is already quantized (", source.storedQuantized,
          "); --quantize applies to f16/bf16/f32 checkpoints"));
    // Empty: read as floats, dequantized exactly.
    for (const auto &[weight, f] : source.storedFormats)
      if (std::string e = unquantizable(source.config, f,
                                        "cannot run on kiln's quantized "
                                        "kernels");
          !e.empty())
        return absl::InvalidArgumentError(
            absl::StrCat(source.name, ": ", source.storedQuantized, " as ",
                         f.name(), ": ", e));
    opts.weightFormats = source.storedFormats;
    return opts;
  }
  if (!source.quantization) {
    if (opts.quantize)
      if (absl::Status s = checkQuantizable(source.config, *opts.quantize);
          !s.ok())
        return s;
    return opts;
  }
  const QuantizationConfig &q = *source.quantization;
  if (opts.quantize)
    return absl::InvalidArgumentError(
        absl::StrCat(source.name, " is already quantized (", q.describe(),
                     "); --quantize applies to f16/bf16/f32 checkpoints"));
  // The checkpoint's codes are used as they are: the projections carry
  // its format, which the kernels must hold.
  QuantFormat f = q.format();
  if (std::string e = unquantizable(source.config, f,
                                    "cannot run on kiln's quantized kernels");
      !e.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(source.folder, "/config.json: quantization_config (",
                     q.describe(), ", group_size ", q.groupSize, "): ", e));
  opts.quantize = f;
  return opts;
}

OwningOpRef<ModuleOp> buildLlamaModule(MLIRContext &ctx,
                                       const LlamaConfig &config,
                                       const FrontendOptions &opts,
                                       StringRef modelName) {
  ctx.loadDialect<KilnDialect, func::FuncDialect>();
  OpBuilder b(&ctx);
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(NameLoc::get(b.getStringAttr(modelName)));
  NamedAttrList cfg;
  cfg.append("hidden_size", b.getI64IntegerAttr(config.hiddenSize));
  cfg.append("intermediate_size", b.getI64IntegerAttr(config.intermediateSize));
  cfg.append("num_hidden_layers", b.getI64IntegerAttr(config.numLayers));
  cfg.append("num_attention_heads", b.getI64IntegerAttr(config.numHeads));
  cfg.append("num_key_value_heads", b.getI64IntegerAttr(config.numKVHeads));
  cfg.append("vocab_size", b.getI64IntegerAttr(config.vocabSize));
  cfg.append("max_position_embeddings",
             b.getI64IntegerAttr(config.maxPositions));
  cfg.append("rms_norm_eps", b.getF64FloatAttr(config.rmsNormEps));
  cfg.append("rope_theta", b.getF64FloatAttr(config.ropeTheta));
  (*module)->setAttr("kiln.model", b.getStringAttr(modelName));
  (*module)->setAttr("kiln.config", cfg.getDictionary(&ctx));

  LlamaBuilder builder(ctx, config, opts);
  builder.buildFunction(*module, "prefill", ShapedType::kDynamic,
                        Phase::prefill);
  builder.buildFunction(*module, "decode", 1, Phase::decode);
  return module;
}

absl::StatusOr<std::vector<WeightSpec>> collectWeights(ModuleOp module) {
  std::vector<WeightSpec> specs;
  std::map<std::string, size_t> seen;
  absl::Status status = absl::OkStatus();
  auto need = [&](StringRef nameRef, std::vector<int64_t> shape,
                  std::optional<QuantFormat> quant = {}) {
    std::string name = nameRef.str();
    auto [it, inserted] = seen.emplace(name, specs.size());
    if (inserted)
      specs.push_back({name, shape, quant});
    else if (specs[it->second].shape != shape && status.ok())
      status = absl::InvalidArgumentError(absl::StrCat(
          "weight '", name, "' is used with two shapes, ",
          shapeString(specs[it->second].shape), " and ", shapeString(shape)));
  };
  // A rank's slice (#kiln.shard) needs the whole checkpoint tensor.
  module.walk([&](Operation *op) {
    if (auto w = dyn_cast<WeightOp>(op)) {
      std::vector<int64_t> shape(w.getType().getShape().begin(),
                                 w.getType().getShape().end());
      if (ShardAttr shard = w.getShardAttr())
        shape[shard.getAxis()] *= shard.getParts();
      need(w.getName(), shape, weightQuant(w.getType()));
    } else if (auto p = dyn_cast<PackedWeightOp>(op)) {
      // A packed weight needs its sources and the norm it folds in.
      int64_t k = p.getType().getDimSize(1);
      auto parts = p.getShardParts();
      for (auto [i, source] : llvm::enumerate(p.getSources()))
        need(cast<StringAttr>(source).getValue(),
             {p.getRows()[i] * (parts ? (*parts)[i] : 1), k},
             weightQuant(p.getType()));
      if (auto norm = p.getScaledBy())
        need(*norm, {k});
    }
  });
  if (!status.ok())
    return status;
  return specs;
}

} // namespace kiln

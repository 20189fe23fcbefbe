//===- LlamaToKiln.h - a Llama 2 config to kiln IR --------------*- C++ -*-===//
#ifndef KILN_FRONTEND_LLAMATOKILN_H
#define KILN_FRONTEND_LLAMATOKILN_H

#include "frontend/ModelSource.h"
#include "ir/KilnDialect.h"
#include "runtime/ModelConfig.h"
#include "runtime/Weights.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <string>
#include <vector>

namespace kiln {

struct FrontendOptions {
  /// Storage type of weights and activations: f16, bf16 or f32.
  std::string dtype = "f16";
  /// Pair layout of the q/k projection rows; Hugging Face folders are
  /// rotate_half.
  RopeLayout ropeLayout = RopeLayout::rotate_half;
  /// Run the fusion pipeline after building (kiln compile and run do).
  bool fusion = true;
  /// Write softmax as reduce_max/sub/exp/reduce_sum/div, as some frontends
  /// do: a test of kiln-fuse-softmax on real models.
  bool decomposeSoftmax = false;
  /// The largest prefill the plans hold (kiln-plan-buffers' prefill-tokens).
  int64_t prefillTokens = 2048;
  /// Sequences that run at once, and tokens per sequence (0: the model's
  /// context): the KV pool holds them all (kiln-plan-kv-pool's max-batch
  /// and max-context).
  int64_t maxBatch = 1, maxContext = 0;
  /// Bytes for the KV pool (0: what maxBatch sequences of maxContext need).
  int64_t kvMemory = 0;
  /// --rope-ntk-scale S (0: none): RoPE's base becomes theta *
  /// S^(Dh / (Dh - 2)), the fixed NTK-aware scaling, for a model whose
  /// config has no rope_scaling.
  double ropeNtkScale = 0;
  /// Quantize the seven projections of every layer (--quantize, or a
  /// pre-quantized checkpoint's format: optionsFor): their weights' types
  /// carry #kiln.quant.
  std::optional<QuantFormat> quantize;
  /// A pre-quantized checkpoint's projection formats by weight name, where
  /// they differ from weight to weight (a GGUF file's block types:
  /// optionsFor); before `quantize`.
  std::map<std::string, QuantFormat> weightFormats;
  /// The KV cache's storage: empty (the activations' type), "fp8" (e4m3)
  /// or "int8", codes with an f16 scale per head of each slot (--kv-dtype).
  std::string kvDtype;
  /// Ranks the model is split over (--tp N: kiln-shard-tensor-parallel
  /// before the fusions); 1: none.
  int64_t tensorParallel = 1;
};

/// OK, or why `format` cannot quantize the config's projections, naming
/// the first weight it cannot hold.
absl::Status checkQuantizable(const LlamaConfig &config,
                              const QuantFormat &format);

/// What a user is warned of when `opts` asks for more context than
/// `source` reaches (max_position_embeddings, times a RoPE scaling's
/// factor): it compiles, as llama.cpp runs past n_ctx_train, but positions
/// past it were never trained. Empty when it fits.
std::string contextWarning(const ModelSource &source,
                           const FrontendOptions &opts);

/// The options that build `source`'s model from `opts`: checked
/// --quantize for a float checkpoint; for a pre-quantized one (GPTQ, AWQ:
/// source.quantization) its format on the projections, as --quantize
/// would put one. Fails when --quantize is given with a pre-quantized
/// checkpoint, or when the format cannot hold the projections (naming the
/// first weight).
absl::StatusOr<FrontendOptions> optionsFor(const ModelSource &source,
                                           FrontendOptions opts);

/// Builds the module: `func.func @prefill` (a run of S new tokens, S
/// dynamic) and `func.func @decode` (one token), each taking
/// (tokens, positions, kv cache) and returning (logits f32, kv cache).
/// Locations are the Hugging Face module names.
mlir::OwningOpRef<mlir::ModuleOp> buildLlamaModule(mlir::MLIRContext &ctx,
                                                   const LlamaConfig &config,
                                                   const FrontendOptions &opts,
                                                   llvm::StringRef modelName);

/// The checkpoint tensors a module needs, once each, in order of first use:
/// those kiln.weight names and the sources of each kiln.packed_weight.
/// Fails when one name is needed with two shapes.
absl::StatusOr<std::vector<WeightSpec>> collectWeights(mlir::ModuleOp module);

} // namespace kiln

#endif // KILN_FRONTEND_LLAMATOKILN_H

//===- GgufModel.h - a llama GGUF file as a Llama 2 checkpoint --*- C++ -*-===//
//
// What a GGUF file of the llama architecture means to kiln (docs/gguf.md):
// its llama.* metadata is a LlamaConfig, its tensors are the Hugging Face
// checkpoint's under other names (blk.N.attn_q.weight is
// model.layers.N.self_attn.q_proj.weight) with dimensions reversed (ne[0]
// is the input dimension), and its q/k rows are in Meta's interleaved RoPE
// order (llama.cpp's converter permutes them back). Tensors of the types
// that kiln's canonical quantized form holds exactly (QuantFormat.h) are
// read as that: Q8_0 and Q5_0 as int8-g32, Q4_0 as int4-g32. The other
// types are dequantized exactly, as float weights.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_GGUFMODEL_H
#define KILN_RUNTIME_GGUFMODEL_H

#include "runtime/GgufFile.h"
#include "runtime/ModelConfig.h"
#include "runtime/QuantFormat.h"

#include "absl/status/statusor.h"

#include <optional>
#include <string>
#include <string_view>

namespace kiln {

/// The llama.* hyperparameters, checked (errors name the file and key):
/// general.architecture must be "llama", llama.rope.dimension_count the
/// head dimension, and no RoPE scaling; the vocabulary is token_embd's.
absl::StatusOr<LlamaConfig> ggufLlamaConfig(const GgufFile &file);

/// The Hugging Face name of a llama GGUF tensor (blk.3.ffn_up.weight:
/// model.layers.3.mlp.up_proj.weight); empty for a name llama has not.
std::string ggufToHuggingFaceName(std::string_view name);

/// The canonical format that holds a type's values exactly: Q8_0 and Q5_0
/// int8-g32, Q4_0 int4-g32; nullopt for the others.
std::optional<QuantFormat> ggmlCanonicalFormat(GgmlType type);

/// A [rows, cols] tensor of a type ggmlCanonicalFormat holds, converted
/// to `as` (that format, or int8-g32 for Q4_0 in a file that mixes it with
/// Q8_0): the same values, each (code - middle) * f16 scale.
QuantizedMatrix ggmlToCanonical(GgmlType type, const uint8_t *blocks,
                                int64_t rows, int64_t cols, QuantFormat as);

/// The projections' format for a whole file: the one format that holds
/// every projection tensor exactly (int4-g32 widens to int8-g32 when the
/// file mixes them), or nullopt when some projection has another type
/// (F16, Q4_1, Q4_K, ...): then all are float weights.
std::optional<QuantFormat> ggufProjectionFormat(const GgufFile &file);

/// The block types of the file's projections ("Q4_K, Q6_K"); empty when
/// every one is F32, F16 or BF16.
std::string ggufProjectionBlockTypes(const GgufFile &file);

} // namespace kiln

#endif // KILN_RUNTIME_GGUFMODEL_H

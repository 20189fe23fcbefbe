//===- GgufModel.h - a llama GGUF file as a Llama 2 checkpoint --*- C++ -*-===//
//
// What a GGUF file of the llama architecture means to kiln (docs/gguf.md):
// its llama.* metadata is a LlamaConfig, its tensors are the Hugging Face
// checkpoint's under other names (blk.N.attn_q.weight is
// model.layers.N.self_attn.q_proj.weight) with dimensions reversed (ne[0]
// is the input dimension), and its q/k rows are in Meta's interleaved RoPE
// order (llama.cpp's converter permutes them back). The projections are
// read in kiln's canonical quantized form (QuantFormat.h), which holds
// every block type exactly: Q8_0 and Q5_0 as int8-g32, Q4_0 as int4-g32
// (f16 scales), Q4_1 and Q4_K as int4-g32-min, Q5_1 and Q5_K as
// int8-g32-min, Q6_K as int8-g16-min (f32 scales and mins). A buffer
// of tensors of several types (a layer's q, k, v) takes one format that
// holds them all (joinExact); a file with a float projection reads every
// projection as floats.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_GGUFMODEL_H
#define KILN_RUNTIME_GGUFMODEL_H

#include "runtime/GgufFile.h"
#include "runtime/ModelConfig.h"
#include "runtime/QuantFormat.h"

#include "absl/status/statusor.h"

#include <map>
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

/// The smallest canonical format that holds a block type's values
/// exactly (above); nullopt for the float types.
std::optional<QuantFormat> ggmlCanonicalFormat(GgmlType type);

/// The smallest format that holds every value of formats a and b exactly:
/// int4 codes widen to int8, groups shrink to the smaller, f16 scales
/// widen to f32 with mins; nullopt when none does (fp8, zero points, a
/// group that does not divide the other).
std::optional<QuantFormat> joinExact(const QuantFormat &a,
                                     const QuantFormat &b);

/// A [rows, cols] tensor of a block type, converted to `as`, a format
/// joinExact(ggmlCanonicalFormat(type), ...) gives: the same values in
/// every bit.
QuantizedMatrix ggmlToCanonical(GgmlType type, const uint8_t *blocks,
                                int64_t rows, int64_t cols, QuantFormat as);

/// The projections' formats by Hugging Face weight name: each the join of
/// the canonical formats of the tensors its fused buffer holds (a layer's
/// q, k and v; its gate and up; o and down alone), so that the fusion pass
/// still packs them; nullopt when some projection is a float type (F16,
/// F32, BF16): then all are float weights. A Q4_K_M file's layers whose
/// attn_v or ffn_down is Q6_K get int8-g16-min there, the others
/// int4-g32-min. With quantized projections, a quantized `output.weight`
/// (llama.cpp's Q6_K in Q4_K_M) is `lm_head.weight` in its own canonical
/// format, run on the same kernels; an embedding table it shares
/// (tie_word_embeddings) stays float.
std::optional<std::map<std::string, QuantFormat>>
ggufProjectionFormats(const GgufFile &file);

/// The distinct formats of `formats`, sorted ("int4-g32-min, int8-g16-min").
std::string describeFormats(const std::map<std::string, QuantFormat> &formats);

/// The block types of the file's projections ("Q4_K, Q6_K"); empty when
/// every one is F32, F16 or BF16.
std::string ggufProjectionBlockTypes(const GgufFile &file);

} // namespace kiln

#endif // KILN_RUNTIME_GGUFMODEL_H

//===- ModelConfig.h - the LlamaConfig fields kiln reads --------*- C++ -*-===//
#ifndef KILN_RUNTIME_MODELCONFIG_H
#define KILN_RUNTIME_MODELCONFIG_H

#include "absl/status/statusor.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

/// The shape of a Llama 2 model, as Hugging Face's config.json spells it.
struct LlamaConfig {
  int64_t hiddenSize = 0;       // hidden_size (D)
  int64_t intermediateSize = 0; // intermediate_size (F)
  int64_t numLayers = 0;        // num_hidden_layers
  int64_t numHeads = 0;         // num_attention_heads (H)
  int64_t numKVHeads = 0;       // num_key_value_heads (Hkv), default H
  int64_t vocabSize = 0;        // vocab_size (V)
  int64_t maxPositions = 0;     // max_position_embeddings
  double rmsNormEps = 0;        // rms_norm_eps
  double ropeTheta = 10000.0;   // rope_theta
  /// rope_scaling's type ("linear": positions divided by the factor, as
  /// transformers' linear scaling; "dynamic": its dynamic NTK base past
  /// max_position_embeddings; "" without one) and factor (>= 1).
  std::string ropeScaling;
  double ropeScalingFactor = 1.0;
  bool tieWordEmbeddings = false;
  std::string torchDtype; // torch_dtype, informative only

  int64_t headDim() const { return hiddenSize / numHeads; }
};

/// Parses and checks config.json text; errors name `path` and the field.
absl::StatusOr<LlamaConfig> parseLlamaConfig(std::string_view json,
                                             const std::string &path);

/// Reads and parses a config.json file.
absl::StatusOr<LlamaConfig> loadLlamaConfig(const std::string &path);

} // namespace kiln

#endif // KILN_RUNTIME_MODELCONFIG_H

//===- ModelSource.h - find the model a command names -----------*- C++ -*-===//
#ifndef KILN_FRONTEND_MODELSOURCE_H
#define KILN_FRONTEND_MODELSOURCE_H

#include "runtime/ModelConfig.h"
#include "runtime/QuantizedCheckpoint.h"

#include "absl/status/statusor.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// A model named on the command line: a Hugging Face folder, a preset, a
/// GGUF file or a llama2.c checkpoint.
struct ModelSource {
  std::string name;   // folder name or preset name, for messages
  std::string folder; // the folder holding config.json (and weights), or
                      // the GGUF file or llama2.c checkpoint
  bool isPreset = false;
  LlamaConfig config;
  /// config.json's quantization_config: the checkpoint is pre-quantized
  /// (GPTQ, AWQ) and its projections keep that format.
  std::optional<QuantizationConfig> quantization;
  /// A GGUF file (GgufModel.h): q/k rows in Meta's interleaved order, the
  /// ggml block types of its projections ("Q4_K, Q6_K"; empty when they
  /// are floats) and, when one canonical format holds them all exactly,
  /// that format, which the projections keep.
  bool isGguf = false;
  std::string ggufBlockTypes;
  std::optional<QuantFormat> ggufFormat;
  /// A llama2.c checkpoint (Llama2cCheckpoint.h): q/k rows in Meta's
  /// interleaved order; version 2's Q8_0 is read as floats ("llama2.c Q8_0,
  /// group size 64", empty for fp32 files: --quantize applies to those).
  bool isLlama2c = false;
  std::string llama2cQuantized;
};

/// Resolves `arg` (a folder with config.json, a preset name in models/, a
/// GGUF file, or any other file: a llama2.c checkpoint) and reads its
/// config.
absl::StatusOr<ModelSource> resolveModel(const std::string &arg);

/// The presets' folder: $KILN_MODELS_DIR, else the one built in.
std::string modelsDir();
std::vector<std::string> presetNames();

} // namespace kiln

#endif // KILN_FRONTEND_MODELSOURCE_H

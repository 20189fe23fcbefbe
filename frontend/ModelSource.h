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

/// A model named on the command line: a Hugging Face folder, a preset or
/// a GGUF file.
struct ModelSource {
  std::string name;   // folder name or preset name, for messages
  std::string folder; // the folder holding config.json (and weights), or
                      // the GGUF file
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
};

/// Resolves `arg` (a folder with config.json, a preset name in models/, or
/// a GGUF file) and reads its config.
absl::StatusOr<ModelSource> resolveModel(const std::string &arg);

/// The presets' folder: $KILN_MODELS_DIR, else the one built in.
std::string modelsDir();
std::vector<std::string> presetNames();

} // namespace kiln

#endif // KILN_FRONTEND_MODELSOURCE_H

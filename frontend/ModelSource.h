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

/// A model named on the command line: a Hugging Face folder or a preset.
struct ModelSource {
  std::string name;   // folder name or preset name, for messages
  std::string folder; // the folder holding config.json (and weights)
  bool isPreset = false;
  LlamaConfig config;
  /// config.json's quantization_config: the checkpoint is pre-quantized
  /// (GPTQ, AWQ) and its projections keep that format.
  std::optional<QuantizationConfig> quantization;
};

/// Resolves `arg` (a folder with config.json, or a preset name in models/)
/// and reads its config.
absl::StatusOr<ModelSource> resolveModel(const std::string &arg);

/// The presets' folder: $KILN_MODELS_DIR, else the one built in.
std::string modelsDir();
std::vector<std::string> presetNames();

} // namespace kiln

#endif // KILN_FRONTEND_MODELSOURCE_H

//===- ModelSource.h - find the model a command names -----------*- C++ -*-===//
#ifndef KILN_FRONTEND_MODELSOURCE_H
#define KILN_FRONTEND_MODELSOURCE_H

#include "runtime/ModelConfig.h"
#include "runtime/QuantizedCheckpoint.h"

#include "absl/status/statusor.h"

#include <map>
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
  /// A single-file checkpoint (a GGUF file, GgufModel.h; a llama2.c one,
  /// Llama2cCheckpoint.h): q/k rows in Meta's interleaved order; what it
  /// stores quantized, described ("Q4_K, Q6_K", "llama2.c Q8_0, group size
  /// 64"; empty when its projections are floats); and the canonical
  /// formats that hold those projections exactly, by weight name, which
  /// they keep (empty: they are read as floats, dequantized exactly).
  bool metaRowOrder = false;
  std::string storedQuantized;
  std::map<std::string, QuantFormat> storedFormats;
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

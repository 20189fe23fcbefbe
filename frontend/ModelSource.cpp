//===- ModelSource.cpp ----------------------------------------------------===//
#include "frontend/ModelSource.h"
#include "runtime/GgufFile.h"
#include "runtime/GgufModel.h"
#include "runtime/Llama2cCheckpoint.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln {
namespace fs = std::filesystem;

std::string modelsDir() {
  if (const char *dir = std::getenv("KILN_MODELS_DIR"); dir && *dir)
    return dir;
  return KILN_MODELS_DIR;
}

std::vector<std::string> presetNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(modelsDir(), ec))
    if (fs::is_regular_file(entry.path() / "config.json", ec))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<ModelSource> resolveModel(const std::string &arg) {
  ModelSource src;
  src.name = arg;
  std::error_code ec;
  // A .gguf name without GGUF's magic gets the GGUF reader's error.
  if (fs::is_regular_file(arg, ec) &&
      (GgufFile::looksLikeGguf(arg) || absl::EndsWith(arg, ".gguf"))) {
    auto file = GgufFile::open(arg);
    if (!file.ok())
      return file.status();
    auto config = ggufLlamaConfig(**file);
    if (!config.ok())
      return config.status();
    src.folder = arg;
    src.config = *config;
    src.metaRowOrder = true;
    src.storedQuantized = ggufProjectionBlockTypes(**file);
    src.storedFormats = ggufProjectionFormats(**file).value_or(
        std::map<std::string, QuantFormat>());
    return src;
  }
  if (fs::is_regular_file(arg, ec)) {
    // Any other file: llama2.c's, whose reader says what is wrong.
    auto file = Llama2cCheckpoint::open(arg, /*tensors=*/false);
    if (!file.ok())
      return file.status();
    src.folder = arg;
    src.config = (*file)->config();
    src.metaRowOrder = true;
    if ((*file)->header().version == 2)
      src.storedQuantized = absl::StrCat("llama2.c Q8_0, group size ",
                                         (*file)->header().groupSize);
    return src;
  }
  if (fs::is_directory(arg, ec)) {
    src.folder = arg;
  } else if (arg.find('/') == std::string::npos && !arg.empty() &&
             arg[0] != '.' &&
             fs::is_regular_file(fs::path(modelsDir()) / arg / "config.json",
                                 ec)) {
    src.folder = (fs::path(modelsDir()) / arg).string();
    src.isPreset = true;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(arg,
                     ": not a model folder or a GGUF file, and no preset has "
                     "that name (presets: ",
                     absl::StrJoin(presetNames(), ", "), ")"));
  }
  std::string config = (fs::path(src.folder) / "config.json").string();
  if (!fs::exists(config, ec))
    return absl::InvalidArgumentError(
        absl::StrCat(config, ": missing (a model folder needs config.json)"));
  auto parsed = loadLlamaConfig(config);
  if (!parsed.ok())
    return parsed.status();
  src.config = *parsed;
  // loadLlamaConfig read the file as JSON already.
  std::ifstream in(config, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  auto quant = readQuantizationConfig(text.str(), config);
  if (!quant.ok())
    return quant.status();
  src.quantization = *quant;
  return src;
}

} // namespace kiln

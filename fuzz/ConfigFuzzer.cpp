//===- ConfigFuzzer.cpp - config.json parsing on any text -----------------===//
//
// parseLlamaConfig refuses what is not a consistent Llama config with a
// status; what it accepts has dimensions that divide as the model needs.
//
//===----------------------------------------------------------------------===//
#include "runtime/ModelConfig.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto config = kiln::parseLlamaConfig(
      std::string_view(reinterpret_cast<const char *>(data), size), "fuzz");
  if (!config.ok())
    return 0;
  // What the frontend relies on.
  if (config->numHeads <= 0 || config->hiddenSize % config->numHeads != 0 ||
      config->numKVHeads <= 0 || config->numHeads % config->numKVHeads != 0)
    std::abort();
  return 0;
}

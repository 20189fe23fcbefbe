//===- RunOptions.h - what kiln run and kiln-run share ----------*- C++ -*-===//
//
// The flags of a run, read from text with kiln's one-line errors, what a
// bundle needs of a checkpoint, and the report a run prints. kiln run (with
// the compiler) and kiln-run (the runtime alone) both use them.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_RUNOPTIONS_H
#define KILN_RUNTIME_RUNOPTIONS_H

#include "runtime/Generate.h"
#include "runtime/Program.h"
#include "runtime/Sampling.h"
#include "runtime/Weights.h"

#include "absl/status/statusor.h"

#include <string>
#include <vector>

namespace kiln {

/// --prompt-ids 1,2,3.
absl::StatusOr<std::vector<int32_t>> parsePromptIds(const std::string &text);

/// --max-new-tokens: a non-negative integer.
absl::StatusOr<int64_t> parseMaxNewTokens(const std::string &text);

/// The sampling flags as given, with their defaults.
struct SamplingFlags {
  std::string temperature = "0", topK = "0", topP = "1", seed = "0";
  std::string repetitionPenalty = "1", presencePenalty = "0",
              frequencyPenalty = "0";
};

/// --temperature, --top-k, --top-p, --seed and the penalties, each checked.
absl::StatusOr<SamplingParams> parseSampling(const SamplingFlags &flags);

/// --stop-ids 2,13: token ids that end a generation.
absl::StatusOr<std::vector<int32_t>> parseStopIds(const std::string &text,
                                                  int64_t vocab);

/// A model folder's checkpoint, checked against what the model needs.
absl::StatusOr<std::unique_ptr<WeightSet>>
openCheckpoint(const std::string &folder, const std::vector<WeightSpec> &specs);

/// What a bundle's weight manifest needs of the checkpoint.
std::vector<WeightSpec> manifestSpecs(const std::vector<WeightBuffer> &ws);

/// The lines a run prints: model, device, timings, sampling, tokens.
std::string generationReport(const std::string &model,
                             const std::string &device, const Generation &g,
                             const SamplingParams &sampling,
                             const std::string &dumpPath);

} // namespace kiln

#endif // KILN_RUNTIME_RUNOPTIONS_H

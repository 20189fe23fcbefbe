//===- Generate.h - generation on any device --------------------*- C++ -*-===//
#ifndef KILN_RUNTIME_GENERATE_H
#define KILN_RUNTIME_GENERATE_H

#include "runtime/Device.h"

#include "absl/status/statusor.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

/// A prompt and its continuation, with every logit computed.
struct Generation {
  int64_t vocab = 0;
  std::vector<int32_t> prompt;      // [P]
  std::vector<float> prefillLogits; // [P, V]
  std::vector<int32_t> tokens;      // [N]: tokens[0] sampled from the last
                                    // prefill row, tokens[i] fed at P + i
  std::vector<float> decodeLogits;  // [N, V]: after feeding tokens[i]
  double prefillSeconds = 0, decodeSeconds = 0;
  /// Positions the device holds after it: where the prompt started, the
  /// prompt, and the tokens fed back (all of `tokens` but one a stop
  /// string ended on).
  int64_t held = 0;
};

/// Where a generation continues a sequence the device already holds
/// (a chat's next turn): its prompt goes at positions start, start + 1,
/// ...; `seen` (null: counted afresh from the prompt) counts every token
/// the sequence has seen, for the penalties, and is updated.
struct Continuation {
  int32_t start = 0;
  std::vector<int32_t> *seen = nullptr; // [V]
};

/// What a caller may add to a generation: tokens that end it (not kept: an
/// end-of-sequence id), and a call for each token as it is chosen (to
/// stream text), which ends the generation after that token by returning
/// false (a stop string).
struct GenerateHooks {
  std::vector<int32_t> stopTokens;
  std::function<bool(int32_t)> onToken;
};

/// Wall seconds since `start` (steady clock).
double secondsSince(std::chrono::steady_clock::time_point start);

/// Checks the prompt against the vocabulary and the context length.
absl::Status checkPrompt(const std::vector<int32_t> &prompt,
                         int64_t maxNewTokens, int64_t vocab,
                         int64_t maxPositions);

/// Prefills the prompt at positions 0..P-1, then decodes maxNewTokens
/// tokens, each sampled as `sampling` says (by default greedily: the argmax,
/// the lowest id winning a tie). A device that samples picks the tokens and
/// the host checks each pick against the rule (runtime/Sampling.h); for
/// one that does not, the host samples. `bias` is added to every step's
/// logits before the rule.
absl::StatusOr<Generation>
generate(Device &device, const std::vector<int32_t> &prompt,
         int64_t maxNewTokens, int64_t vocab,
         const SamplingParams &sampling = {}, const GenerateHooks &hooks = {},
         const LogitBias &bias = {}, Continuation from = {});

/// Writes prompt_tokens, prefill_logits, decode_tokens and decode_logits in
/// the layout of the fixtures' expected.safetensors.
absl::Status writeLogitsDump(const std::string &path, const Generation &g);

} // namespace kiln

#endif // KILN_RUNTIME_GENERATE_H

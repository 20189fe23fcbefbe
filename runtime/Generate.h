//===- Generate.h - greedy generation on any device -------------*- C++ -*-===//
#ifndef KILN_RUNTIME_GENERATE_H
#define KILN_RUNTIME_GENERATE_H

#include "runtime/Device.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// A prompt and its greedy continuation, with every logit computed.
struct Generation {
  int64_t vocab = 0;
  std::vector<int32_t> prompt;      // [P]
  std::vector<float> prefillLogits; // [P, V]
  std::vector<int32_t> tokens;      // [N]: tokens[0] = argmax of the last
                                    // prefill row, tokens[i] fed at P + i
  std::vector<float> decodeLogits;  // [N, V]: after feeding tokens[i]
  double prefillSeconds = 0, decodeSeconds = 0;
};

/// Checks the prompt against the vocabulary and the context length.
absl::Status checkPrompt(const std::vector<int32_t> &prompt,
                         int64_t maxNewTokens, int64_t vocab,
                         int64_t maxPositions);

/// Prefills the prompt at positions 0..P-1, then decodes maxNewTokens
/// tokens greedily (the argmax; the lowest id wins a tie).
absl::StatusOr<Generation> generateGreedy(Device &device,
                                          const std::vector<int32_t> &prompt,
                                          int64_t maxNewTokens, int64_t vocab);

/// Writes prompt_tokens, prefill_logits, decode_tokens and decode_logits in
/// the layout of the fixtures' expected.safetensors.
absl::Status writeLogitsDump(const std::string &path, const Generation &g);

/// Index of the largest value; the first one on ties.
int32_t argmax(const float *row, int64_t n);

} // namespace kiln

#endif // KILN_RUNTIME_GENERATE_H

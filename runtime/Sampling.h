//===- Sampling.h - how the next token is chosen ----------------*- C++ -*-===//
//
// The rule every device follows (codegen/SampleKernel.cpp on the GPU and
// emu devices, sampleOnHost for the ref device): greedy, or temperature,
// top-k and top-p with a seed. See SampleKernel.cpp for the rule in full.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_SAMPLING_H
#define KILN_RUNTIME_SAMPLING_H

#include "absl/status/status.h"

#include <cstdint>
#include <vector>

namespace kiln {

/// What the sampling kernel reads (its KilnSampling: the same layout).
struct SamplingParams {
  float temperature = 0.0f; // <= 0: greedy
  float topP = 1.0f;        // >= 1: no nucleus cut
  int32_t topK = 0;         // <= 0: no top-k cut
  uint32_t seed = 0;
  uint32_t step = 0; // which token of the run: a fresh draw each step
  float repetitionPenalty = 1.0f; // > 1 discourages tokens seen before
  float presencePenalty = 0.0f;   // subtracted once from a seen token
  float frequencyPenalty = 0.0f;  // subtracted per time a token was seen

  bool greedy() const { return !(temperature > 0.0f) || topK == 1; }
};
static_assert(sizeof(SamplingParams) == 32, "the kernel's KilnSampling");

/// The uniform number in [0, 1) of (seed, step), as the kernel draws it.
float samplingUniform(uint32_t seed, uint32_t step);

/// The rule on the host, in the kernel's order of operations. `seen[V]`
/// counts the tokens the sequence has seen (the penalties' history; null:
/// none).
int32_t sampleOnHost(const float *logits, int64_t vocab,
                     const SamplingParams &params,
                     const int32_t *seen = nullptr);

/// The logits after the penalties, as the kernel computes them.
std::vector<float> penalize(const float *logits, int64_t vocab,
                            const SamplingParams &params, const int32_t *seen);

/// Whether a device could have chosen `token`: among the top_k largest
/// logits and inside the top_p nucleus (with a little slack for rounding).
/// A failure names the step, the token and the cut it falls outside of.
absl::Status checkSampled(const float *logits, int64_t vocab,
                          const SamplingParams &params, int32_t token,
                          const int32_t *seen = nullptr);

} // namespace kiln

#endif // KILN_RUNTIME_SAMPLING_H

//===- Sampling.h - how the next token is chosen ----------------*- C++ -*-===//
//
// The rule every device follows (codegen/SampleKernel.cpp on the GPU and
// emu devices, sampleOnHost for the ref device): a logit bias, the
// penalties, then greedy, or temperature (constant or a linear schedule),
// top-k, top-p and min-p with a seed, in transformers' order. See
// SampleKernel.cpp for the rule in full.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_SAMPLING_H
#define KILN_RUNTIME_SAMPLING_H

#include "absl/status/status.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace kiln {

/// Added to a token's logit before anything else (OpenAI's and
/// transformers' logit_bias): (token id, bias) pairs, ids distinct.
using LogitBias = std::vector<std::pair<int32_t, float>>;

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
  float minP = 0.0f; // > 0: drops tokens less likely than min_p times the
                     // likeliest
  /// A temperature schedule (--temperature-schedule T0:T1): over
  /// scheduleSteps new tokens the temperature goes linearly from
  /// `temperature` (step 0) to temperatureEnd (step scheduleSteps - 1 and
  /// on); 0 steps: constant.
  float temperatureEnd = 0.0f;
  uint32_t scheduleSteps = 0;
  uint32_t biased = 0; // the sequence's row of Region::LogitBias applies

  /// The temperature of step `step`, as the kernel computes it.
  float temperatureAt() const;
  bool greedy() const { return !(temperatureAt() > 0.0f) || topK == 1; }
};
static_assert(sizeof(SamplingParams) == 48, "the kernel's KilnSampling");

/// The uniform number in [0, 1) of (seed, step), as the kernel draws it.
float samplingUniform(uint32_t seed, uint32_t step);

/// The rule on the host, in the kernel's order of operations. `seen[V]`
/// counts the tokens the sequence has seen (the penalties' history; null:
/// none); `bias` is added first.
int32_t sampleOnHost(const float *logits, int64_t vocab,
                     const SamplingParams &params,
                     const int32_t *seen = nullptr, const LogitBias &bias = {});

/// The logits after the bias and the penalties, as the kernel computes
/// them.
std::vector<float> penalize(const float *logits, int64_t vocab,
                            const SamplingParams &params, const int32_t *seen,
                            const LogitBias &bias = {});

/// Which tokens the rule may draw from the (biased, penalized) `logits`
/// and with what weight: exp((l - max) / T) of the candidates that survive
/// top-k, top-p and min-p, 0 for the rest (greedy: 1 for the argmax).
std::vector<float> candidateWeights(const float *logits, int64_t vocab,
                                    const SamplingParams &params);

/// Whether a device could have chosen `token`: among the top_k largest
/// logits, inside the top_p nucleus and above min_p (with a little slack
/// for rounding). A failure names the step, the token and the cut it falls
/// outside of.
absl::Status checkSampled(const float *logits, int64_t vocab,
                          const SamplingParams &params, int32_t token,
                          const int32_t *seen = nullptr,
                          const LogitBias &bias = {});

} // namespace kiln

#endif // KILN_RUNTIME_SAMPLING_H

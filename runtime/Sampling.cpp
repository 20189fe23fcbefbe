//===- Sampling.cpp - the sampling rule on the host -----------------------===//
#include "runtime/Sampling.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace kiln {
namespace {
/// Larger float, larger key; NaN is the smallest (the kernel's kiln_key).
uint32_t key(float x) {
  if (std::isnan(x))
    return 0;
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

uint32_t hash(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

int32_t firstLargest(const float *logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (key(logits[i]) > key(logits[best]))
      best = i;
  return int32_t(best);
}

/// The top-k cut: the k-th largest key (0: no cut). A partial selection,
/// not a sort: the check runs after every decode step.
uint32_t topKKey(const float *logits, int64_t vocab, const SamplingParams &p) {
  if (!(p.topK > 1 && p.topK < vocab))
    return 0;
  std::vector<uint32_t> keys(vocab); // [V]
  for (int64_t i = 0; i < vocab; ++i)
    keys[i] = key(logits[i]);
  std::nth_element(keys.begin(), keys.begin() + (p.topK - 1), keys.end(),
                   std::greater<>());
  return keys[p.topK - 1];
}

/// probs[V] = exp((l - max) / temperature) of the logits whose key reaches
/// `cut`, 0 elsewhere; returns their sum.
double candidateProbs(const float *logits, int64_t vocab,
                      const SamplingParams &p, uint32_t cut,
                      std::vector<float> &probs) {
  float top = logits[firstLargest(logits, vocab)];
  probs.assign(vocab, 0.0f);
  double z = 0;
  for (int64_t i = 0; i < vocab; ++i)
    if (key(logits[i]) >= cut) {
      probs[i] = std::exp((logits[i] - top) * (1.0f / p.temperatureAt()));
      z += probs[i];
    }
  return z;
}

/// The cut-off key of both cuts: candidates are the logits whose key
/// reaches it. Fills probs[V] as candidateProbs does for the top-k cut.
uint32_t threshold(const float *logits, int64_t vocab, const SamplingParams &p,
                   std::vector<float> &probs) {
  uint32_t kthr = topKKey(logits, vocab, p);
  double z = candidateProbs(logits, vocab, p, kthr, probs);
  if (!(p.topP < 1.0f))
    return kthr;
  // The largest key whose candidates (key >= it, ties together) hold top_p
  // of the mass: walk the keys from the largest.
  std::vector<std::pair<uint32_t, int64_t>> order(vocab); // largest first
  for (int64_t i = 0; i < vocab; ++i)
    order[i] = {key(logits[i]), i};
  std::sort(order.begin(), order.end(), std::greater<>());
  double target = double(p.topP) * z, mass = 0;
  for (int64_t i = 0; i < vocab;) {
    uint32_t k = order[i].first;
    for (; i < vocab && order[i].first == k; ++i)
      mass += probs[order[i].second];
    if (mass > 0 && mass >= target)
      return std::max(k, kthr);
  }
  return kthr;
}
} // namespace

float SamplingParams::temperatureAt() const {
  if (scheduleSteps == 0 || step == 0)
    return temperature;
  if (step >= scheduleSteps - 1)
    return temperatureEnd;
  // fma, as the kernel's fmaf: one rounding on both.
  return std::fma(temperatureEnd - temperature,
                  float(step) / float(scheduleSteps - 1), temperature);
}

std::vector<float> penalize(const float *logits, int64_t vocab,
                            const SamplingParams &p, const int32_t *seen,
                            const LogitBias &bias) {
  std::vector<float> out(logits, logits + vocab); // [V]
  for (const auto &[token, b] : bias)
    if (token >= 0 && token < vocab)
      out[token] += b;
  for (int64_t i = 0; seen && i < vocab; ++i)
    if (seen[i] > 0) {
      float &l = out[i];
      l = l > 0.0f ? l / p.repetitionPenalty : l * p.repetitionPenalty;
      l -= p.presencePenalty + p.frequencyPenalty * float(seen[i]);
    }
  return out;
}

float samplingUniform(uint32_t seed, uint32_t step) {
  return float(hash(seed ^ hash(step)) >> 8) * (1.0f / 16777216.0f);
}

std::vector<float> candidateWeights(const float *logits, int64_t vocab,
                                    const SamplingParams &p) {
  std::vector<float> weights(vocab, 0.0f); // [V]
  if (p.greedy()) {
    weights[firstLargest(logits, vocab)] = 1.0f;
    return weights;
  }
  std::vector<float> probs; // [V]
  uint32_t thr = threshold(logits, vocab, p, probs);
  // min-p last (transformers' order): the likeliest candidate's weight is
  // 1, so the cut is the weight itself.
  for (int64_t i = 0; i < vocab; ++i)
    if (key(logits[i]) >= thr && probs[i] >= p.minP)
      weights[i] = probs[i];
  return weights;
}

int32_t sampleOnHost(const float *raw, int64_t vocab, const SamplingParams &p,
                     const int32_t *seen, const LogitBias &bias) {
  std::vector<float> penalized = penalize(raw, vocab, p, seen, bias); // [V]
  const float *logits = penalized.data();
  if (p.greedy())
    return firstLargest(logits, vocab);
  std::vector<float> weights = candidateWeights(logits, vocab, p); // [V]
  double total = 0;
  for (float w : weights)
    total += w;
  double r = samplingUniform(p.seed, p.step) * total;
  int32_t pick = firstLargest(logits, vocab);
  for (int64_t i = 0; i < vocab; ++i) {
    if (weights[i] <= 0)
      continue;
    pick = int32_t(i);
    if (r < weights[i])
      break;
    r -= weights[i];
  }
  return pick;
}

absl::Status checkSampled(const float *raw, int64_t vocab,
                          const SamplingParams &p, int32_t token,
                          const int32_t *seen, const LogitBias &bias) {
  std::vector<float> penalized = penalize(raw, vocab, p, seen, bias); // [V]
  const float *logits = penalized.data();
  if (token < 0 || token >= vocab)
    return absl::InternalError(
        absl::StrCat("sampled token ", token, " is outside the vocabulary"));
  if (p.greedy()) {
    int32_t host = firstLargest(logits, vocab);
    if (token != host)
      return absl::InternalError(absl::StrCat(
          "sampled token ", token, ", the argmax of its logits is ", host));
    return absl::OkStatus();
  }
  // Logits strictly above the token's: fewer than top_k of them, and less
  // than top_p of the candidates' mass.
  float mine = logits[token];
  int64_t above = 0;
  std::vector<float> probs; // [V]
  double z = candidateProbs(logits, vocab, p, topKKey(logits, vocab, p), probs);
  double massAbove = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (key(logits[i]) > key(mine)) {
      ++above;
      massAbove += probs[i];
    }
  }
  if (p.topK > 0 && above >= p.topK)
    return absl::InternalError(absl::StrCat("sampled token ", token, " has ",
                                            above, " larger logits; top_k is ",
                                            p.topK));
  if (p.topP < 1.0f && massAbove > double(p.topP) * z * (1 + 1e-4) + 1e-6)
    return absl::InternalError(absl::StrCat(
        "sampled token ", token, " lies outside the top_p ", p.topP,
        " nucleus (", massAbove / z, " of the mass is above it)"));
  if (probs[token] <= 0)
    return absl::InternalError(
        absl::StrCat("sampled token ", token, " has no probability"));
  if (probs[token] < p.minP * (1 - 1e-5f))
    return absl::InternalError(absl::StrCat(
        "sampled token ", token, " is ", probs[token],
        " times as likely as the likeliest, below min_p ", p.minP));
  return absl::OkStatus();
}

} // namespace kiln

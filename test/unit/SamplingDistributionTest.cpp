//===- SamplingDistributionTest.cpp - the sampler draws softmax(l / T) ----===//
//
// A goodness-of-fit test of kiln's sampling rule (runtime/Sampling.h, the
// host's statement; SampleKernelTest holds the generated kernel to it draw
// by draw): many seeded draws, their counts against the exact distribution
// softmax(penalized logits / T), cut to the top_k largest and then to the
// top_p nucleus, by Pearson's chi-square. The exact distribution is computed
// here, in double precision and without Sampling.cpp's code.
//
// How many draws. A sampler that draws token j with probability 1.5 p_j
// instead of p_j (the others scaled by (1 - 1.5 p_j) / (1 - p_j)) moves the
// statistic's mean by the noncentrality
//   lambda = n sum_i (q_i - p_i)^2 / p_i = n p_j / (4 (1 - p_j)),
// so with n = 40000 draws every token with p_j >= 0.02 gives lambda >= 204.
// The cut is alpha = 1e-6: with 63 degrees of freedom (64 tokens, the most
// here) the statistic must stay under 132. A sampler distorted so has a
// statistic of mean df + lambda >= 267 and standard deviation
// sqrt(2 (df + 2 lambda)) (31 at p_j = 0.02): 4.4 of them above the cut, a
// miss of chance < 1e-5; with fewer tokens the margin is wider. The correct
// sampler fails with chance 1e-6.
//
// Both are shown, not only computed: each test also runs the check on the
// same uniforms drawn from the distribution distorted so, for every token
// with p_j >= 0.02, and on kiln's rule with the usual bugs (a wrong
// temperature, a cut left out or off by one, a penalty left out), and
// requires each to fail. (Checked once by hand as well: Sampling.cpp with
// the weight of the 2nd, or the 8th, largest candidate times 1.5 fails
// every case, chi-square 450 to 930.) The draws are seeded
// (samplingUniform(seed, step) is a hash), so the outcome is fixed; a change
// of the rule or its hash that lands in the 1e-6 is a change to look at.
//
//===----------------------------------------------------------------------===//
#include "runtime/Sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace kiln {
namespace {

constexpr int64_t kVocab = 64;
constexpr int64_t kDraws = 40000;
constexpr double kAlpha = 1e-6;
constexpr double kMinProbability = 0.02; // the p that 1.5 p must be told from

/// Logits from mt19937's specified output (not normal_distribution, whose
/// values differ between standard libraries): uniform in [-3, 3), distinct.
std::vector<float> logitsOf(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> logits(kVocab); // [V]
  for (float &l : logits)
    l = float(rng() % 600000) / 100000.0f - 3.0f;
  return logits;
}

/// The exact distribution, stated plainly: penalties, softmax(l / T) over
/// the top_k largest, then the fewest of the largest that hold top_p of that
/// mass, renormalized. Logits must be distinct (no ties at a cut).
std::vector<double> exactDistribution(std::vector<float> logits,
                                      const SamplingParams &p,
                                      const std::vector<int32_t> &seen) {
  int64_t v = int64_t(logits.size());
  for (int64_t i = 0; i < v && !seen.empty(); ++i)
    if (seen[i] > 0) {
      double l = logits[i];
      l = l > 0 ? l / p.repetitionPenalty : l * p.repetitionPenalty;
      logits[i] = float(l - p.presencePenalty - p.frequencyPenalty * seen[i]);
    }
  std::vector<int64_t> order(v); // largest first
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  int64_t k = p.topK > 0 && p.topK < v ? p.topK : v;
  std::vector<double> w(v, 0.0); // [V]
  double z = 0;
  for (int64_t r = 0; r < k; ++r) {
    int64_t i = order[r];
    w[i] = std::exp((double(logits[i]) - logits[order[0]]) / p.temperature);
    z += w[i];
  }
  if (p.topP < 1.0f) {
    double mass = 0;
    int64_t r = 0;
    for (; r < k; ++r) {
      mass += w[order[r]];
      if (mass >= double(p.topP) * z)
        break;
    }
    for (++r; r < k; ++r)
      w[order[r]] = 0;
  }
  double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double &x : w)
    x /= total;
  return w;
}

/// Q(a, x), the regularized upper incomplete gamma function (Numerical
/// Recipes' gammq: a series below a + 1, a continued fraction above).
double upperGamma(double a, double x) {
  if (x <= 0)
    return 1;
  double lead = std::exp(-x + a * std::log(x) - std::lgamma(a));
  if (x < a + 1) {
    double term = 1 / a, sum = term;
    for (int n = 1; n < 1000 && std::abs(term) > 1e-15 * std::abs(sum); ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1 - sum * lead;
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    d = std::abs(d) < 1e-300 ? 1e-300 : d;
    c = b + an / c;
    c = std::abs(c) < 1e-300 ? 1e-300 : c;
    d = 1 / d;
    double step = d * c;
    h *= step;
    if (std::abs(step - 1) < 1e-15)
      break;
  }
  return h * lead;
}

struct Fit {
  double statistic = 0;
  int degrees = 0;
  double pValue = 1;
  int64_t outside = 0; // draws of tokens the cuts exclude
  bool passes() const { return outside == 0 && pValue > kAlpha; }
  std::string str() const {
    return "chi-square " + std::to_string(statistic) + " with " +
           std::to_string(degrees) + " degrees of freedom (p-value " +
           std::to_string(pValue) + "), " + std::to_string(outside) +
           " draws outside the cuts";
  }
};

/// Pearson's chi-square of `counts` against `probs`: a bin per token whose
/// expected count is at least 5, the rest of the support pooled into one.
Fit chiSquare(const std::vector<int64_t> &counts,
              const std::vector<double> &probs) {
  int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  Fit fit;
  int bins = 0;
  double pooledExpected = 0, pooledObserved = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    double expected = n * probs[i];
    if (probs[i] == 0) {
      fit.outside += counts[i];
    } else if (expected < 5) {
      pooledExpected += expected;
      pooledObserved += counts[i];
    } else {
      fit.statistic +=
          (counts[i] - expected) * (counts[i] - expected) / expected;
      ++bins;
    }
  }
  if (pooledExpected > 0) {
    fit.statistic += (pooledObserved - pooledExpected) *
                     (pooledObserved - pooledExpected) / pooledExpected;
    ++bins;
  }
  fit.degrees = bins - 1;
  fit.pValue = fit.degrees > 0
                   ? upperGamma(fit.degrees / 2.0, fit.statistic / 2)
                   : (fit.statistic == 0 ? 1.0 : 0.0);
  return fit;
}

/// The uniform of draw d: step d of one seed, or (along the other axis)
/// step `p.step` of seed `p.seed + d`.
float uniformOf(const SamplingParams &p, int64_t d, bool alongSeeds) {
  return alongSeeds ? samplingUniform(p.seed + uint32_t(d), p.step)
                    : samplingUniform(p.seed, uint32_t(d));
}

/// kDraws tokens from kiln's rule, with (seed, step) as uniformOf says.
std::vector<int64_t> drawKiln(const std::vector<float> &logits,
                              const SamplingParams &base,
                              const std::vector<int32_t> &seen,
                              bool alongSeeds) {
  std::vector<int64_t> counts(logits.size(), 0);
  for (int64_t d = 0; d < kDraws; ++d) {
    SamplingParams p = base;
    if (alongSeeds)
      p.seed = base.seed + uint32_t(d);
    else
      p.step = uint32_t(d);
    int32_t t = sampleOnHost(logits.data(), int64_t(logits.size()), p,
                             seen.empty() ? nullptr : seen.data());
    ++counts[t];
  }
  return counts;
}

/// kDraws tokens of `probs` by inverse CDF, on the same uniforms: the
/// stand-in for a wrong sampler.
std::vector<int64_t> drawFrom(const std::vector<double> &probs,
                              const SamplingParams &p, bool alongSeeds) {
  std::vector<int64_t> counts(probs.size(), 0);
  for (int64_t d = 0; d < kDraws; ++d) {
    double r = uniformOf(p, d, alongSeeds);
    size_t t = 0, last = 0;
    for (; t < probs.size(); ++t) {
      if (probs[t] <= 0)
        continue;
      last = t;
      if (r < probs[t])
        break;
      r -= probs[t];
    }
    ++counts[t < probs.size() ? t : last];
  }
  return counts;
}

/// `probs` with token j drawn 1.5 times as often, the others scaled down.
std::vector<double> distorted(std::vector<double> probs, size_t j) {
  double rest = (1 - 1.5 * probs[j]) / (1 - probs[j]);
  for (size_t i = 0; i < probs.size(); ++i)
    probs[i] = i == j ? 1.5 * probs[j] : probs[i] * rest;
  return probs;
}

struct Case {
  const char *name;
  uint32_t logitSeed;
  SamplingParams params;
  bool alongSeeds = false;
  std::vector<int32_t> seen = {};
};

/// Kiln's draws fit; the same check fails each distortion by 1.5 and each
/// of the wrong rules given (a sampler with those parameters instead).
void checkCase(const Case &c, const std::vector<SamplingParams> &wrongRules) {
  SCOPED_TRACE(c.name);
  std::vector<float> logits = logitsOf(c.logitSeed);
  std::vector<double> probs = exactDistribution(logits, c.params, c.seen);

  Fit kiln = chiSquare(drawKiln(logits, c.params, c.seen, c.alongSeeds), probs);
  EXPECT_TRUE(kiln.passes()) << "kiln's sampler: " << kiln.str();
  EXPECT_GE(kiln.degrees, 3) << "too few tokens to test";

  // The inverse CDF itself is right (it is the yardstick of the rest).
  Fit same = chiSquare(drawFrom(probs, c.params, c.alongSeeds), probs);
  EXPECT_TRUE(same.passes()) << "the exact distribution: " << same.str();

  int tested = 0;
  for (size_t j = 0; j < probs.size(); ++j) {
    if (probs[j] < kMinProbability || 1.5 * probs[j] >= 1)
      continue;
    ++tested;
    Fit off =
        chiSquare(drawFrom(distorted(probs, j), c.params, c.alongSeeds), probs);
    EXPECT_FALSE(off.passes())
        << "token " << j << " drawn with 1.5 x " << probs[j]
        << " was not told apart: " << off.str();
  }
  EXPECT_GE(tested, 3);

  for (const SamplingParams &wrong : wrongRules) {
    Fit off = chiSquare(drawKiln(logits, wrong, c.seen, c.alongSeeds), probs);
    EXPECT_FALSE(off.passes())
        << "a sampler with temperature " << wrong.temperature << ", top-k "
        << wrong.topK << ", top-p " << wrong.topP
        << " was not told apart: " << off.str();
  }
}

SamplingParams with(SamplingParams p, float temperature, int32_t topK,
                    float topP) {
  p.temperature = temperature;
  p.topK = topK;
  p.topP = topP;
  return p;
}

TEST(SamplingDistribution, TemperatureOnly) {
  Case c{"temperature 1.5", 1, {1.5f, 1.0f, 0, 101, 0}};
  checkCase(c, {with(c.params, 1.35f, 0, 1.0f), with(c.params, 1.0f, 0, 1.0f)});
}

TEST(SamplingDistribution, TopK) {
  Case c{"temperature 0.8, top-k 12", 2, {0.8f, 1.0f, 12, 102, 0}};
  checkCase(c, {with(c.params, 0.8f, 13, 1.0f), with(c.params, 0.8f, 0, 1.0f),
                with(c.params, 0.7f, 12, 1.0f)});
}

TEST(SamplingDistribution, TopP) {
  Case c{"temperature 1.2, top-p 0.8", 3, {1.2f, 0.8f, 0, 103, 0}};
  checkCase(c, {with(c.params, 1.2f, 0, 0.9f), with(c.params, 1.2f, 0, 1.0f),
                with(c.params, 1.0f, 0, 0.8f)});
}

TEST(SamplingDistribution, TopKThenTopPAlongTheSeeds) {
  // One step, a seed per draw: the hash is uniform along the other axis.
  Case c{"temperature 1, top-k 16, top-p 0.9, seeds",
         4,
         {1.0f, 0.9f, 16, 1000, 5},
         true};
  checkCase(c, {with(c.params, 1.0f, 0, 0.9f), with(c.params, 1.0f, 16, 1.0f)});
}

TEST(SamplingDistribution, Penalties) {
  std::vector<int32_t> seen(kVocab, 0);
  for (int i = 0; i < kVocab; i += 3)
    seen[i] = 1 + i % 4;
  Case c{"temperature 0.9, top-p 0.95, penalties",
         5,
         {0.9f, 0.95f, 0, 105, 0, 1.3f, 0.4f, 0.2f},
         false,
         seen};
  SamplingParams noPenalties = c.params;
  noPenalties.repetitionPenalty = 1.0f;
  noPenalties.presencePenalty = noPenalties.frequencyPenalty = 0.0f;
  SamplingParams noFrequency = c.params;
  noFrequency.frequencyPenalty = 0.0f;
  checkCase(c, {noPenalties, noFrequency});
}

TEST(SamplingDistribution, ChiSquareTail) {
  // Q against known values: chi-square with 2 degrees of freedom has
  // survival exp(-x / 2); with 10, 23.209 is the 1% point.
  EXPECT_NEAR(upperGamma(1.0, 3.0), std::exp(-3.0), 1e-12);
  EXPECT_NEAR(upperGamma(5.0, 23.209 / 2), 0.01, 1e-5);
  EXPECT_NEAR(upperGamma(15.0, 59.703 / 2), 1e-3, 1e-6); // 30 df, 0.1%
}

} // namespace
} // namespace kiln

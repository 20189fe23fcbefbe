//===- SampleKernelTest.cpp - the sampling kernel follows the rule --------===//
//
// The generated sampling kernel (codegen/SampleKernel.cpp), built for the
// emu device, against the host's statement of the same rule
// (runtime/Sampling.h): the same token for every draw, and frequencies that
// follow the probabilities.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "runtime/Sampling.h"
#include "runtime/emu/EmuCompiler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kiln {
namespace {

constexpr int64_t kVocab = 50;

/// The sampling kernel of a vocabulary, compiled for the emu device.
struct Sampler {
  explicit Sampler(int64_t vocab) : vocab(vocab) {
    CudaKernel k = emitSampler(vocab);
    auto fns = compileEmuKernels({kernelCode(k)});
    EXPECT_TRUE(fns.ok()) << fns.status();
    if (fns.ok())
      launch = (*fns)[0];
    threads = unsigned(k.blockThreads);
  }

  /// The kernel's token for the last of `rows` rows of logits; the rows'
  /// input tokens (`tokens`, one per row, 0 when not given) join `history`
  /// (a fresh one when not given) first. `bias` is the sequence's logit
  /// bias row (p.biased says whether it applies).
  int32_t sample(const std::vector<float> &logits, SamplingParams p,
                 std::vector<int32_t> tokens = {},
                 std::vector<int32_t> *history = nullptr,
                 const LogitBias &bias = {}) const {
    int32_t count[2] = {int32_t(logits.size() / vocab), 0}, token = -1;
    tokens.resize(count[0], 0);
    std::vector<int32_t> fresh(vocab, 0); // [V]
    std::vector<int32_t> &seen = history ? *history : fresh;
    std::vector<float> biasRow(vocab, 0.0f); // [V]
    for (auto [t, b] : bias)
      biasRow[t] += b;
    std::vector<float> scratch(2 * vocab);  // [2, V]
    std::vector<int32_t> seqs(count[0], 0); // [rows]: all one sequence
    void *args[] = {const_cast<float *>(logits.data()),
                    count,
                    &p,
                    tokens.data(),
                    seqs.data(),
                    seen.data(),
                    biasRow.data(),
                    scratch.data(),
                    &token};
    if (launch)
      launch(1, 1, 1, threads, args);
    return token;
  }

  int64_t vocab;
  EmuLaunchFn launch = nullptr;
  unsigned threads = 0;
};

class SampleKernel : public ::testing::Test {
protected:
  static void SetUpTestSuite() { sampler_ = new Sampler(kVocab); }
  static void TearDownTestSuite() { delete sampler_; }

  int32_t sample(const std::vector<float> &logits, SamplingParams p,
                 std::vector<int32_t> tokens = {},
                 std::vector<int32_t> *history = nullptr,
                 const LogitBias &bias = {}) {
    return sampler_->sample(logits, p, std::move(tokens), history, bias);
  }

  static Sampler *sampler_;
};
Sampler *SampleKernel::sampler_ = nullptr;

std::vector<float> randomLogits(std::mt19937 &rng, int64_t rows) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(rows * kVocab); // [rows, V]
  for (float &l : logits)
    l = normal(rng);
  return logits;
}

TEST_F(SampleKernel, GreedyIsTheFirstLargestOfTheLastRow) {
  std::vector<float> logits(2 * kVocab, 0.0f); // [2, V]
  logits[7] = 9.0f;                            // row 0: not the step's row
  logits[kVocab + 3] = 5.0f;
  logits[kVocab + 11] = 5.0f;
  logits[kVocab + 20] = std::nanf("");
  EXPECT_EQ(sample(logits, {}), 3);
  EXPECT_EQ(sample(logits, {0.7f, 1.0f, 1, 5, 0}), 3); // top_k 1
}

TEST_F(SampleKernel, EveryDrawIsTheHostRulesToken) {
  std::mt19937 rng(1);
  const SamplingParams cases[] = {
      {1.0f, 1.0f, 0, 11, 0},  // temperature only
      {0.7f, 1.0f, 5, 12, 0},  // top-k
      {1.3f, 0.8f, 0, 13, 0},  // top-p
      {0.9f, 0.5f, 10, 14, 0}, // both
      {1.0f, 0.0f, 0, 15, 0},  // top-p 0: the largest only
  };
  for (const SamplingParams &base : cases)
    for (uint32_t step = 0; step < 60; ++step) {
      std::vector<float> logits = randomLogits(rng, 1);
      SamplingParams p = base;
      p.step = step;
      int32_t token = sample(logits, p);
      ASSERT_EQ(token, sampleOnHost(logits.data(), kVocab, p))
          << "temperature " << p.temperature << ", top-k " << p.topK
          << ", top-p " << p.topP << ", step " << step;
      ASSERT_TRUE(checkSampled(logits.data(), kVocab, p, token).ok());
    }
}

TEST_F(SampleKernel, PenaltiesFollowTheHostRuleAndTheHistory) {
  // A sequence of steps: each step's token joins the history the kernel
  // keeps, and the penalties push the draws away from repeats.
  std::mt19937 rng(2);
  std::vector<int32_t> history(kVocab, 0), host(kVocab, 0); // [V]
  SamplingParams p{0.8f, 0.95f, 0, 21, 0, 1.3f, 0.4f, 0.2f};
  int32_t fed = 7;
  for (uint32_t step = 0; step < 40; ++step) {
    std::vector<float> logits = randomLogits(rng, 1);
    p.step = step;
    ++host[fed];
    int32_t token = sample(logits, p, {fed}, &history);
    ASSERT_EQ(history, host) << "step " << step;
    ASSERT_EQ(token, sampleOnHost(logits.data(), kVocab, p, host.data()))
        << "step " << step;
    ASSERT_TRUE(
        checkSampled(logits.data(), kVocab, p, token, host.data()).ok());
    fed = token;
  }
  // Greedy with a strong repetition penalty never repeats a seen token
  // whose logit is positive when an unseen one beats its penalized value.
  std::vector<float> flat(kVocab, 1.0f); // [V]
  flat[3] = 1.5f;
  std::vector<int32_t> seen(kVocab, 0);
  SamplingParams greedy;
  greedy.repetitionPenalty = 2.0f;
  EXPECT_EQ(sample(flat, greedy, {3}, &seen), 0); // 1.5 / 2 < 1
  EXPECT_EQ(seen[3], 1);
}

TEST_F(SampleKernel, BiasMinPAndScheduleFollowTheHostRule) {
  // A logit bias (a boost, a ban), min-p and a temperature schedule from 1.4
  // to 0 over 30 steps: the kernel draws the host rule's token at every
  // step, the banned token never, and the schedule's last step is greedy.
  std::mt19937 rng(4);
  const LogitBias bias = {{3, 2.5f}, {9, -INFINITY}, {20, -1.0f}};
  SamplingParams p{1.4f, 0.95f, 0, 41, 0};
  p.minP = 0.05f;
  p.temperatureEnd = 0.0f;
  p.scheduleSteps = 30;
  p.biased = 1;
  for (uint32_t step = 0; step < 30; ++step) {
    std::vector<float> logits = randomLogits(rng, 1);
    logits[9] += 8.0f; // the largest, but banned
    p.step = step;
    int32_t token = sample(logits, p, {}, nullptr, bias);
    ASSERT_EQ(token, sampleOnHost(logits.data(), kVocab, p, nullptr, bias))
        << "step " << step << ", temperature " << p.temperatureAt();
    ASSERT_TRUE(
        checkSampled(logits.data(), kVocab, p, token, nullptr, bias).ok());
    EXPECT_NE(token, 9);
  }
  EXPECT_FLOAT_EQ((SamplingParams{.temperature = 1.4f,
                                  .step = 10,
                                  .temperatureEnd = 0.0f,
                                  .scheduleSteps = 21}
                       .temperatureAt()),
                  0.7f);
  EXPECT_TRUE((SamplingParams{.temperature = 1.4f,
                              .step = 29,
                              .temperatureEnd = 0.0f,
                              .scheduleSteps = 30}
                   .greedy()));
  // Unbiased (biased = 0), the kernel ignores the row: 9 wins greedily.
  std::vector<float> logits(kVocab, 0.0f);
  logits[9] = 1.0f;
  EXPECT_EQ(sample(logits, {}, {}, nullptr, bias), 9);
  SamplingParams greedy;
  greedy.biased = 1;
  EXPECT_EQ(sample(logits, greedy, {}, nullptr, bias), 3);
}

TEST_F(SampleKernel, FrequenciesFollowTheProbabilities) {
  // p_i proportional to i + 1 for i < 4 (logits log(i + 1)), the rest
  // outside top-k 4: frequencies within 5 standard deviations of n * p_i.
  std::vector<float> logits(kVocab, -2.0f);
  for (int i = 0; i < 4; ++i)
    logits[i] = std::log(float(i + 1));
  constexpr int n = 500;
  int counts[kVocab] = {};
  for (uint32_t step = 0; step < n; ++step)
    ++counts[sample(logits, {1.0f, 1.0f, 4, 99, step})];
  for (int i = 0; i < 4; ++i) {
    double p = (i + 1) / 10.0, sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(counts[i], n * p, 5 * sd) << "token " << i;
  }
  EXPECT_EQ(counts[4] + counts[kVocab - 1], 0);
}

TEST_F(SampleKernel, ABatchSamplesEveryRowAsItsSequence) {
  // Grid (rows): row b is a token of sequence seqs[b], drawn with that
  // sequence's parameters and history; a padding row (at and past count)
  // is left alone.
  std::mt19937 rng(3);
  constexpr int rows = 4, count = 3;
  std::vector<float> logits = randomLogits(rng, rows); // [rows, V]
  std::vector<int32_t> tokens = {5, 6, 7, 0}, seqs = {2, 0, 1, 0};
  std::vector<SamplingParams> params = {
      {0.9f, 0.9f, 0, 31, 4, 1.2f, 0.0f, 0.0f},  // sequence 0
      {},                                        // sequence 1: greedy
      {1.1f, 1.0f, 8, 32, 9, 1.0f, 0.3f, 0.1f}}; // sequence 2
  std::vector<int32_t> history(3 * kVocab, 0);   // [sequences, V]
  history[2 * kVocab + 9] = 2;
  std::vector<float> bias(3 * kVocab, 0.0f); // [sequences, V]
  bias[0 * kVocab + 17] = 4.0f;              // sequence 0's, not sequence 2's
  params[0].biased = 1;
  std::vector<float> scratch(rows * 2 * kVocab); // [rows, 2, V]
  std::vector<int32_t> sampled(rows, -1);        // [rows]
  int32_t n[2] = {count, 0};
  void *args[] = {
      logits.data(),  n,           params.data(),  tokens.data(), seqs.data(),
      history.data(), bias.data(), scratch.data(), sampled.data()};
  ASSERT_NE(sampler_->launch, nullptr);
  sampler_->launch(rows, 1, 1, sampler_->threads, args);
  for (int b = 0; b < count; ++b) {
    std::vector<int32_t> seen(kVocab, 0); // [V]
    if (seqs[b] == 2)
      seen[9] = 2;
    ++seen[tokens[b]];
    const float *row = &logits[b * kVocab];
    LogitBias mine;
    if (seqs[b] == 0)
      mine = {{17, 4.0f}};
    EXPECT_EQ(sampled[b],
              sampleOnHost(row, kVocab, params[seqs[b]], seen.data(), mine))
        << "row " << b;
    EXPECT_EQ(history[seqs[b] * kVocab + tokens[b]], seen[tokens[b]]);
  }
  EXPECT_EQ(sampled[3], -1);
}

TEST(SampleKernelLargeVocabulary, EveryBatchOfTheSweepCounts) {
  // A vocabulary past the kernel's batches of loads (16 x 512 a batch,
  // the last one partial): greedy finds the first largest in the last
  // batch, NaNs lose, and draws with penalties over a long history follow
  // the host rule.
  constexpr int64_t vocab = 32003;
  Sampler sampler(vocab);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(vocab); // [V]
  for (float &l : logits)
    l = normal(rng);
  logits[vocab - 1] = 30.0f; // the tail of the last batch
  logits[31000] = 30.0f;     // the first largest
  logits[5] = std::nanf("");
  logits[8191] = 29.0f; // the end of the first batch
  EXPECT_EQ(sampler.sample(logits, {}), 31000);
  logits[31000] = 0.0f;
  EXPECT_EQ(sampler.sample(logits, {}), vocab - 1);
  logits[vocab - 1] = 0.0f;
  EXPECT_EQ(sampler.sample(logits, {}), 8191);

  std::vector<int32_t> history(vocab, 0); // [V]
  for (int i = 0; i < vocab; i += 7)
    history[i] = 1 + i % 3;
  std::vector<int32_t> host = history;
  SamplingParams greedy;
  greedy.repetitionPenalty = 100.0f; // 8191 seen: 29 / 100 loses
  history[8191] = host[8191] = 1;
  int32_t token = sampler.sample(logits, greedy, {}, &history);
  EXPECT_NE(token, 8191);
  EXPECT_EQ(token, sampleOnHost(logits.data(), vocab, greedy, host.data()));
  SamplingParams p{0.8f, 0.9f, 40, 51, 0, 1.3f, 0.4f, 0.2f};
  for (uint32_t step = 0; step < 4; ++step) {
    p.step = step;
    token = sampler.sample(logits, p, {}, &history);
    ASSERT_EQ(token, sampleOnHost(logits.data(), vocab, p, host.data()))
        << "step " << step;
    ASSERT_TRUE(checkSampled(logits.data(), vocab, p, token, host.data()).ok());
  }
}

TEST(Sampling, CheckSampledNamesTheCut) {
  float logits[] = {3.0f, 2.0f, 1.0f, 0.0f};
  SamplingParams topK{1.0f, 1.0f, 2, 0, 0};
  EXPECT_TRUE(checkSampled(logits, 4, topK, 1).ok());
  absl::Status s = checkSampled(logits, 4, topK, 2);
  EXPECT_EQ(s.message(), "sampled token 2 has 2 larger logits; top_k is 2");
  SamplingParams topP{1.0f, 0.5f, 0, 0, 0};
  EXPECT_TRUE(checkSampled(logits, 4, topP, 0).ok());
  EXPECT_FALSE(checkSampled(logits, 4, topP, 1).ok());
  EXPECT_FALSE(checkSampled(logits, 4, {}, 1).ok()); // greedy: 0 only
  SamplingParams minP{1.0f, 1.0f, 0, 0, 0};
  minP.minP = 0.3f; // exp(-1) = 0.37 stays, exp(-2) = 0.14 goes
  EXPECT_TRUE(checkSampled(logits, 4, minP, 1).ok());
  EXPECT_EQ(checkSampled(logits, 4, minP, 2).message(),
            "sampled token 2 is 0.135335 times as likely as the likeliest, "
            "below min_p 0.3");
}

} // namespace
} // namespace kiln

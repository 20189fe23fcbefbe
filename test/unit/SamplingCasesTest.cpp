//===- SamplingCasesTest.cpp - the sampling rule against transformers -----===//
//
// test/fixtures/sampling/cases.json (make_sampling_fixture.py): logits with
// a logit bias, temperature, top-k, top-p and min-p, and the tokens
// transformers 4.55.4's own processors (SequenceBias, Temperature, TopK,
// TopP, MinP, in generate()'s order) keep, with their probabilities. The
// host rule (runtime/Sampling.h; the kernel draws its tokens, which
// SampleKernelTest holds) must keep the same tokens with the same
// probabilities. Where a tie straddles top-p's cut, transformers keeps the
// tied tokens its sort happens to put first and kiln the whole tie (the
// fixture's kiln_rule records that set, and says why per case). kiln's
// top_k 1 is greedy (the first largest), not a draw among tied maxima.
//
//===----------------------------------------------------------------------===//
#include "runtime/Sampling.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>

namespace kiln {
namespace {

nlohmann::json cases() {
  const char *dir = std::getenv("KILN_FIXTURES");
  std::ifstream in(std::string(dir ? dir : "test/fixtures") +
                   "/sampling/cases.json");
  return nlohmann::json::parse(in);
}

TEST(SamplingCases, TheHostRuleKeepsWhatTransformersKeeps) {
  nlohmann::json all = cases();
  int agreed = 0;
  for (const nlohmann::json &c : all["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<float> logits; // [V]; null is -inf
    for (const nlohmann::json &l : c["logits"])
      logits.push_back(l.is_null() ? -INFINITY : l.get<float>());
    LogitBias bias;
    for (const auto &[id, b] : c["logit_bias"].items())
      bias.push_back({std::stoi(id), b.get<float>()});
    SamplingParams p;
    p.temperature = c["temperature"].get<float>();
    p.topK = c["top_k"].get<int32_t>();
    p.topP = c["top_p"].get<float>();
    p.minP = c["min_p"].get<float>();
    const int64_t vocab = int64_t(logits.size());
    std::vector<float> biased =
        penalize(logits.data(), vocab, p, nullptr, bias); // [V]
    std::vector<float> w = candidateWeights(biased.data(), vocab, p);
    double total = 0;
    for (float x : w)
      total += x;
    const bool agrees = c["kiln_rule_agrees_with_transformers"].get<bool>();
    agreed += agrees;
    const nlohmann::json &want = agrees ? c["transformers"] : c["kiln_rule"];
    // (A token the reference keeps at a probability f32 cannot hold, a
    // bias of -100's 1e-48, has weight 0 here: not kept.)
    std::vector<int64_t> kept, wanted;
    std::vector<double> probs;
    for (int64_t i = 0; i < vocab; ++i)
      if (w[i] > 0)
        kept.push_back(i);
    for (size_t j = 0; j < want["kept"].size(); ++j)
      if (double q = want["probs"][j].get<double>(); q > 1e-30) {
        wanted.push_back(want["kept"][j].get<int64_t>());
        probs.push_back(q);
      }
    if (p.topK == 1) {
      // kiln's top_k 1 is greedy: the first of the largest logits, where
      // transformers samples among all of them (a tie).
      ASSERT_EQ(kept.size(), 1u);
      EXPECT_EQ(kept[0], c["kiln_rule"]["kept"][0].get<int64_t>());
      for (int64_t t : wanted)
        EXPECT_EQ(biased[t], biased[kept[0]]) << "token " << t;
      continue;
    }
    ASSERT_EQ(kept, wanted);
    for (size_t j = 0; j < kept.size(); ++j)
      EXPECT_NEAR(w[kept[j]] / total, probs[j], 2e-6) << "token " << kept[j];
    if (!agrees) // the tie: transformers keeps a subset of kiln's
      for (int64_t t : c["transformers"]["kept"].get<std::vector<int64_t>>())
        EXPECT_GT(w[t], 0) << "token " << t << " kept by transformers";
  }
  // Ties at the top-p edge are the only difference, and the rare case.
  EXPECT_GE(agreed, 30);
}

} // namespace
} // namespace kiln

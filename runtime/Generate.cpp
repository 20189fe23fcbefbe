//===- Generate.cpp - generation on any device ----------------------------===//
#include "runtime/Generate.h"
#include "runtime/SafeTensors.h"

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"

#include <chrono>
#include <numeric>

namespace kiln {
double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

absl::Status checkPrompt(const std::vector<int32_t> &prompt,
                         int64_t maxNewTokens, int64_t vocab,
                         int64_t maxPositions) {
  if (prompt.empty())
    return absl::InvalidArgumentError("--prompt-ids: the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      return absl::InvalidArgumentError(
          absl::StrCat("--prompt-ids: id ", prompt[i], " at index ", i,
                       " is outside the vocabulary [0, ", vocab, ")"));
  if (maxNewTokens < 0)
    return absl::InvalidArgumentError("--max-new-tokens: must not be negative");
  if (int64_t(prompt.size()) + maxNewTokens > maxPositions)
    return absl::InvalidArgumentError(absl::StrCat(
        "--prompt-ids: the prompt (", prompt.size(), " tokens) plus ",
        maxNewTokens, " new tokens exceeds the context of ", maxPositions,
        " tokens"));
  return absl::OkStatus();
}

absl::StatusOr<Generation>
generate(Device &device, const std::vector<int32_t> &prompt,
         int64_t maxNewTokens, int64_t vocab, const SamplingParams &sampling,
         const GenerateHooks &hooks, const LogitBias &bias, Continuation from) {
  Generation g;
  g.vocab = vocab;
  g.prompt = prompt;
  std::vector<int32_t> positions(prompt.size()); // [P]
  std::iota(positions.begin(), positions.end(), from.start);

  // Step s of the run draws with (seed, s): a seed repeats a run.
  SamplingParams params = sampling;
  params.step = 0;
  params.biased = bias.empty() ? 0 : 1;
  if (absl::Status s = device.setLogitBias(bias); !s.ok())
    return s;
  device.setSampling(params);
  auto start = std::chrono::steady_clock::now();
  auto logits = device.prefill(prompt, positions);
  if (!logits.ok())
    return logits.status();
  g.prefillSeconds = secondsSince(start);
  g.prefillLogits = std::move(*logits);

  // A device that samples must have followed the rule on the logits it
  // returned: a token outside it is a kernel bug, not a choice.
  // The tokens the sequence has seen, for the penalties (the device keeps
  // its own count; this one checks it).
  std::vector<int32_t> fresh;
  std::vector<int32_t> &seen = from.seen ? *from.seen : fresh; // [V]
  seen.resize(vocab, 0);
  for (int32_t t : prompt)
    ++seen[t];
  auto pick = [&](const float *row) -> absl::StatusOr<int32_t> {
    std::optional<int32_t> sampled = device.sampledToken();
    if (!sampled)
      return sampleOnHost(row, vocab, params, seen.data(), bias);
    if (absl::Status s =
            checkSampled(row, vocab, params, *sampled, seen.data(), bias);
        !s.ok())
      return absl::InternalError(absl::StrCat(device.name(), " device: step ",
                                              params.step, ": ", s.message()));
    return *sampled;
  };
  auto next = pick(&g.prefillLogits[(prompt.size() - 1) * vocab]);
  if (!next.ok())
    return next.status();
  start = std::chrono::steady_clock::now();
  g.held = from.start + int64_t(prompt.size());
  for (int64_t i = 0; i < maxNewTokens; ++i) {
    if (absl::c_linear_search(hooks.stopTokens, *next))
      break;
    g.tokens.push_back(*next);
    if (hooks.onToken && !hooks.onToken(*next))
      break;
    ++g.held;
    params.step = uint32_t(i + 1);
    device.setSampling(params);
    ++seen[*next];
    auto row = device.decode(*next, int32_t(from.start + prompt.size() + i));
    if (!row.ok())
      return row.status();
    g.decodeLogits.insert(g.decodeLogits.end(), row->begin(), row->end());
    next = pick(row->data());
    if (!next.ok())
      return next.status();
  }
  g.decodeSeconds = secondsSince(start);
  return g;
}

absl::Status writeLogitsDump(const std::string &path, const Generation &g) {
  int64_t p = int64_t(g.prompt.size()), n = int64_t(g.tokens.size());
  return writeSafeTensors(
      path,
      {{"prompt_tokens", DType::I32, {p}, g.prompt.data()},
       {"prefill_logits", DType::F32, {p, g.vocab}, g.prefillLogits.data()},
       {"decode_tokens", DType::I32, {n}, g.tokens.data()},
       {"decode_logits", DType::F32, {n, g.vocab}, g.decodeLogits.data()}});
}

} // namespace kiln

//===- RunOptions.cpp -----------------------------------------------------===//
#include "runtime/RunOptions.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

#include <cmath>

namespace kiln {
namespace {
absl::Status notA(const char *flag, const std::string &text, const char *what) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": '", text, "' is not ", what));
}
} // namespace

absl::StatusOr<std::vector<int32_t>> parsePromptIds(const std::string &text) {
  if (text.empty())
    return absl::InvalidArgumentError(
        "--prompt-ids: give the prompt as token ids, e.g. --prompt-ids 1,2,3");
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id))
      return absl::InvalidArgumentError(absl::StrCat(
          "--prompt-ids: '", std::string(part), "' is not an integer"));
    ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<int64_t> parseMaxNewTokens(const std::string &text) {
  int64_t n;
  if (!absl::SimpleAtoi(text, &n) || n < 0)
    return notA("max-new-tokens", text, "a non-negative integer");
  return n;
}

absl::StatusOr<SamplingParams> parseSampling(const SamplingFlags &f) {
  SamplingParams p;
  auto number = [](const std::string &text, float &out) {
    return absl::SimpleAtof(text, &out) && std::isfinite(out);
  };
  if (!number(f.temperature, p.temperature) || p.temperature < 0)
    return notA("temperature", f.temperature, "a number >= 0");
  if (!absl::SimpleAtoi(f.topK, &p.topK) || p.topK < 0)
    return notA("top-k", f.topK, "a non-negative integer");
  if (!number(f.topP, p.topP) || p.topP < 0 || p.topP > 1)
    return notA("top-p", f.topP, "a number in [0, 1]");
  if (!absl::SimpleAtoi(f.seed, &p.seed))
    return notA("seed", f.seed, "an integer in [0, 2^32)");
  if (!number(f.repetitionPenalty, p.repetitionPenalty) ||
      p.repetitionPenalty <= 0)
    return notA("repetition-penalty", f.repetitionPenalty, "a number > 0");
  if (!number(f.presencePenalty, p.presencePenalty))
    return notA("presence-penalty", f.presencePenalty, "a number");
  if (!number(f.frequencyPenalty, p.frequencyPenalty))
    return notA("frequency-penalty", f.frequencyPenalty, "a number");
  return p;
}

absl::StatusOr<std::vector<int32_t>> parseStopIds(const std::string &text,
                                                  int64_t vocab) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id) || id < 0 || id >= vocab)
      return absl::InvalidArgumentError(
          absl::StrCat("--stop-ids: '", std::string(part),
                       "' is not a token id in [0, ", vocab, ")"));
    ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<std::unique_ptr<WeightSet>>
openCheckpoint(const std::string &folder,
               const std::vector<WeightSpec> &specs) {
  if (!WeightSet::present(folder))
    return absl::InvalidArgumentError(absl::StrCat(
        folder, ": has no weights (model.safetensors); presets such as "
                "llama2-7b hold only shapes"));
  auto opened = WeightSet::open(folder);
  if (!opened.ok())
    return opened.status();
  if (absl::Status s = (*opened)->check(specs); !s.ok())
    return s;
  return opened;
}

std::vector<WeightSpec> manifestSpecs(const std::vector<WeightBuffer> &ws) {
  std::vector<WeightSpec> specs;
  for (const WeightBuffer &w : ws) {
    for (const WeightSource &s : w.sources)
      specs.push_back({s.name, s.shape});
    if (!w.scaledBy.empty())
      specs.push_back({w.scaledBy, {w.cols}});
  }
  return specs;
}

std::string generationReport(const std::string &model,
                             const std::string &device, const Generation &g,
                             const SamplingParams &sampling,
                             const std::string &dumpPath) {
  std::string out =
      absl::StrFormat("kiln: %s on %s: %d prompt tokens, %d new\n", model,
                      device, g.prompt.size(), g.tokens.size());
  absl::StrAppendFormat(&out, "  prefill   %.2f ms\n", g.prefillSeconds * 1e3);
  if (!g.tokens.empty())
    absl::StrAppendFormat(&out, "  decode    %.3f ms/token\n",
                          g.decodeSeconds * 1e3 / g.tokens.size());
  if (!sampling.greedy())
    absl::StrAppendFormat(
        &out, "  sampling  temperature %.2f, top-k %d, top-p %.2f, seed %u\n",
        sampling.temperature, sampling.topK, sampling.topP, sampling.seed);
  if (sampling.repetitionPenalty != 1 || sampling.presencePenalty != 0 ||
      sampling.frequencyPenalty != 0)
    absl::StrAppendFormat(&out,
                          "  penalties repetition %.2f, presence %.2f, "
                          "frequency %.2f\n",
                          sampling.repetitionPenalty, sampling.presencePenalty,
                          sampling.frequencyPenalty);
  out += "  generated";
  for (int32_t t : g.tokens)
    absl::StrAppend(&out, " ", t);
  out += "\n";
  if (!dumpPath.empty())
    absl::StrAppend(&out, "  logits    ", dumpPath, "\n");
  return out;
}

} // namespace kiln

//===- RunOptions.cpp -----------------------------------------------------===//
#include "runtime/RunOptions.h"
#include "runtime/JsonRead.h"
#include "runtime/LoraAdapter.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

namespace kiln {
namespace {
absl::Status notA(const char *flag, const std::string &text, const char *what) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": '", text, "' is not ", what));
}

/// The report's sampling line; none when every step is greedy.
std::string samplingLine(const SamplingParams &p) {
  bool draws = p.temperature > 0 || (p.scheduleSteps && p.temperatureEnd > 0);
  if (!draws || p.topK == 1)
    return "";
  std::string t = absl::StrFormat("temperature %.2f", p.temperature);
  if (p.scheduleSteps)
    t = absl::StrFormat("temperature %.2f -> %.2f over %u tokens",
                        p.temperature, p.temperatureEnd, p.scheduleSteps);
  return absl::StrFormat(
      "  sampling  %s, top-k %d, top-p %.2f%s, seed %u\n", t, p.topK, p.topP,
      p.minP > 0 ? absl::StrFormat(", min-p %.2f", p.minP) : "", p.seed);
}
} // namespace

absl::StatusOr<std::vector<std::vector<int32_t>>>
parsePromptIds(const std::string &flag) {
  std::string text = flag;
  if (!flag.empty() && flag[0] == '@') {
    std::ifstream in(flag.substr(1));
    if (!in)
      return absl::InvalidArgumentError(
          absl::StrCat("--prompt-ids: cannot read '", flag.substr(1), "'"));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (absl::StripAsciiWhitespace(text).empty())
    return absl::InvalidArgumentError(
        "--prompt-ids: give the prompt as token ids, e.g. --prompt-ids 1,2,3 "
        "(several: 1,2,3;4,5)");
  std::vector<std::vector<int32_t>> prompts;
  for (absl::string_view line :
       absl::StrSplit(text, absl::ByAnyChar(";\n"), absl::SkipWhitespace())) {
    std::vector<int32_t> &ids = prompts.emplace_back();
    for (absl::string_view part : absl::StrSplit(line, ',')) {
      int32_t id;
      if (!absl::SimpleAtoi(part, &id))
        return absl::InvalidArgumentError(absl::StrCat(
            "--prompt-ids: '", std::string(part), "' is not an integer"));
      ids.push_back(id);
    }
  }
  return prompts;
}

absl::Status namePromptFlag(absl::Status status, const std::string &flag) {
  absl::string_view message = status.message();
  if (status.ok() || flag == "prompt-ids" ||
      !absl::ConsumePrefix(&message, "--prompt-ids:"))
    return status;
  return absl::Status(status.code(), absl::StrCat("--", flag, ":", message));
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
  if (!number(f.minP, p.minP) || p.minP < 0 || p.minP > 1)
    return notA("min-p", f.minP, "a number in [0, 1]");
  if (!f.temperatureSchedule.empty()) {
    std::vector<std::string> ends = absl::StrSplit(f.temperatureSchedule, ':');
    if (ends.size() != 2 || !number(ends[0], p.temperature) ||
        !number(ends[1], p.temperatureEnd) || p.temperature < 0 ||
        p.temperatureEnd < 0)
      return notA("temperature-schedule", f.temperatureSchedule,
                  "T0:T1, two temperatures >= 0");
    p.scheduleSteps = uint32_t(std::clamp<int64_t>(f.newTokens, 1, 1 << 30));
  }
  return p;
}

absl::StatusOr<LogitBias> parseLogitBias(const std::string &text,
                                         int64_t vocab) {
  auto fault = [](const std::string &what) {
    return absl::InvalidArgumentError(absl::StrCat("--logit-bias: ", what));
  };
  // (id as text, bias), from the flag or the file.
  std::vector<std::pair<std::string, float>> entries;
  if (!text.empty() && text[0] == '@') {
    const std::string path = text.substr(1);
    std::ifstream in(path);
    if (!in)
      return fault(absl::StrCat("cannot read '", path, "'"));
    nlohmann::json json =
        nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || !json.is_object())
      return fault(absl::StrCat(path, ": not a JSON object of token ids and "
                                      "biases ({\"13\": -100})"));
    for (const auto &[id, bias] : json.items()) {
      if (!bias.is_number())
        return fault(absl::StrCat(path, ": the bias of token '", id,
                                  "' is not a number"));
      entries.push_back({id, bias.get<float>()});
    }
  } else {
    for (absl::string_view part :
         absl::StrSplit(text, ',', absl::SkipWhitespace())) {
      std::pair<std::string, std::string> kv =
          absl::StrSplit(part, absl::MaxSplits('=', 1));
      if (std::string(part).find('=') == std::string::npos)
        return fault(
            absl::StrCat("'", std::string(part), "' is not ID=BIAS (13=-100)"));
      float bias;
      if (!absl::SimpleAtof(absl::StripAsciiWhitespace(kv.second), &bias) ||
          std::isnan(bias) || bias == INFINITY)
        return fault(absl::StrCat("the bias of token ", kv.first, ", '",
                                  kv.second, "', is not a number (or -inf)"));
      entries.push_back({kv.first, bias});
    }
  }
  LogitBias out;
  for (const auto &[idText, bias] : entries) {
    int32_t id;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(idText), &id) || id < 0 ||
        id >= vocab)
      return fault(absl::StrCat("token '", idText,
                                "' is not a token id in [0, ", vocab, ")"));
    for (const auto &[seen, b] : out)
      if (seen == id)
        return fault(absl::StrCat("token ", id, " is given twice"));
    out.push_back({id, bias});
  }
  return out;
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
openCheckpoint(const std::string &folder, const std::vector<WeightSpec> &specs,
               const std::vector<std::string> &lora, int64_t headDim) {
  if (!WeightSet::present(folder))
    return absl::InvalidArgumentError(absl::StrCat(
        folder, ": has no weights (model.safetensors); presets such as "
                "llama2-7b hold only shapes"));
  auto opened = WeightSet::open(folder);
  if (!opened.ok())
    return opened.status();
  if (absl::Status s = (*opened)->check(specs); !s.ok())
    return s;
  std::vector<LoraAdapter> adapters;
  for (const std::string &spec : lora) {
    auto adapter = LoraAdapter::open(spec);
    if (!adapter.ok())
      return adapter.status();
    adapters.push_back(std::move(*adapter));
  }
  if (absl::Status s = mergeLora(**opened, adapters, headDim); !s.ok())
    return s;
  return opened;
}

std::vector<WeightSpec> manifestSpecs(const std::vector<WeightBuffer> &ws) {
  std::vector<WeightSpec> specs;
  for (const WeightBuffer &w : ws) {
    for (const WeightSource &s : w.sources) // whole, not a rank's slice
      specs.push_back({s.name, s.checkpointShape(), w.quant});
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
  out += samplingLine(sampling);
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

absl::StatusOr<RunResult> runRequests(Device &device, int64_t vocab,
                                      int64_t maxPositions,
                                      std::vector<Request> requests,
                                      const SchedulerOptions &options) {
  RunResult out;
  auto start = std::chrono::steady_clock::now();
  if (auto *plans = dynamic_cast<PlanDevice *>(&device)) {
    if (absl::Status s = checkMaxBatch(options.maxBatch, plans->program());
        !s.ok())
      return s;
    Scheduler scheduler(*plans, options);
    for (Request &r : requests)
      if (auto id = scheduler.submit(std::move(r)); !id.ok())
        return id.status();
    if (absl::Status s = scheduler.run(); !s.ok())
      return s;
    for (int64_t i = 0; i < scheduler.requests(); ++i)
      out.completions.push_back(scheduler.completion(i));
    out.stats = scheduler.stats();
  } else {
    // One sequence at a time (the ref device).
    for (const Request &r : requests)
      if (absl::Status s =
              checkPrompt(r.prompt, r.maxNewTokens, vocab, maxPositions);
          !s.ok())
        return s;
    for (const Request &r : requests) {
      auto g = generate(device, r.prompt, r.maxNewTokens, vocab, r.sampling,
                        r.hooks, r.logitBias);
      if (!g.ok())
        return g.status();
      SchedulerStats &st = out.stats;
      int64_t n = int64_t(g->tokens.size());
      st.steps += n;
      st.rows += n;
      st.newTokens += n;
      st.peakBatch = 1;
      st.prefillSeconds += g->prefillSeconds;
      st.decodeSeconds += g->decodeSeconds;
      out.completions.push_back({std::move(*g), absl::OkStatus(), true});
    }
  }
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return out;
}

absl::Status checkMaxBatch(int64_t maxBatch, const Program &program) {
  if (maxBatch <= program.sequences)
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--max-batch ", maxBatch, ": the bundle runs at most ", program.sequences,
      " sequences at once (compile it with a larger --max-batch)"));
}

std::string dumpPathFor(const std::string &path, size_t i, size_t n) {
  if (n == 1 || path.empty())
    return path;
  size_t dot = path.rfind('.');
  size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return absl::StrCat(path, ".", i);
  return absl::StrCat(path.substr(0, dot), ".", i, path.substr(dot));
}

std::string profileReport(const RunProfile &profile) {
  std::string out;
  struct Kind {
    const char *name, *step; // "decode", and what one of its steps is
    const StepTimes *times;
  };
  for (const auto &[kind, step, times] :
       {Kind{"prefill", "chunk", &profile.prefill},
        Kind{"decode", "step", &profile.decode}}) {
    if (times->steps == 0)
      continue;
    double total = 0;
    for (const auto &[kernel, s] : times->kernels)
      total += s.micros;
    absl::StrAppendFormat(
        &out,
        "  profile   %s: %d %s%s, %.3f ms each on the device (every launch "
        "timed alone, no graphs)\n",
        kind, times->steps, step, times->steps == 1 ? "" : "s",
        total / 1e3 / times->steps);
    absl::StrAppendFormat(&out, "    %-40s %7s %10s %6s %9s %10s %8s\n",
                          "kernel", "calls", "ms", "share", "us/call",
                          "weights MB", "GB/s");
    std::vector<std::pair<std::string, LaunchStats>> rows(
        times->kernels.begin(), times->kernels.end());
    // The most time first; the name breaks ties, so the order is stable.
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
      return a.second.micros != b.second.micros
                 ? a.second.micros > b.second.micros
                 : a.first < b.first;
    });
    for (const auto &[kernel, s] : rows) {
      double perCall = s.micros / std::max<int64_t>(s.calls, 1);
      double mb = double(s.weightBytes) / std::max<int64_t>(s.calls, 1) / 1e6;
      std::string gbs =
          s.weightBytes > 0 && s.micros > 0
              ? absl::StrFormat("%.1f", double(s.weightBytes) / s.micros / 1e3)
              : "-";
      absl::StrAppendFormat(
          &out, "    %-40s %7d %10.3f %5.1f%% %9.2f %10s %8s\n", kernel,
          s.calls, s.micros / 1e3, total > 0 ? 100 * s.micros / total : 0.0,
          perCall, s.weightBytes > 0 ? absl::StrFormat("%.2f", mb) : "-", gbs);
    }
  }
  return out;
}

std::string batchReport(const std::string &model, const std::string &device,
                        const RunResult &run, const SamplingParams &sampling,
                        const std::string &dumpPath) {
  const SchedulerStats &st = run.stats;
  std::string out = absl::StrFormat(
      "kiln: %s on %s: %d requests, batches of up to %d sequences\n", model,
      device, run.completions.size(), st.peakBatch);
  absl::StrAppendFormat(&out, "  prefill   %.2f ms in all\n",
                        st.prefillSeconds * 1e3);
  if (st.steps > 0)
    absl::StrAppendFormat(&out,
                          "  decode    %d steps, %d tokens, %.3f ms/step, "
                          "%.1f tokens/s\n",
                          st.steps, st.rows, st.decodeSeconds * 1e3 / st.steps,
                          st.decodeSeconds > 0 ? st.rows / st.decodeSeconds
                                               : 0.0);
  absl::StrAppendFormat(&out,
                        "  total     %d new tokens in %.2f s: %.1f tokens/s\n",
                        st.newTokens, run.seconds,
                        run.seconds > 0 ? st.newTokens / run.seconds : 0.0);
  out += samplingLine(sampling);
  for (size_t i = 0; i < run.completions.size(); ++i) {
    const Completion &c = run.completions[i];
    const Generation &g = c.generation;
    absl::StrAppendFormat(&out, "  request %d: %d prompt tokens, ", i,
                          g.prompt.size());
    if (!c.status.ok()) {
      absl::StrAppend(&out, "failed: ", c.status.message(), "\n");
      continue;
    }
    absl::StrAppendFormat(&out, "%d new, prefill %.2f ms", g.tokens.size(),
                          g.prefillSeconds * 1e3);
    if (!g.tokens.empty())
      absl::StrAppendFormat(&out, ", decode %.3f ms/token",
                            g.decodeSeconds * 1e3 / g.tokens.size());
    out += ":";
    for (int32_t t : g.tokens)
      absl::StrAppend(&out, " ", t);
    out += "\n";
    if (!dumpPath.empty())
      absl::StrAppend(&out, "    logits  ",
                      dumpPathFor(dumpPath, i, run.completions.size()), "\n");
  }
  return out;
}

absl::Status finishRun(const RunResult &run, const std::string &model,
                       const std::string &device,
                       const SamplingParams &sampling,
                       const std::string &dumpPath, std::string &report) {
  size_t n = run.completions.size();
  absl::Status failed;
  for (size_t i = 0; i < n; ++i) {
    const Completion &c = run.completions[i];
    if (!c.status.ok()) {
      if (failed.ok())
        failed = c.status;
      continue;
    }
    if (!dumpPath.empty())
      if (absl::Status s =
              writeLogitsDump(dumpPathFor(dumpPath, i, n), c.generation);
          !s.ok())
        return s;
  }
  report = n == 1 && failed.ok()
               ? generationReport(model, device, run.completions[0].generation,
                                  sampling, dumpPath)
               : batchReport(model, device, run, sampling, dumpPath);
  return failed;
}

} // namespace kiln

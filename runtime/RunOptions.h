//===- RunOptions.h - what kiln run and kiln-run share ----------*- C++ -*-===//
//
// The flags of a run, read from text with kiln's one-line errors, what a
// bundle needs of a checkpoint, and the report a run prints. kiln run (with
// the compiler) and kiln-run (the runtime alone) both use them.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_RUNOPTIONS_H
#define KILN_RUNTIME_RUNOPTIONS_H

#include "runtime/Generate.h"
#include "runtime/PlanDevice.h"
#include "runtime/Program.h"
#include "runtime/Sampling.h"
#include "runtime/Scheduler.h"
#include "runtime/Weights.h"

#include "absl/status/statusor.h"

#include <string>
#include <vector>

namespace kiln {

/// --prompt-ids: one prompt "1,2,3", several "1,2,3;4,5" (a request
/// each), or "@FILE": the same in a file, where lines separate prompts too.
absl::StatusOr<std::vector<std::vector<int32_t>>>
parsePromptIds(const std::string &text);

/// A prompt's fault names --prompt-ids (checkPrompt's, the scheduler's); a
/// run whose prompts came from another flag (kiln run --prompt "text")
/// gets `status` with that flag named instead. Other statuses pass as they
/// are.
absl::Status namePromptFlag(absl::Status status, const std::string &flag);

/// --max-new-tokens: a non-negative integer.
absl::StatusOr<int64_t> parseMaxNewTokens(const std::string &text);

/// The sampling flags as given, with their defaults.
struct SamplingFlags {
  std::string temperature = "0", topK = "0", topP = "1", seed = "0";
  std::string repetitionPenalty = "1", presencePenalty = "0",
              frequencyPenalty = "0";
  std::string minP = "0";
  std::string temperatureSchedule; // "T0:T1", or empty: none
  int64_t newTokens = 0;           // --max-new-tokens: the schedule's length
};

/// --temperature, --top-k, --top-p, --seed, the penalties, --min-p and
/// --temperature-schedule (which sets the temperature itself), each checked.
absl::StatusOr<SamplingParams> parseSampling(const SamplingFlags &flags);

/// --logit-bias ID=BIAS,...: a bias per token id (a number, or -inf to ban
/// it), or @FILE.json: an object {"ID": BIAS, ...} as OpenAI's logit_bias.
/// Ids must lie in the vocabulary and be given once.
absl::StatusOr<LogitBias> parseLogitBias(const std::string &text,
                                         int64_t vocab);

/// --stop-ids 2,13: token ids that end a generation.
absl::StatusOr<std::vector<int32_t>> parseStopIds(const std::string &text,
                                                  int64_t vocab);

/// A model folder's checkpoint, checked against what the model needs,
/// with the LoRA adapters `lora` ("FOLDER[:WEIGHT]", in order) merged in
/// (heads of headDim rows: LoraAdapter.h).
absl::StatusOr<std::unique_ptr<WeightSet>>
openCheckpoint(const std::string &folder, const std::vector<WeightSpec> &specs,
               const std::vector<std::string> &lora = {}, int64_t headDim = 0);

/// What a bundle's weight manifest needs of the checkpoint.
std::vector<WeightSpec> manifestSpecs(const std::vector<WeightBuffer> &ws);

/// Several requests run: every completion, and what the scheduler did.
struct RunResult {
  std::vector<Completion> completions;
  SchedulerStats stats;
  double seconds = 0; // wall time of the whole run
};

/// Runs `requests` on `device`: through the Scheduler, batched, when it
/// runs plans (emu, cuda); one after another with generate() otherwise.
/// Fails when the device does; a request's own fault is its completion's.
absl::StatusOr<RunResult> runRequests(Device &device, int64_t vocab,
                                      int64_t maxPositions,
                                      std::vector<Request> requests,
                                      const SchedulerOptions &options);

/// --max-batch against a bundle's slots: more sequences at once than it
/// was compiled for is a usage error.
absl::Status checkMaxBatch(int64_t maxBatch, const Program &program);

/// --dump-logits of request i of n: the path for one request, else the
/// path with ".i" before its extension (out.safetensors: out.0.safetensors).
std::string dumpPathFor(const std::string &path, size_t i, size_t n);

/// The lines a run of several requests prints: throughput, then each
/// request's tokens (or its error).
std::string batchReport(const std::string &model, const std::string &device,
                        const RunResult &run, const SamplingParams &sampling,
                        const std::string &dumpPath);

/// The end of a run: writes each request's --dump-logits file and sets
/// `report` (generationReport for one request, else batchReport). Fails
/// with the first failed request's error (the report names them all) or a
/// file that could not be written.
absl::Status finishRun(const RunResult &run, const std::string &model,
                       const std::string &device,
                       const SamplingParams &sampling,
                       const std::string &dumpPath, std::string &report);

/// --profile: a run's prefill chunks and decode steps, every launch timed
/// alone on the device (PlanDevice::timeLaunches).
struct RunProfile {
  StepTimes prefill, decode;
};

/// The profile's lines: per kind of step, each kernel by time (calls, time,
/// share of the steps' device time, time per call, the weights a call
/// reads and the bandwidth that makes).
std::string profileReport(const RunProfile &profile);

/// The lines a run prints: model, device, timings, sampling, tokens.
std::string generationReport(const std::string &model,
                             const std::string &device, const Generation &g,
                             const SamplingParams &sampling,
                             const std::string &dumpPath);

} // namespace kiln

#endif // KILN_RUNTIME_RUNOPTIONS_H

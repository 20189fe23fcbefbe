//===- Eval.cpp - kiln eval -----------------------------------------------===//
//
//   kiln eval MODEL --quantize FORMAT --prompt-ids IDS[;IDS...]
//   kiln eval MODEL --kv-dtype fp8|int8 --prompt-ids ...
//   kiln eval MODEL --compare-to MODEL2 [--quantize FORMAT] --prompt-ids ...
//
// How far one model's next-token distributions are from another's on the
// same token sequences (llama.cpp's perplexity --kl-divergence statistics).
// The base is MODEL as stored; the compared model is MODEL2 (--compare-to)
// or MODEL itself, quantized with --quantize (its weights) and --kv-dtype
// (its KV cache) when given. Each sequence runs
// teacher-forced, one prefill of the whole sequence, and every position's
// logits of both models are compared:
//
//   KL(base || compared) per position, from the log-softmax of each, in
//   double: its mean, median, 99th percentile and maximum (percentiles
//   interpolated linearly between the closest ranks, as llama.cpp and
//   numpy do); top-1 agreement (the share of positions whose argmax, the
//   lowest id winning a tie, is the same); the largest and the mean
//   |logit difference| over every position and vocabulary entry; and each
//   model's perplexity of the sequence's next tokens (positions 0..n-2
//   predicting tokens 1..n-1).
//
// Per sequence and over all of them (every position of every sequence
// pooled). The base runs every sequence first (its logits kept), then the
// compared model: one model on the device at a time.
//
//===----------------------------------------------------------------------===//
#include "codegen/BuildProgram.h"
#include "codegen/KernelCache.h"
#include "codegen/Nvrtc.h"
#include "reference/RefDevice.h"
#include "runtime/AtomicFile.h"
#include "runtime/Bundle.h"
#include "runtime/EmuDevice.h"
#include "runtime/Progress.h"
#include "runtime/RunOptions.h"
#include "runtime/cuda/CudaDevice.h"
#include "tools/kiln/Commands.h"

#include "absl/strings/str_cat.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace cl = llvm::cl;

namespace kiln {

cl::SubCommand &evalCommand() {
  static cl::SubCommand command(
      "eval", "Compare two models' next-token distributions (KL divergence, "
              "top-1 agreement, perplexity): MODEL against MODEL --quantize "
              "FORMAT, or against --compare-to MODEL2");
  return command;
}

namespace {
cl::opt<std::string> model(cl::Positional,
                           cl::desc("MODEL (the base, run as stored)"),
                           cl::sub(evalCommand()));
cl::opt<std::string> compareTo(
    "compare-to",
    cl::desc("The model compared with MODEL (default: MODEL itself, then "
             "--quantize is needed); --quantize, when given, quantizes this "
             "one, never the base"),
    cl::value_desc("model"), cl::sub(evalCommand()));
cl::opt<std::string>
    promptIds("prompt-ids",
              cl::desc("The token sequences, each run teacher-forced: "
                       "1,2,3; several: 1,2,3;4,5; or @FILE, one per line"),
              cl::value_desc("ids"), cl::sub(evalCommand()));
cl::opt<std::string>
    device("device",
           cl::desc("Where both models run: ref (default: the fp32 "
                    "interpreter of the IR), emu (the CUDA kernels on the "
                    "CPU) or cuda (GPU 0)"),
           cl::init("ref"), cl::sub(evalCommand()));
cl::opt<std::string> jsonFlag("json",
                              cl::desc("Also write the numbers as JSON"),
                              cl::value_desc("file.json"),
                              cl::sub(evalCommand()));

/// `m` on the device `where`, with `weights` (which must outlive it).
absl::StatusOr<std::unique_ptr<Device>> deviceFor(const std::string &where,
                                                  const CompiledModel &m,
                                                  const WeightSet &weights,
                                                  const CodegenOptions &knobs) {
  if (where == "ref") // quant-gemm=2's rounded inputs, as the kernels'
    return RefDevice::create(*m.module, weights,
                             {.fp8Activations = knobs.quantGemm == 2});
  auto program = buildProgram(*m.module, knobs);
  if (!program)
    return absl::InvalidArgumentError(
        absl::StrCat(m.source.name, ": ", toString(program.takeError())));
  if (where == "cuda")
    return cudaDeviceFor(std::move(*program),
                         WeightProvider::checkpoint(weights));
  return EmuDevice::create(std::move(*program),
                           WeightProvider::checkpoint(weights));
}

/// One position's logits row, its log-softmax in double.
void logSoftmax(const float *row, int64_t vocab, std::vector<double> &out) {
  out.resize(vocab);
  double m = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i)
    m = std::max(m, double(row[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i)
    sum += std::exp(double(row[i]) - m);
  double lse = m + std::log(sum);
  for (int64_t i = 0; i < vocab; ++i)
    out[i] = double(row[i]) - lse;
}

/// The argmax of a row, the lowest id winning a tie (greedy sampling's).
int64_t argmax(const float *row, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (row[i] > row[best])
      best = i;
  return best;
}

/// What a stretch of positions (a sequence, or all of them) adds up to.
struct Tally {
  int64_t sequences = 0, tokens = 0, predicted = 0, agree = 0;
  std::vector<double> kl; // [tokens]
  double maxDiff = 0, sumDiff = 0;
  int64_t diffs = 0;
  double nllBase = 0, nllCompared = 0; // over the predicted tokens

  void add(const Tally &o) {
    sequences += o.sequences;
    tokens += o.tokens;
    predicted += o.predicted;
    agree += o.agree;
    kl.insert(kl.end(), o.kl.begin(), o.kl.end());
    maxDiff = std::max(maxDiff, o.maxDiff);
    sumDiff += o.sumDiff;
    diffs += o.diffs;
    nllBase += o.nllBase;
    nllCompared += o.nllCompared;
  }
};

/// Sequence `tokens`' logits [n, V] of the base (`a`) and the compared
/// model (`b`).
Tally compare(const std::vector<int32_t> &tokens, const float *a,
              const float *b, int64_t vocab) {
  Tally t;
  int64_t n = int64_t(tokens.size());
  t.sequences = 1;
  t.tokens = n;
  t.predicted = n - 1;
  std::vector<double> la, lb; // [V]
  for (int64_t p = 0; p < n; ++p) {
    const float *ra = a + p * vocab, *rb = b + p * vocab;
    logSoftmax(ra, vocab, la);
    logSoftmax(rb, vocab, lb);
    double kl = 0;
    for (int64_t i = 0; i < vocab; ++i)
      kl += std::exp(la[i]) * (la[i] - lb[i]);
    t.kl.push_back(kl);
    t.agree += argmax(ra, vocab) == argmax(rb, vocab);
    for (int64_t i = 0; i < vocab; ++i) {
      double d = std::fabs(double(ra[i]) - double(rb[i]));
      t.maxDiff = std::max(t.maxDiff, d);
      t.sumDiff += d;
    }
    t.diffs += vocab;
    if (p + 1 < n) {
      t.nllBase -= la[tokens[p + 1]];
      t.nllCompared -= lb[tokens[p + 1]];
    }
  }
  return t;
}

/// The q-quantile of `sorted` (ascending), interpolated linearly between
/// the closest ranks.
double quantile(const std::vector<double> &sorted, double q) {
  double at = q * double(sorted.size() - 1);
  size_t lo = size_t(at);
  if (lo + 1 >= sorted.size())
    return sorted.back();
  double f = at - double(lo);
  return sorted[lo] * (1 - f) + sorted[lo + 1] * f;
}

struct Summary {
  int64_t sequences, tokens, predicted, agree;
  double klMean, klMedian, klP99, klMax, top1, maxDiff, meanDiff, pplBase,
      pplCompared;
};

Summary summarize(const Tally &t) {
  Summary s{};
  s.sequences = t.sequences;
  s.tokens = t.tokens;
  s.predicted = t.predicted;
  s.agree = t.agree;
  std::vector<double> kl = t.kl;
  std::sort(kl.begin(), kl.end());
  s.klMean = std::accumulate(kl.begin(), kl.end(), 0.0) / double(kl.size());
  s.klMedian = quantile(kl, 0.5);
  s.klP99 = quantile(kl, 0.99);
  s.klMax = kl.back();
  s.top1 = double(t.agree) / double(t.tokens);
  s.maxDiff = t.maxDiff;
  s.meanDiff = t.sumDiff / double(t.diffs);
  s.pplBase = std::exp(t.nllBase / double(t.predicted));
  s.pplCompared = std::exp(t.nllCompared / double(t.predicted));
  return s;
}

std::string report(const std::string &title, const Summary &s) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << title << "\n";
  os << llvm::formatv("  KL          mean {0:e4}  median {1:e4}  p99 {2:e4}  "
                      "max {3:e4}\n",
                      s.klMean, s.klMedian, s.klP99, s.klMax);
  os << llvm::formatv("  top-1       {0:f2}% ({1} of {2})\n", 100 * s.top1,
                      s.agree, s.tokens);
  os << llvm::formatv("  logit diff  max {0:e4}  mean {1:e4}\n", s.maxDiff,
                      s.meanDiff);
  os << llvm::formatv("  PPL         base {0:f4}  compared {1:f4}\n", s.pplBase,
                      s.pplCompared);
  return out;
}

llvm::json::Object toJson(const Summary &s) {
  return llvm::json::Object{{"tokens", s.tokens},
                            {"predicted", s.predicted},
                            {"kl", llvm::json::Object{{"mean", s.klMean},
                                                      {"median", s.klMedian},
                                                      {"p99", s.klP99},
                                                      {"max", s.klMax}}},
                            {"top1_agree", s.agree},
                            {"top1_agreement", s.top1},
                            {"max_abs_logit_diff", s.maxDiff},
                            {"mean_abs_logit_diff", s.meanDiff},
                            {"ppl_base", s.pplBase},
                            {"ppl_compared", s.pplCompared}};
}
} // namespace

int runEval() {
  if (model.empty())
    return fail(absl::InvalidArgumentError(
                    "kiln eval: name the base MODEL (a model folder)"),
                2);
  if (device != "ref" && device != "emu" && device != "cuda")
    return fail(
        absl::InvalidArgumentError(absl::StrCat(
            "--device: '", std::string(device), "' is not ref, emu or cuda")),
        2);
  if (promptIds.empty())
    return fail(absl::InvalidArgumentError(
                    "--prompt-ids: give the token sequences to compare on, "
                    "e.g. --prompt-ids 1,2,3 (several: 1,2,3;4,5)"),
                2);
  auto sequences = parsePromptIds(promptIds);
  if (!sequences.ok())
    return fail(sequences.status(), 2);
  auto opts = frontendOptions();
  if (!opts.ok())
    return fail(opts.status(), 2);
  if (compareTo.empty() && !opts->quantize && opts->kvDtype.empty() &&
      loraFlag.empty())
    return fail(absl::InvalidArgumentError(
                    "kiln eval: name what MODEL is compared with: --quantize "
                    "FORMAT or --kv-dtype fp8|int8 (MODEL quantized), --lora "
                    "ADAPTER (MODEL adapted) or --compare-to MODEL2"),
                2);
  auto knobs = codegenOptions();
  if (!knobs.ok())
    return fail(knobs.status(), 2);
  for (const std::string &m : {std::string(model), std::string(compareTo)})
    if (looksLikeBundle(m))
      return fail(absl::InvalidArgumentError(absl::StrCat(
                      m, ": kiln eval compiles its models: name a model "
                         "folder, not a bundle")),
                  2);

  // Both models compiled first (headers only), so that a mismatch fails
  // before anything runs. --quantize, --kv-dtype and --lora are the
  // compared model's alone.
  FrontendOptions baseOpts = *opts, comparedOpts = *opts;
  baseOpts.quantize.reset();
  baseOpts.kvDtype.clear();
  std::string comparedName = compareTo.empty() ? model : compareTo;
  mlir::MLIRContext ctx;
  auto base = compileModel(ctx, model, baseOpts);
  if (!base.ok())
    return fail(base.status());
  auto compared = compileModel(ctx, comparedName, comparedOpts);
  if (!compared.ok())
    return fail(compared.status());
  if (auto lora = loraSpecs(); lora.ok())
    compared->lora = std::move(*lora); // the compared model's alone
  else
    return fail(lora.status());
  const LlamaConfig &bc = base->source.config, &cc = compared->source.config;
  if (bc.vocabSize != cc.vocabSize)
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--compare-to: ", comparedName, " has a vocabulary of ",
                     cc.vocabSize, " tokens and ", std::string(model),
                     " one of ", bc.vocabSize, ": the models must share it")));
  int64_t vocab = bc.vocabSize;
  int64_t context = std::min(bc.maxPositions, cc.maxPositions);
  int64_t totalTokens = 0;
  for (size_t s = 0; s < sequences->size(); ++s) {
    const std::vector<int32_t> &seq = (*sequences)[s];
    if (seq.size() < 2)
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "--prompt-ids: sequence ", s, " has ", seq.size(),
          " token: a perplexity needs at least 2 (a token to predict)")));
    if (int64_t(seq.size()) > context)
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "--prompt-ids: sequence ", s, " has ", seq.size(),
          " tokens, more than the context (max_position_embeddings ", context,
          ")")));
    for (size_t i = 0; i < seq.size(); ++i)
      if (seq[i] < 0 || seq[i] >= vocab)
        return fail(absl::InvalidArgumentError(absl::StrCat(
            "--prompt-ids: id ", seq[i], " at index ", i, " of sequence ", s,
            " is outside the vocabulary [0, ", vocab, ")")));
    totalTokens += int64_t(seq.size());
  }

  // One model on the device at a time: the base's logits are kept, the
  // compared model's compared as each sequence comes.
  Progress progress("eval", 2 * totalTokens, 4096, "tokens");
  int64_t done = 0;
  std::vector<std::vector<float>> baseLogits; // [sequences][n * V]
  std::vector<Tally> tallies;                 // [sequences]
  std::string deviceName;
  for (int pass = 0; pass < 2; ++pass) {
    const CompiledModel &m = pass == 0 ? *base : *compared;
    auto weights = openCheckpoint(m.source.folder, m.weights, m.lora,
                                  m.source.config.headDim());
    if (!weights.ok())
      return fail(weights.status());
    auto dev = deviceFor(device, m, **weights, *knobs);
    if (!dev.ok())
      return fail(dev.status());
    deviceName = (*dev)->name();
    for (size_t s = 0; s < sequences->size(); ++s) {
      const std::vector<int32_t> &seq = (*sequences)[s];
      std::vector<int32_t> positions(seq.size()); // [n]
      std::iota(positions.begin(), positions.end(), 0);
      auto logits = (*dev)->prefill(seq, positions);
      if (!logits.ok())
        return fail(logits.status());
      if (int64_t(logits->size()) != int64_t(seq.size()) * vocab)
        return fail(absl::InternalError(absl::StrCat(
            deviceName, " device: ", logits->size() / vocab,
            " rows of logits for a prefill of ", seq.size(), " tokens")));
      if (pass == 0) {
        baseLogits.push_back(std::move(*logits));
      } else {
        tallies.push_back(
            compare(seq, baseLogits[s].data(), logits->data(), vocab));
        std::vector<float>().swap(baseLogits[s]);
      }
      done += int64_t(seq.size());
      progress.update(done);
    }
  }

  std::string how;
  if (comparedOpts.quantize)
    how = absl::StrCat("--quantize ", comparedOpts.quantize->name());
  if (!comparedOpts.kvDtype.empty())
    absl::StrAppend(&how, how.empty() ? "" : ", ", "--kv-dtype ",
                    comparedOpts.kvDtype);
  for (const std::string &spec : loraFlag)
    absl::StrAppend(&how, how.empty() ? "" : ", ", "--lora ", spec);
  std::string comparedDesc =
      absl::StrCat(comparedName, " (", how.empty() ? "as stored" : how, ")");
  llvm::outs() << "kiln: eval on " << deviceName << ": base "
               << std::string(model) << " (as stored), compared "
               << comparedDesc << "\n";
  Tally all;
  llvm::json::Array perSequence;
  for (size_t s = 0; s < tallies.size(); ++s) {
    Summary sum = summarize(tallies[s]);
    llvm::outs() << report(
        absl::StrCat("sequence ", s, ": ", sum.tokens, " tokens"), sum);
    perSequence.push_back(toJson(sum));
    all.add(tallies[s]);
  }
  Summary overall = summarize(all);
  llvm::outs() << report(
      absl::StrCat("overall: ", overall.sequences,
                   overall.sequences == 1 ? " sequence, " : " sequences, ",
                   overall.tokens, " tokens"),
      overall);
  if (!jsonFlag.empty()) {
    llvm::json::Object o = toJson(overall);
    o["sequences"] = overall.sequences;
    llvm::json::Value quant = nullptr, kv = "f16";
    if (comparedOpts.quantize)
      quant = comparedOpts.quantize->name();
    if (!comparedOpts.kvDtype.empty())
      kv = comparedOpts.kvDtype;
    llvm::json::Object root{
        {"device", deviceName},
        {"vocab", vocab},
        {"base", llvm::json::Object{{"model", std::string(model)},
                                    {"quantize", nullptr}}},
        {"compared", llvm::json::Object{{"model", comparedName},
                                        {"quantize", std::move(quant)},
                                        {"kv_dtype", std::move(kv)}}},
        {"sequences", std::move(perSequence)},
        {"overall", std::move(o)}};
    std::string text;
    llvm::raw_string_ostream js(text);
    js << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
    if (absl::Status s = writeFileAtomically(jsonFlag, text); !s.ok())
      return fail(s);
  }
  return 0;
}

} // namespace kiln

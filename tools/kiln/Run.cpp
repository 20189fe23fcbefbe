//===- Run.cpp - kiln run -------------------------------------------------===//
#include "codegen/KernelCache.h"
#include "codegen/Program.h"
#include "reference/RefDevice.h"
#include "runtime/Bundle.h"
#include "runtime/EmuDevice.h"
#include "runtime/Generate.h"
#include "runtime/cuda/CudaDevice.h"
#include "tools/kiln/Commands.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace cl = llvm::cl;

namespace kiln {

namespace {
cl::opt<std::string> model(cl::Positional, cl::desc("[MODEL]"),
                           cl::init("tiny-gqa"), cl::sub(runCommand()));
cl::opt<std::string> promptIds("prompt-ids",
                               cl::desc("The prompt as token ids: 1,2,3"),
                               cl::value_desc("ids"), cl::sub(runCommand()));
// Numbers are read as text so that a bad value gets kiln's own one-line
// error (cl::opt's parser writes its own format straight to stderr).
cl::opt<std::string> maxNewTokensFlag("max-new-tokens",
                                      cl::desc("Tokens to generate"),
                                      cl::init("16"), cl::sub(runCommand()));
cl::opt<std::string> device("device",
                            cl::desc("Where to run: ref (fp32 interpreter of "
                                     "the IR), emu (the CUDA kernels on "
                                     "the CPU) or cuda (GPU 0)"),
                            cl::init("ref"), cl::sub(runCommand()));
cl::opt<std::string> weightsFolder(
    "weights",
    cl::desc("The model folder whose safetensors a bundle runs with (or "
             "other weights for a model of the same shapes)"),
    cl::value_desc("folder"), cl::sub(runCommand()));
cl::opt<std::string> dumpLogits(
    "dump-logits",
    cl::desc("Write prompt, tokens and every logit in the fixture layout"),
    cl::value_desc("file.safetensors"), cl::sub(runCommand()));

cl::opt<std::string> temperatureFlag(
    "temperature",
    cl::desc("Sampling temperature (default 0: greedy, the argmax)"),
    cl::init("0"), cl::sub(runCommand()));
cl::opt<std::string> topKFlag("top-k",
                              cl::desc("Sample among the k largest logits "
                                       "(default 0: all)"),
                              cl::init("0"), cl::sub(runCommand()));
cl::opt<std::string> topPFlag("top-p",
                              cl::desc("Sample among the fewest largest "
                                       "logits holding this share of the "
                                       "probability (default 1: all)"),
                              cl::init("1"), cl::sub(runCommand()));
cl::opt<std::string> seedFlag("seed",
                              cl::desc("Seed of the sampling draws: a seed "
                                       "repeats a run (default 0)"),
                              cl::init("0"), cl::sub(runCommand()));

/// --temperature, --top-k, --top-p and --seed, each checked.
absl::StatusOr<SamplingParams> parseSampling() {
  SamplingParams p;
  auto bad = [](const char *flag, const std::string &text, const char *what) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", text, "' is not ", what));
  };
  if (!absl::SimpleAtof(std::string(temperatureFlag), &p.temperature) ||
      !(p.temperature >= 0) || std::isinf(p.temperature))
    return bad("temperature", temperatureFlag, "a number >= 0");
  if (!absl::SimpleAtoi(std::string(topKFlag), &p.topK) || p.topK < 0)
    return bad("top-k", topKFlag, "a non-negative integer");
  if (!absl::SimpleAtof(std::string(topPFlag), &p.topP) || !(p.topP >= 0) ||
      p.topP > 1)
    return bad("top-p", topPFlag, "a number in [0, 1]");
  if (!absl::SimpleAtoi(std::string(seedFlag), &p.seed))
    return bad("seed", seedFlag, "an integer in [0, 2^32)");
  return p;
}

/// The cuda device for a model compiled on the way: its kernels through
/// NVRTC (and the kernel cache) for the GPU's own target.
absl::StatusOr<std::unique_ptr<Device>> cudaDeviceFor(Program program,
                                                      const WeightSet &w) {
  auto gpu = probeCudaGpu();
  if (!gpu.ok())
    return gpu.status();
  KernelCache cache(cacheDirFlag.empty() ? KernelCache::defaultDir()
                                         : std::string(cacheDirFlag));
  int hits = 0;
  auto compiled =
      compileKernelsCached(program.kernels, {gpu->target}, cache, hits);
  if (!compiled)
    return absl::InternalError(toString(compiled.takeError()));
  KernelBinaries cubin, ptx;
  for (CompiledKernel &k : *compiled) {
    cubin[k.kernel][k.target] = std::move(k.cubin);
    ptx[k.kernel][k.target] = std::move(k.ptx);
  }
  return CudaDevice::create(std::move(program), cubin, ptx, w);
}

/// What a bundle's weight manifest needs of the checkpoint.
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

absl::StatusOr<std::vector<int32_t>> parseIds(const std::string &text) {
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
} // namespace

int runRun() {
  if (promptIds.empty())
    return fail(absl::InvalidArgumentError(
                    "--prompt-ids: give the prompt as token ids, e.g. "
                    "--prompt-ids 1,2,3"),
                2);
  int64_t maxNewTokens;
  if (!absl::SimpleAtoi(std::string(maxNewTokensFlag), &maxNewTokens) ||
      maxNewTokens < 0)
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "--max-new-tokens: '", std::string(maxNewTokensFlag),
                    "' is not a non-negative integer")),
                2);
  auto prompt = parseIds(promptIds);
  if (!prompt.ok())
    return fail(prompt.status(), 2);
  auto samplingOr = parseSampling();
  if (!samplingOr.ok())
    return fail(samplingOr.status(), 2);
  const SamplingParams &sampling = *samplingOr;
  auto knobs = codegenOptions();
  if (!knobs.ok())
    return fail(knobs.status(), 2);
  if (device != "ref" && device != "emu" && device != "cuda")
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "--device: '", std::string(device),
                    "' is not a device of this build (it has: ref, emu, "
                    "cuda)")),
                2);
  // A bundle runs as compiled (weights from --weights); a model folder or
  // preset is compiled on the way.
  mlir::MLIRContext ctx;
  std::optional<CompiledModel> compiledModel; // the ref device reads its IR
  absl::StatusOr<std::unique_ptr<Device>> dev;
  LlamaConfig c;
  std::string name = model;
  std::unique_ptr<WeightSet> weights;
  auto openWeights = [&](const std::string &folder,
                         const std::vector<WeightSpec> &specs) -> absl::Status {
    if (!WeightSet::present(folder))
      return absl::InvalidArgumentError(absl::StrCat(
          folder, ": has no weights (model.safetensors); presets such as "
                  "llama2-7b hold only shapes"));
    auto opened = WeightSet::open(folder);
    if (!opened.ok())
      return opened.status();
    weights = std::move(*opened);
    return weights->check(specs);
  };
  if (looksLikeBundle(model)) {
    if (weightsFolder.empty())
      return fail(absl::InvalidArgumentError(absl::StrCat(
                      std::string(model),
                      ": a bundle holds no weights: name the model folder "
                      "with --weights")),
                  2);
    if (device == "ref")
      return fail(absl::InvalidArgumentError(
                      "--device ref interprets kiln IR: run it on a model "
                      "folder or preset, not a bundle"),
                  2);
    auto bundle = readBundle(model);
    if (!bundle.ok())
      return fail(bundle.status());
    c = bundle->config;
    name = bundle->model;
    if (absl::Status s =
            checkPrompt(*prompt, maxNewTokens, c.vocabSize, c.maxPositions);
        !s.ok())
      return fail(s);
    if (absl::Status s =
            openWeights(weightsFolder, manifestSpecs(bundle->program.weights));
        !s.ok())
      return fail(s);
    if (device == "cuda")
      dev = CudaDevice::create(std::move(bundle->program), bundle->cubin,
                               bundle->ptx, *weights);
    else
      dev = EmuDevice::create(std::move(bundle->program), *weights);
  } else {
    auto opts = frontendOptions();
    if (!opts.ok())
      return fail(opts.status(), 2);
    auto compiledOr = compileModel(ctx, model, *opts);
    if (!compiledOr.ok())
      return fail(compiledOr.status());
    auto *compiled = &compiledModel.emplace(std::move(*compiledOr));
    c = compiled->source.config;
    name = compiled->source.name;
    if (absl::Status s =
            checkPrompt(*prompt, maxNewTokens, c.vocabSize, c.maxPositions);
        !s.ok())
      return fail(s);
    std::string folder =
        weightsFolder.empty() ? compiled->source.folder : weightsFolder;
    if (absl::Status s = openWeights(folder, compiled->weights); !s.ok())
      return fail(s);
    if (device == "emu" || device == "cuda") {
      auto program = buildProgram(*compiled->module, *knobs);
      if (!program)
        return fail(absl::InvalidArgumentError(absl::StrCat(
            compiled->source.name, ": ", toString(program.takeError()))));
      if (device == "cuda")
        dev = cudaDeviceFor(std::move(*program), *weights);
      else
        dev = EmuDevice::create(std::move(*program), *weights);
    } else {
      dev = RefDevice::create(*compiled->module, *weights);
    }
  }
  if (!dev.ok())
    return fail(dev.status());
  auto gen = generate(**dev, *prompt, maxNewTokens, c.vocabSize, sampling);
  if (!gen.ok())
    return fail(gen.status());
  if (!dumpLogits.empty())
    if (absl::Status s = writeLogitsDump(dumpLogits, *gen); !s.ok())
      return fail(s);

  auto &os = llvm::outs();
  os << llvm::formatv("kiln: {0} on {1}: {2} prompt tokens, {3} new\n", name,
                      (*dev)->name(), prompt->size(), gen->tokens.size());
  os << llvm::formatv("  prefill   {0:F2} ms\n", gen->prefillSeconds * 1e3);
  if (!gen->tokens.empty())
    os << llvm::formatv("  decode    {0:F3} ms/token\n",
                        gen->decodeSeconds * 1e3 / gen->tokens.size());
  if (!sampling.greedy())
    os << llvm::formatv("  sampling  temperature {0}, top-k {1}, top-p {2}, "
                        "seed {3}\n",
                        sampling.temperature, sampling.topK, sampling.topP,
                        sampling.seed);
  os << "  generated";
  for (int32_t t : gen->tokens)
    os << " " << t;
  os << "\n";
  if (!dumpLogits.empty())
    os << "  logits    " << dumpLogits << "\n";
  return 0;
}

} // namespace kiln

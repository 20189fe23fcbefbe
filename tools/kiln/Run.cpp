//===- Run.cpp - kiln run -------------------------------------------------===//
#include "codegen/BuildProgram.h"
#include "codegen/KernelCache.h"
#include "codegen/Nvrtc.h"
#include "reference/RefDevice.h"
#include "runtime/Bundle.h"
#include "runtime/BundleDevice.h"
#include "runtime/Chat.h"
#include "runtime/ChatTemplate.h"
#include "runtime/EmuDevice.h"
#include "runtime/Generate.h"
#include "runtime/RunOptions.h"
#include "runtime/TensorParallelDevice.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaRanks.h"
#include "tokenizer/Tokenizer.h"
#include "tools/kiln/Commands.h"

#include "absl/strings/str_cat.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <iostream>

#include <unistd.h>

namespace cl = llvm::cl;

namespace kiln {

namespace {
cl::opt<std::string> model(cl::Positional, cl::desc("[MODEL]"),
                           cl::init("tiny-gqa"), cl::sub(runCommand()));
cl::list<std::string> promptTexts(
    "prompt",
    cl::desc("The prompt as text, tokenized with the model folder's "
             "tokenizer.model; the continuation is printed as it comes. "
             "Given more than once: a batch"),
    cl::value_desc("text"), cl::sub(runCommand()));
cl::opt<std::string> tokenizerFile(
    "tokenizer",
    cl::desc("The tokenizer of --prompt, in place of the model's own: "
             "llama2.c's tokenizer.bin (a llama2.c checkpoint has none), or "
             "a SentencePiece FILE.model"),
    cl::value_desc("file"), cl::sub(runCommand()));
cl::opt<std::string>
    promptIds("prompt-ids",
              cl::desc("The prompt as token ids: 1,2,3; several for a batch: "
                       "1,2,3;4,5; or @FILE, a prompt per line"),
              cl::value_desc("ids"), cl::sub(runCommand()));
cl::opt<bool> noLogits(
    "no-logits",
    cl::desc("Copy no logits to the host (no --dump-logits, no check of the "
             "device's draws): for benchmarks"),
    cl::sub(runCommand()));
cl::opt<bool> profileFlag(
    "profile",
    cl::desc("Time every launch alone on the device (no CUDA graphs) and "
             "print each kernel's share of the prefill and decode steps, "
             "with the bandwidth of its weight reads"),
    cl::sub(runCommand()));
// Numbers are read as text so that a bad value gets kiln's own one-line
// error (cl::opt's parser writes its own format straight to stderr).
cl::opt<std::string> maxNewTokensFlag("max-new-tokens",
                                      cl::desc("Tokens to generate"),
                                      cl::init("16"), cl::sub(runCommand()));
cl::opt<std::string> device("device",
                            cl::desc("Where to run: auto (default: cuda when "
                                     "the driver sees a GPU, else emu; ref "
                                     "for --dtype f32/bf16 or --fusion=false), "
                                     "ref "
                                     "(fp32 interpreter of the IR), emu (the "
                                     "CUDA kernels on the CPU) or cuda (GPU "
                                     "0)"),
                            cl::init("auto"), cl::sub(runCommand()));
cl::opt<std::string> weightsFolder(
    "weights",
    cl::desc("The model folder whose safetensors a bundle runs with (or "
             "other weights for a model of the same shapes; or a GGUF file "
             "or llama2.c checkpoint)"),
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

cl::opt<std::string> repetitionFlag(
    "repetition-penalty",
    cl::desc("Divide the positive logits of tokens seen before (multiply "
             "the negative ones) by this (default 1: off)"),
    cl::init("1"), cl::sub(runCommand()));
cl::opt<std::string>
    presenceFlag("presence-penalty",
                 cl::desc("Subtract this from the logit of every token seen "
                          "before (default 0)"),
                 cl::init("0"), cl::sub(runCommand()));
cl::opt<std::string>
    frequencyFlag("frequency-penalty",
                  cl::desc("Subtract this times the times a token was seen "
                           "from its logit (default 0)"),
                  cl::init("0"), cl::sub(runCommand()));
cl::opt<std::string> minPFlag(
    "min-p",
    cl::desc("Sample among the tokens at least this times as likely as the "
             "likeliest (after top-k and top-p; default 0: all)"),
    cl::init("0"), cl::sub(runCommand()));
cl::opt<std::string> temperatureScheduleFlag(
    "temperature-schedule",
    cl::desc("A temperature going linearly from T0 (the first new token) to "
             "T1 (the last of --max-new-tokens), in place of --temperature"),
    cl::value_desc("T0:T1"), cl::sub(runCommand()));
cl::opt<std::string> logitBiasFlag(
    "logit-bias",
    cl::desc("Add BIAS to token ID's logit before sampling (-inf bans it): "
             "ID=BIAS,..., or @FILE.json holding {\"ID\": BIAS, ...}"),
    cl::value_desc("ID=BIAS,..."), cl::sub(runCommand()));
cl::opt<std::string> stopIdsFlag("stop-ids",
                                 cl::desc("Token ids that end the generation "
                                          "(not kept): 2,13"),
                                 cl::value_desc("ids"), cl::sub(runCommand()));

cl::list<std::string> stopStrings(
    "stop",
    cl::desc("End the generation before this text (with --prompt; may be "
             "given more than once)"),
    cl::value_desc("text"), cl::sub(runCommand()));

cl::opt<bool> chatFlag(
    "chat",
    cl::desc("Chat with a Llama 2 chat model: the prompt is built as Meta's "
             "chat_completion builds it ([INST], <<SYS>>), from --prompt (a "
             "user message), --conversation, or else from turns read from "
             "standard input (a line each), the conversation's KV cache kept "
             "between them (docs/chat.md)"),
    cl::sub(runCommand()));
cl::opt<std::string> systemFlag("system",
                                cl::desc("The system prompt of --chat"),
                                cl::value_desc("text"), cl::sub(runCommand()));
cl::opt<std::string> conversationFlag(
    "conversation",
    cl::desc("A conversation for --chat: a JSON array of {\"role\", "
             "\"content\"} messages (system, then user and assistant "
             "alternating, ending with the user's)"),
    cl::value_desc("file.json"), cl::sub(runCommand()));

cl::opt<bool> randomWeights(
    "random-weights",
    cl::desc("Seeded random weights of the model's shapes instead of a "
             "checkpoint (presets such as llama2-7b; for benchmarks; emu and "
             "cuda)"),
    cl::sub(runCommand()));

} // namespace

/// `program` as a bundle for this machine's GPU: its kernels compiled (or
/// from the kernel cache) for the GPU's target.
static absl::StatusOr<Bundle> cudaBundleFor(Program program) {
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
  Bundle b;
  for (CompiledKernel &k : *compiled) {
    b.cubin[k.kernel][k.target] = std::move(k.cubin);
    b.ptx[k.kernel][k.target] = std::move(k.ptx);
  }
  b.nvrtc = nvrtcVersionString();
  b.program = std::move(program);
  return b;
}

absl::StatusOr<std::unique_ptr<Device>> cudaDeviceFor(Program program,
                                                      const WeightProvider &w) {
  auto b = cudaBundleFor(std::move(program));
  if (!b.ok())
    return b.status();
  return CudaDevice::create(std::move(b->program), b->cubin, b->ptx, b->nvrtc,
                            w);
}

absl::StatusOr<std::unique_ptr<PlanDevice>>
planDeviceFor(CompiledModel &m, CodegenOptions knobs, const std::string &where,
              const WeightSet *weights) {
  // Tuned for the GPU's target; emu runs what sm_90 would.
  std::string target = "sm_90", tuning;
  if (auto gpu = probeCudaGpu(); where == "cuda" && gpu.ok())
    target = gpu->target;
  if (absl::Status s = applyTuningDb(*m.module, target, knobs, tuning); !s.ok())
    return s;
  llvm::errs() << tuning;
  if (auto ranks = (*m.module)->getAttrOfType<mlir::IntegerAttr>(
          "kiln.tensor_parallel")) {
    // A split model: its ranks as threads, on emu or GPUs.
    if (where != "emu" && where != "cuda")
      return absl::InvalidArgumentError(
          absl::StrCat("--tp ", ranks.getInt(),
                       ": a split model runs on emu or cuda (ranks "
                       "as threads of this process), not on the ",
                       where, " device"));
    auto program = buildRankProgram(*m.module, knobs);
    if (!program)
      return absl::InvalidArgumentError(
          absl::StrCat(m.source.name, ": ", toString(program.takeError())));
    if (where == "emu")
      return openEmuRanks(*program, weights);
    auto b = cudaBundleFor(std::move(*program));
    if (!b.ok())
      return b.status();
    return openCudaRanks(*b, weights);
  }
  auto program = buildProgram(*m.module, knobs);
  if (!program)
    return absl::InvalidArgumentError(
        absl::StrCat(m.source.name, ": ", toString(program.takeError())));
  WeightProvider provider = weights ? WeightProvider::checkpoint(*weights)
                                    : WeightProvider::random(1);
  if (where == "cuda") {
    auto dev = cudaDeviceFor(std::move(*program), provider);
    if (!dev.ok())
      return dev.status();
    return std::unique_ptr<PlanDevice>(
        static_cast<PlanDevice *>(dev->release()));
  }
  auto dev = EmuDevice::create(std::move(*program), provider);
  if (!dev.ok())
    return dev.status();
  return std::unique_ptr<PlanDevice>(std::move(*dev));
}

int runRun() {
  if (!chatFlag && (!systemFlag.empty() || !conversationFlag.empty()))
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    !systemFlag.empty() ? "--system" : "--conversation",
                    ": needs --chat")),
                2);
  if (chatFlag && !promptIds.empty())
    return fail(absl::InvalidArgumentError(
                    "--chat: builds the prompt from text (--prompt, "
                    "--conversation or turns on standard input), not "
                    "--prompt-ids"),
                2);
  if (!conversationFlag.empty() && !promptTexts.empty())
    return fail(absl::InvalidArgumentError(
                    "--conversation and --prompt: give the conversation one "
                    "way"),
                2);
  // --chat with neither: turns from standard input.
  const bool interactive =
      chatFlag && promptTexts.empty() && conversationFlag.empty();
  if (interactive && !dumpLogits.empty())
    return fail(absl::InvalidArgumentError(
                    "--dump-logits: an interactive chat writes no logits"),
                2);
  // A conversation read now: its faults before anything is compiled.
  std::vector<ChatMessage> conversation;
  if (!conversationFlag.empty()) {
    auto read = readConversation(conversationFlag);
    if (!read.ok())
      return fail(read.status());
    conversation = std::move(*read);
    if (absl::Status s = addSystem(conversation, systemFlag, conversationFlag);
        !s.ok())
      return fail(s, 2);
    if (absl::Status s = checkConversation(conversation, conversationFlag);
        !s.ok())
      return fail(s);
  }
  const bool textual = !promptTexts.empty() || chatFlag;
  if (!promptTexts.empty() && !promptIds.empty())
    return fail(absl::InvalidArgumentError(
                    "--prompt and --prompt-ids: give the prompt one way"),
                2);
  if (noLogits && !dumpLogits.empty())
    return fail(absl::InvalidArgumentError(
                    "--no-logits: there are no logits for --dump-logits"),
                2);
  if (!tokenizerFile.empty() && !textual)
    return fail(absl::InvalidArgumentError(
                    "--tokenizer: a tokenizer is for a text prompt (--prompt)"),
                2);
  if (!stopStrings.empty() && !textual)
    return fail(absl::InvalidArgumentError(
                    "--stop: stop strings need a text prompt (--prompt) and "
                    "the model's tokenizer"),
                2);
  for (const std::string &stop : stopStrings)
    if (stop.empty())
      return fail(absl::InvalidArgumentError("--stop: an empty stop string"),
                  2);
  // Text is tokenized once the model's folder is known.
  absl::StatusOr<std::vector<std::vector<int32_t>>> prompts =
      std::vector<std::vector<int32_t>>();
  if (!textual)
    prompts = parsePromptIds(promptIds);
  if (!prompts.ok())
    return fail(prompts.status(), 2);
  std::unique_ptr<Tokenizer> tokenizer;
  auto tokenize = [&](const std::string &folder,
                      int64_t vocab) -> absl::Status {
    if (!textual)
      return absl::OkStatus();
    std::string error;
    tokenizer = tokenizerFile.empty()
                    ? Tokenizer::open(folder, vocab, error)
                    : Tokenizer::openFile(tokenizerFile, vocab, error);
    if (!tokenizer)
      return absl::InvalidArgumentError(error);
    if (!chatFlag) {
      for (const std::string &text : promptTexts)
        prompts->push_back(tokenizer->encode(text));
      return absl::OkStatus();
    }
    // Chat: a conversation, or each --prompt a user message of its own.
    std::vector<std::vector<ChatMessage>> dialogs;
    if (!conversation.empty())
      dialogs.push_back(conversation);
    for (const std::string &text : promptTexts) {
      dialogs.emplace_back();
      if (!systemFlag.empty())
        dialogs.back().push_back({"system", systemFlag});
      dialogs.back().push_back({"user", text});
    }
    for (const std::vector<ChatMessage> &dialog : dialogs) {
      auto ids = llama2ChatTokens(*tokenizer, dialog,
                                  conversation.empty()
                                      ? std::string("--prompt")
                                      : std::string(conversationFlag));
      if (!ids.ok())
        return ids.status();
      prompts->push_back(std::move(*ids));
    }
    return absl::OkStatus();
  };
  auto maxNew = parseMaxNewTokens(maxNewTokensFlag);
  if (!maxNew.ok())
    return fail(maxNew.status(), 2);
  int64_t maxNewTokens = *maxNew;
  // The prompt checks (runtime/) name --prompt-ids; a text prompt's faults
  // name --prompt, the flag the user gave.
  const std::string promptFlag = !conversationFlag.empty() ? "conversation"
                                 : interactive             ? "chat"
                                 : promptTexts.empty()     ? "prompt-ids"
                                                           : "prompt";
  // The context the prompts are held to: max_position_embeddings, or past
  // it the compiled one (--max-context, where RoPE is scaled); a shorter
  // compiled context is the scheduler's to check.
  int64_t context = 0;
  auto checkPrompts = [&](const LlamaConfig &c) -> absl::Status {
    for (const std::vector<int32_t> &prompt : *prompts)
      if (absl::Status s =
              checkPrompt(prompt, maxNewTokens, c.vocabSize, context);
          !s.ok())
        return namePromptFlag(s, promptFlag);
    return absl::OkStatus();
  };
  // Known once the vocabulary is; checked before a device is picked.
  absl::StatusOr<std::vector<int32_t>> stopIds = std::vector<int32_t>();
  absl::StatusOr<LogitBias> logitBias = LogitBias();
  if (temperatureFlag.getNumOccurrences() > 0 &&
      !temperatureScheduleFlag.empty())
    return fail(absl::InvalidArgumentError(
                    "--temperature-schedule: sets the temperature; give "
                    "--temperature or the schedule"),
                2);
  auto samplingOr =
      parseSampling({temperatureFlag, topKFlag, topPFlag, seedFlag,
                     repetitionFlag, presenceFlag, frequencyFlag, minPFlag,
                     temperatureScheduleFlag, maxNewTokens});
  if (!samplingOr.ok())
    return fail(samplingOr.status(), 2);
  const SamplingParams &sampling = *samplingOr;
  auto knobs = codegenOptions();
  if (!knobs.ok())
    return fail(knobs.status(), 2);
  if (device != "auto" && device != "ref" && device != "emu" &&
      device != "cuda")
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "--device: '", std::string(device),
                    "' is not a device of this build (it has: auto, ref, emu, "
                    "cuda)")),
                2);
  // --device auto: the GPU when the driver sees one, else emu with a
  // notice; decided once the inputs are known to be good.
  std::string where = device;
  auto pick = [&] {
    if (where != "auto")
      return;
    auto gpu = probeCudaGpu();
    where = gpu.ok() ? "cuda" : "emu";
    if (!gpu.ok()) {
      std::string why(gpu.status().message());
      llvm::errs() << "kiln: no GPU (" << why.substr(0, why.find(';'))
                   << "): running on emu\n";
    }
  };
  // A bundle runs as compiled (weights from --weights); a model folder or
  // preset is compiled on the way.
  mlir::MLIRContext ctx;
  std::optional<CompiledModel> compiledModel; // the ref device reads its IR
  absl::StatusOr<std::unique_ptr<Device>> dev;
  LlamaConfig c;
  std::string name = model;
  std::unique_ptr<WeightSet> weights;
  if (randomWeights && !weightsFolder.empty())
    return fail(absl::InvalidArgumentError(
                    "--random-weights: takes no --weights folder"),
                2);
  if (randomWeights && device == "ref")
    return fail(absl::InvalidArgumentError(
                    "--random-weights: the ref device reads a checkpoint; "
                    "use emu or cuda"),
                2);
  // The weights the device packs: random, or the checkpoint's (opened and
  // checked against what the model needs).
  auto provider = [&] {
    return randomWeights ? WeightProvider::random(1)
                         : WeightProvider::checkpoint(*weights);
  };
  // --lora's adapters after a bundle's own.
  std::vector<std::string> lora;
  auto openWeights = [&](const std::string &folder,
                         const std::vector<WeightSpec> &specs) -> absl::Status {
    auto flagged = loraSpecs();
    if (!flagged.ok())
      return flagged.status();
    lora.insert(lora.end(), flagged->begin(), flagged->end());
    if (randomWeights)
      return flagged->empty()
                 ? absl::OkStatus()
                 : absl::InvalidArgumentError(
                       "--lora: merges into a checkpoint's weights, "
                       "not --random-weights");
    auto opened = openCheckpoint(folder, specs, lora, c.headDim());
    if (!opened.ok())
      return opened.status();
    weights = std::move(*opened);
    return absl::OkStatus();
  };
  if (looksLikeBundle(model)) {
    if (weightsFolder.empty() && !randomWeights)
      return fail(absl::InvalidArgumentError(absl::StrCat(
                      std::string(model),
                      ": a bundle holds no weights: name the model folder "
                      "with --weights (or --random-weights)")),
                  2);
    if (device == "ref")
      return fail(absl::InvalidArgumentError(
                      "--device ref interprets kiln IR: run it on a model "
                      "folder or preset, not a bundle"),
                  2);
    auto bundle = readBundle(model);
    if (!bundle.ok())
      return fail(bundle.status());
    if (maxBatchFlag.getNumOccurrences() > 0)
      if (absl::Status s = checkMaxBatch(maxBatchFlag, bundle->program);
          !s.ok())
        return fail(s, 2);
    c = bundle->config;
    context = std::max(c.maxPositions, bundle->program.maxPositions);
    name = bundle->model;
    lora = bundle->lora;
    if (absl::Status s = tokenize(weightsFolder, c.vocabSize); !s.ok())
      return fail(s);
    if (absl::Status s = checkPrompts(c); !s.ok())
      return fail(s);
    if (stopIds = parseStopIds(stopIdsFlag, c.vocabSize); !stopIds.ok())
      return fail(stopIds.status(), 2);
    if (logitBias = parseLogitBias(logitBiasFlag, c.vocabSize); !logitBias.ok())
      return fail(logitBias.status(), 2);
    if (absl::Status s =
            openWeights(weightsFolder, manifestSpecs(bundle->program.weights));
        !s.ok())
      return fail(s);
    pick();
    auto opened = openBundleDevice(*bundle, where, provider());
    if (opened.ok())
      dev = std::unique_ptr<Device>(std::move(*opened));
    else
      dev = opened.status();
  } else {
    auto opts = frontendOptions();
    if (!opts.ok())
      return fail(opts.status(), 2);
    auto compiledOr = compileModel(ctx, model, *opts);
    if (!compiledOr.ok())
      return fail(compiledOr.status());
    auto *compiled = &compiledModel.emplace(std::move(*compiledOr));
    c = compiled->source.config;
    context = std::max(c.maxPositions, opts->maxContext);
    name = compiled->source.name;
    std::string folder =
        weightsFolder.empty() ? compiled->source.folder : weightsFolder;
    if (absl::Status s = tokenize(folder, c.vocabSize); !s.ok())
      return fail(s);
    if (absl::Status s = checkPrompts(c); !s.ok())
      return fail(s);
    if (stopIds = parseStopIds(stopIdsFlag, c.vocabSize); !stopIds.ok())
      return fail(stopIds.status(), 2);
    if (logitBias = parseLogitBias(logitBiasFlag, c.vocabSize); !logitBias.ok())
      return fail(logitBias.status(), 2);
    if (absl::Status s = openWeights(folder, compiled->weights); !s.ok())
      return fail(s);
    // The kernels take f16 storage and the fused IR; the interpreter takes
    // anything.
    if (where == "auto" && (opts->dtype != "f16" || !opts->fusion))
      where = "ref";
    // A split model runs its ranks as threads of this process, on emu
    // devices or GPUs (docs/tensor-parallel.md); the interpreter has none.
    const int64_t ranks = opts->tensorParallel;
    if (ranks > 1 && where == "ref")
      return fail(absl::InvalidArgumentError(absl::StrCat(
                      "--tp ", ranks,
                      ": a split model runs on emu or cuda (ranks as threads "
                      "of this process), not on the ref device")),
                  2);
    pick();
    if (where == "emu" || where == "cuda") {
      auto planned = planDeviceFor(*compiled, *knobs, where,
                                   randomWeights ? nullptr : weights.get());
      if (!planned.ok())
        return fail(planned.status());
      dev = std::unique_ptr<Device>(std::move(*planned));
    } else {
      // quant-gemm=2's rounded inputs, as the kernels'.
      dev = RefDevice::create(*compiled->module, *weights,
                              {.fp8Activations = knobs->quantGemm == 2});
    }
  }
  if (!dev.ok())
    return fail(dev.status());
  if (interactive) {
    ChatOptions chat{
        c.vocabSize,
        context,
        maxNewTokens,
        sampling,
        *logitBias,
        std::vector<std::string>(stopStrings.begin(), stopStrings.end()),
        systemFlag,
        isatty(0) != 0};
    llvm::outs().flush();
    auto turns = chatTurns(**dev, *tokenizer, chat, std::cin, std::cout);
    std::cout.flush();
    if (!turns.ok())
      return fail(turns.status());
    llvm::outs() << chatReport(name, (*dev)->name(), *turns);
    return 0;
  }
  // With a tokenizer: each prompt, then its continuation as it comes, until
  // the end-of-sequence token or a stop string. One prompt streams to the
  // terminal; a batch's texts are printed as each request ends.
  size_t n = prompts->size();
  std::vector<std::string> texts(n);                   // [requests]
  std::vector<std::unique_ptr<TextStream>> streams(n); // [requests]
  std::vector<Request> requests;
  for (size_t i = 0; i < n; ++i) {
    Request &r = requests.emplace_back();
    r.prompt = (*prompts)[i];
    r.maxNewTokens = maxNewTokens;
    r.sampling = sampling;
    r.logitBias = *logitBias;
    r.hooks.stopTokens = *stopIds;
    if (!tokenizer)
      continue;
    // (A chat prints the reply alone: its prompt is the template's.)
    texts[i] = chatFlag ? "" : promptTexts[i];
    auto sink = [&, i](const std::string &piece) {
      texts[i] += piece;
      if (n == 1) {
        llvm::outs() << piece;
        llvm::outs().flush();
      }
    };
    streams[i] = std::make_unique<TextStream>(
        *tokenizer, r.prompt, sink,
        std::vector<std::string>(stopStrings.begin(), stopStrings.end()));
    r.hooks.stopTokens.push_back(tokenizer->eos());
    r.hooks.onToken = [&, i](int32_t t) { return streams[i]->add(t); };
  }
  if (tokenizer && n == 1 && !chatFlag) {
    llvm::outs() << promptTexts[0];
    llvm::outs().flush();
  }
  SchedulerOptions options;
  options.keepLogits = !noLogits;
  // A bundle's slots are its own; --max-batch, when given, runs fewer.
  if (maxBatchFlag.getNumOccurrences() > 0)
    options.maxBatch = maxBatchFlag;
  RunProfile profile;
  if (profileFlag) {
    auto *plans = dynamic_cast<PlanDevice *>(dev->get());
    if (!plans)
      return fail(absl::InvalidArgumentError(
                      absl::StrCat("--profile: the ", (*dev)->name(),
                                   " device runs no kernels; use emu or cuda")),
                  2);
    plans->timeLaunches(&profile.prefill, &profile.decode);
  }
  auto run =
      runRequests(**dev, c.vocabSize, context, std::move(requests), options);
  if (tokenizer) {
    for (size_t i = 0; i < n; ++i) {
      streams[i]->finish();
      if (n > 1)
        llvm::outs() << "[request " << i << "] " << texts[i] << "\n";
    }
    if (n == 1)
      llvm::outs() << "\n";
  }
  if (!run.ok())
    return fail(namePromptFlag(run.status(), promptFlag));
  std::string report;
  absl::Status finished =
      finishRun(*run, name, (*dev)->name(), sampling, dumpLogits, report);
  llvm::outs() << report << profileReport(profile);
  return finished.ok() ? 0 : fail(namePromptFlag(finished, promptFlag));
}

} // namespace kiln

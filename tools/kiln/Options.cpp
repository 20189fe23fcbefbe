//===- Options.cpp - the subcommands and the options they share -----------===//
#include "runtime/LoraAdapter.h"
#include "tools/kiln/Commands.h"
#include "tune/Tuner.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <cmath>
#include <filesystem>

namespace cl = llvm::cl;

namespace kiln {

cl::SubCommand &compileCommand() {
  static cl::SubCommand command(
      "compile", "Compile a model to kiln IR, or to a bundle (-o model.kiln)");
  return command;
}

cl::SubCommand &runCommand() {
  static cl::SubCommand command("run", "Generate tokens with a model");
  return command;
}

cl::SubCommand &serveCommand() {
  static cl::SubCommand command(
      "serve", "Serve a model over HTTP with OpenAI's API (docs/serve.md)");
  return command;
}

cl::SubCommand &inspectCommand() {
  static cl::SubCommand command("inspect", "Print what a bundle holds");
  return command;
}

cl::SubCommand &tuneCommand() {
  static cl::SubCommand command(
      "tune", "Find the fastest kernel knobs per sequence length and batch");
  return command;
}

cl::SubCommand &cacheCommand() {
  static cl::SubCommand command(
      "cache", "The kernel cache: list, explain DIGEST DIGEST, clear");
  return command;
}

cl::opt<std::string> cacheDirFlag(
    "cache-dir",
    cl::desc("The kernel cache folder (default: $KILN_CACHE_DIR, else "
             "$XDG_CACHE_HOME/kiln/kernels, else ~/.cache/kiln/kernels)"),
    cl::value_desc("folder"), cl::sub(compileCommand()), cl::sub(runCommand()),
    cl::sub(serveCommand()), cl::sub(tuneCommand()), cl::sub(cacheCommand()),
    cl::sub(evalCommand()));

cl::opt<std::string> dtypeFlag("dtype",
                               cl::desc("Storage type: f16, bf16 or f32"),
                               cl::init("f16"), cl::sub(compileCommand()),
                               cl::sub(runCommand()), cl::sub(serveCommand()),
                               cl::sub(tuneCommand()), cl::sub(evalCommand()));

cl::opt<bool> fusionFlag("fusion",
                         cl::desc("Run the fusion pipeline (default on; "
                                  "--fusion=false keeps the tensor-level IR)"),
                         cl::init(true), cl::sub(compileCommand()),
                         cl::sub(runCommand()), cl::sub(serveCommand()),
                         cl::sub(tuneCommand()));

cl::opt<RopeLayout> ropeLayoutFlag(
    "rope-layout", cl::desc("How the checkpoint's q/k rows pair dimensions"),
    cl::values(clEnumValN(RopeLayout::rotate_half, "rotate_half",
                          "pairs (i, i + head_dim/2): Hugging Face (default)"),
               clEnumValN(RopeLayout::interleaved, "interleaved",
                          "pairs (2i, 2i + 1): Meta's original layout")),
    cl::init(RopeLayout::rotate_half), cl::sub(compileCommand()),
    cl::sub(runCommand()), cl::sub(serveCommand()), cl::sub(tuneCommand()),
    cl::sub(evalCommand()));

cl::opt<bool> decomposeSoftmaxFlag(
    "decompose-softmax",
    cl::desc("Write softmax as max, sub, exp, sum and div, as some frontends "
             "do (exercises kiln-fuse-softmax)"),
    cl::Hidden, cl::sub(compileCommand()), cl::sub(runCommand()),
    cl::sub(serveCommand()), cl::sub(tuneCommand()));

cl::opt<int64_t> prefillTokensFlag(
    "prefill-tokens",
    cl::desc("Tokens of the largest prefill the arena holds (default 2048, "
             "capped at the context); longer prompts run in chunks of it"),
    cl::init(2048), cl::sub(compileCommand()), cl::sub(runCommand()),
    cl::sub(serveCommand()), cl::sub(tuneCommand()));

// A string, so that a bad value gets kiln's one-line error.
cl::opt<std::string> ropeNtkScaleFlag(
    "rope-ntk-scale",
    cl::desc("Fixed NTK-aware RoPE scaling for a model whose config has no "
             "rope_scaling: the base becomes rope_theta * S^(d / (d - 2)) "
             "(S >= 1; d the head dimension)"),
    cl::value_desc("S"), cl::sub(compileCommand()), cl::sub(runCommand()),
    cl::sub(serveCommand()), cl::sub(tuneCommand()), cl::sub(evalCommand()));

cl::opt<int64_t> maxBatchFlag(
    "max-batch",
    cl::desc("Sequences that run at once (default 1); the KV pool holds "
             "them all at --max-context"),
    cl::init(1), cl::sub(compileCommand()), cl::sub(runCommand()),
    cl::sub(serveCommand()), cl::sub(tuneCommand()));

cl::opt<int64_t> maxContextFlag(
    "max-context",
    cl::desc("Tokens per sequence the KV pool holds (default: the model's "
             "context)"),
    cl::init(0), cl::sub(compileCommand()), cl::sub(runCommand()),
    cl::sub(serveCommand()), cl::sub(tuneCommand()));

cl::opt<int64_t> tensorParallelFlag(
    "tp",
    cl::desc("Split the model over N GPUs (tensor parallelism: "
             "docs/tensor-parallel.md): compile shows the ranks' IR and "
             "sizes; run runs the ranks on emu devices in this process"),
    cl::value_desc("N"), cl::init(1), cl::sub(compileCommand()),
    cl::sub(runCommand()), cl::sub(serveCommand()));

cl::opt<int64_t> kvMemoryFlag(
    "kv-memory",
    cl::desc("Bytes for the KV pool (default: --max-batch sequences at "
             "--max-context); sequences share it, and one that finds it "
             "full fails alone"),
    cl::init(0), cl::sub(compileCommand()), cl::sub(runCommand()),
    cl::sub(serveCommand()), cl::sub(tuneCommand()));

cl::opt<std::string> quantizeFlag(
    "quantize",
    cl::desc("Quantize the projections' weights at load, round to nearest: "
             "int8 (a scale per row), int4-g32, int4-g64, int4-g128, int4 "
             "(per row), int8-gN, int4-gN-min/int8-gN-min (f32 scales and "
             "mins, as llama.cpp's Q4_1) or fp8 (docs/quantization.md)"),
    cl::value_desc("format"), cl::sub(compileCommand()), cl::sub(runCommand()),
    cl::sub(serveCommand()), cl::sub(tuneCommand()), cl::sub(evalCommand()));

cl::opt<bool> quantizeZeroPointsFlag(
    "quantize-zero-points",
    cl::desc("With --quantize int8/int4: asymmetric, a zero point per group"),
    cl::sub(compileCommand()), cl::sub(runCommand()), cl::sub(serveCommand()),
    cl::sub(tuneCommand()), cl::sub(evalCommand()));

cl::list<std::string> loraFlag(
    "lora",
    cl::desc("Merge a PEFT LoRA adapter folder (adapter_config.json, "
             "adapter_model.safetensors) into the weights at load, times "
             "WEIGHT (default 1); repeatable, applied in order "
             "(docs/lora.md)"),
    cl::value_desc("ADAPTER_DIR[:WEIGHT]"), cl::sub(compileCommand()),
    cl::sub(runCommand()), cl::sub(serveCommand()), cl::sub(evalCommand()));

cl::opt<std::string> kvDtypeFlag(
    "kv-dtype",
    cl::desc("The KV cache's storage: f16 (default, as the activations), "
             "fp8 (e4m3) or int8, with an f16 scale per head of each token: "
             "twice the tokens in the same memory (docs/kv-cache.md)"),
    cl::value_desc("type"), cl::sub(compileCommand()), cl::sub(runCommand()),
    cl::sub(serveCommand()), cl::sub(tuneCommand()), cl::sub(evalCommand()));

absl::StatusOr<std::vector<std::string>> loraSpecs() {
  std::vector<std::string> specs;
  for (const std::string &spec : loraFlag) {
    auto adapter = LoraAdapter::open(spec);
    if (!adapter.ok())
      return absl::InvalidArgumentError(absl::StrCat(
          "--lora ", spec, ": ", std::string(adapter.status().message())));
    specs.push_back(
        absl::StrCat(std::filesystem::absolute(adapter->folder).string(), ":",
                     absl::StrFormat("%.17g", adapter->weight)));
  }
  return specs;
}

absl::StatusOr<FrontendOptions> frontendOptions() {
  FrontendOptions opts;
  if (dtypeFlag != "f16" && dtypeFlag != "bf16" && dtypeFlag != "f32")
    return absl::InvalidArgumentError(absl::StrCat(
        "--dtype: '", std::string(dtypeFlag), "' is not f16, bf16 or f32"));
  if (prefillTokensFlag <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--prefill-tokens: ", int64_t(prefillTokensFlag),
                     " is not a positive token count"));
  opts.dtype = dtypeFlag;
  opts.fusion = fusionFlag;
  opts.ropeLayout = ropeLayoutFlag;
  opts.decomposeSoftmax = decomposeSoftmaxFlag;
  opts.prefillTokens = prefillTokensFlag;
  if (!ropeNtkScaleFlag.empty()) {
    double s = 0;
    if (!absl::SimpleAtod(std::string(ropeNtkScaleFlag), &s) || !(s >= 1) ||
        !std::isfinite(s))
      return absl::InvalidArgumentError(
          absl::StrCat("--rope-ntk-scale: '", std::string(ropeNtkScaleFlag),
                       "' is not a scale of at least 1"));
    opts.ropeNtkScale = s;
  }
  if (maxBatchFlag <= 0 || maxBatchFlag > 1024)
    return absl::InvalidArgumentError(
        absl::StrCat("--max-batch: ", int64_t(maxBatchFlag),
                     " is not a batch size from 1 to 1024"));
  if (maxContextFlag < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--max-context: ", int64_t(maxContextFlag),
                     " is not a token count (0: the model's context)"));
  if (kvMemoryFlag < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-memory: ", int64_t(kvMemoryFlag),
                     " is not a byte count (0: what the batch needs)"));
  if (!quantizeFlag.empty()) {
    opts.quantize = QuantFormat::parse(quantizeFlag);
    if (!opts.quantize || opts.quantize->actOrder)
      return absl::InvalidArgumentError(
          absl::StrCat("--quantize: '", std::string(quantizeFlag),
                       "' is not a format: ", quantFormatChoices()));
    if (quantizeZeroPointsFlag && opts.quantize->kind == QuantKind::FP8)
      return absl::InvalidArgumentError(
          "--quantize-zero-points: fp8 has no zero points");
    if (quantizeZeroPointsFlag && opts.quantize->mins)
      return absl::InvalidArgumentError(
          absl::StrCat("--quantize-zero-points: ", opts.quantize->name(),
                       " has mins, not zero points"));
    opts.quantize->zeroPoints |= quantizeZeroPointsFlag;
  } else if (quantizeZeroPointsFlag) {
    return absl::InvalidArgumentError(
        "--quantize-zero-points needs --quantize int8 or int4");
  }
  if (!kvDtypeFlag.empty()) {
    if (kvDtypeFlag != "f16" && kvDtypeFlag != "fp8" && kvDtypeFlag != "int8")
      return absl::InvalidArgumentError(
          absl::StrCat("--kv-dtype: '", std::string(kvDtypeFlag),
                       "' is not f16, fp8 or int8"));
    if (kvDtypeFlag == "f16" && opts.dtype != "f16")
      return absl::InvalidArgumentError(
          absl::StrCat("--kv-dtype f16: the cache holds ", opts.dtype,
                       " activations as they are; fp8 or int8 quantize it"));
    if (kvDtypeFlag != "f16")
      opts.kvDtype = kvDtypeFlag;
  }
  if (tensorParallelFlag < 1 || tensorParallelFlag > 64)
    return absl::InvalidArgumentError(
        absl::StrCat("--tp: ", int64_t(tensorParallelFlag),
                     " is not a number of GPUs from 1 to 64"));
  opts.tensorParallel = tensorParallelFlag;
  opts.maxBatch = maxBatchFlag;
  opts.kvMemory = kvMemoryFlag;
  opts.maxContext = maxContextFlag;
  return opts;
}

cl::opt<std::string> kernelOptionsFlag(
    "kernel-options",
    cl::desc(
        "Kernel tuning knobs, name=value,...: gemv-rows, gemv-split-k, "
        "gemv-unroll, vector-width, attention-warps, kv-splits, sm-count, "
        "epilogue-threads, prefill-attention-rows, prefill-attention-keys, "
        "elementwise-threads, gemm-algo, gemm-tile, quant-gemm, quant-stage, "
        "quant-warps"),
    cl::value_desc("knobs"), cl::sub(compileCommand()), cl::sub(runCommand()),
    cl::sub(serveCommand()), cl::sub(tuneCommand()), cl::sub(evalCommand()));

cl::opt<std::string> tuningDbFlag(
    "tuning-db",
    cl::desc("The tuning database (kiln tune writes it; compile and run take "
             "its buckets and winners for this model and target)"),
    cl::value_desc("file.json"), cl::sub(compileCommand()),
    cl::sub(runCommand()), cl::sub(serveCommand()), cl::sub(tuneCommand()));

absl::StatusOr<CodegenOptions> codegenOptions() {
  CodegenOptions opts;
  if (llvm::Error e = parseCodegenOptions(kernelOptionsFlag, opts))
    return absl::InvalidArgumentError(
        absl::StrCat("--kernel-options: ", llvm::toString(std::move(e))));
  return opts;
}

absl::Status applyTuningDb(mlir::ModuleOp module, const std::string &target,
                           CodegenOptions &knobs, std::string &report) {
  if (tuningDbFlag.empty())
    return absl::OkStatus();
  auto db = readTuningDb(tuningDbFlag);
  if (!db.ok())
    return db.status();
  std::vector<std::string> notes;
  if (llvm::Error e = applyTuning(module, *db, target, knobs, notes))
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(tuningDbFlag), ": ", toString(std::move(e))));
  if (notes.empty())
    notes.push_back("no entries");
  for (const std::string &note : notes)
    absl::StrAppend(&report, "  tuning    ", note, "\n");
  return absl::OkStatus();
}

} // namespace kiln

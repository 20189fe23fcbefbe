//===- Compile.cpp - kiln compile -----------------------------------------===//
#include "codegen/BuildProgram.h"
#include "codegen/KernelCache.h"
#include "codegen/Nvrtc.h"
#include "inspect/KernelGraph.h"
#include "ir/KilnOps.h"
#include "passes/Passes.h"
#include "runtime/AtomicFile.h"
#include "runtime/Bundle.h"
#include "runtime/DType.h"
#include "runtime/QuantLayout.h"
#include "runtime/RunOptions.h"
#include "tools/kiln/Commands.h"
#include "tune/Predict.h"

#include "absl/strings/str_cat.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include "llvm/Support/raw_ostream.h"
#include <filesystem>
#include <set>

namespace cl = llvm::cl;
using namespace mlir;

namespace kiln {

namespace {
cl::opt<std::string> model(cl::Positional, cl::desc("[MODEL]"),
                           cl::init("tiny-gqa"), cl::sub(compileCommand()));
cl::opt<std::string> output("o",
                            cl::desc("Write the bundle (a name ending in "
                                     ".kiln) or the kiln IR to this file"),
                            cl::value_desc("file"), cl::sub(compileCommand()));
enum class Emit { Summary, Mlir };
cl::opt<Emit> emit("emit", cl::desc("What to print on stdout"),
                   cl::values(clEnumValN(Emit::Summary, "summary",
                                         "what was compiled (default)"),
                              clEnumValN(Emit::Mlir, "mlir", "the kiln IR")),
                   cl::init(Emit::Summary), cl::sub(compileCommand()));
cl::opt<bool> stats("stats",
                    cl::desc("Print kernels per step before and after "
                             "fusion, HBM bytes per decode token, arena and "
                             "KV pool sizes, and (with --target) the cost "
                             "model's predicted step times"),
                    cl::sub(compileCommand()));
cl::opt<std::string> statsJson(
    "stats-json",
    cl::desc("Write the cost model's predictions (every step's and kernel's "
             "bytes and FLOPs, and with --target their predicted times on "
             "each modelled GPU) as JSON to this file (docs/cost-model.md)"),
    cl::value_desc("file"), cl::sub(compileCommand()));
cl::list<std::string> statsSteps(
    "stats-step",
    cl::desc("With --stats or --stats-json, predict this step too: "
             "decode:ROWS:KEYS (ROWS sequences attending KEYS keys each) or "
             "prefill:TOKENS"),
    cl::value_desc("step"), cl::sub(compileCommand()));
cl::opt<bool> dumpIrAfterAll(
    "dump-ir-after-all",
    cl::desc("Write the IR after the frontend and after every pipeline stage, "
             "and an SVG kernel graph per function, to --dump-dir"),
    cl::sub(compileCommand()));
cl::opt<std::string> dumpDir("dump-dir",
                             cl::desc("Folder for --dump-ir-after-all"),
                             cl::value_desc("folder"),
                             cl::sub(compileCommand()));
cl::list<std::string> targets(
    "target",
    cl::desc("Compile every kernel (prefill, decode, sampling) with NVRTC "
             "for these GPU targets (sm_80,sm_86,sm_89,sm_90) and report "
             "registers and spills"),
    cl::CommaSeparated, cl::sub(compileCommand()));
cl::opt<bool> printLocations("print-locations",
                             cl::desc("Print each op's Hugging Face module "
                                      "name with the IR"),
                             cl::sub(compileCommand()));
} // namespace

absl::Status checkWeightsIfPresent(const CompiledModel &m) {
  if (!WeightSet::present(m.source.folder))
    return absl::OkStatus();
  auto weights = openCheckpoint(m.source.folder, m.weights, m.lora,
                                m.source.config.headDim());
  return weights.status();
}

int fail(const absl::Status &status, int code) {
  llvm::errs() << "kiln: error: " << std::string(status.message()) << "\n";
  return code;
}

absl::StatusOr<CompiledModel> compileModel(MLIRContext &ctx,
                                           const std::string &name,
                                           const FrontendOptions &opts,
                                           const StageHook &afterStage) {
  auto source = resolveModel(name);
  if (!source.ok())
    return source.status();
  CompiledModel out{*source, {}, {}};
  // A pre-quantized checkpoint's format goes on its projections.
  auto built = optionsFor(*source, opts);
  if (!built.ok())
    return built.status();
  // Once a run, which may compile the model more than once (--stats).
  static std::set<std::string> warned;
  if (std::string warning = contextWarning(*source, opts);
      !warning.empty() && warned.insert(warning).second)
    llvm::errs() << "kiln: warning: " << warning << "\n";
  out.module = buildLlamaModule(ctx, source->config, *built, source->name);
  if (failed(verify(*out.module)))
    return absl::InternalError(
        absl::StrCat(name, ": the frontend built IR that does not verify"));
  if (afterStage)
    if (absl::Status s = afterStage("frontend", *out.module); !s.ok())
      return s;
  if (opts.tensorParallel > 1) { // a rank's module, before the fusions
    PassManager pm(&ctx);
    KilnShardTensorParallelOptions shard;
    shard.ranks = opts.tensorParallel;
    pm.addPass(createKilnShardTensorParallel(shard));
    // The pass says what does not split: that is the one-line error.
    std::string why;
    ScopedDiagnosticHandler keep(&ctx, [&](Diagnostic &d) {
      if (why.empty())
        why = d.str();
      return success();
    });
    if (failed(pm.run(*out.module)))
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", why));
    if (afterStage)
      if (absl::Status s =
              afterStage("kiln-shard-tensor-parallel", *out.module);
          !s.ok())
        return s;
  }
  if (opts.fusion) {
    // One pass manager for the whole pipeline, or one per stage when each
    // stage's IR is wanted.
    std::vector<const PipelineStage *> groups;
    std::vector<PipelineStage> stages = kilnPipelineStages(
        {opts.prefillTokens, opts.maxBatch, opts.maxContext, opts.kvMemory});
    for (const PipelineStage &stage : stages)
      groups.push_back(&stage);
    for (size_t i = 0; i < groups.size();) {
      PassManager pm(&ctx);
      size_t end = afterStage ? i + 1 : groups.size();
      for (size_t j = i; j < end; ++j)
        groups[j]->addTo(pm);
      if (failed(pm.run(*out.module)))
        return absl::InternalError(absl::StrCat(
            name, ": the pipeline failed in ", groups[end - 1]->name));
      if (afterStage)
        if (absl::Status s = afterStage(groups[i]->name, *out.module); !s.ok())
          return s;
      i = end;
    }
  }
  auto weights = collectWeights(*out.module);
  if (!weights.ok())
    return weights.status();
  out.weights = std::move(*weights);
  return out;
}

absl::Status writeBundleFor(const CompiledModel &m, const CodegenOptions &knobs,
                            const std::vector<std::string> &archs,
                            const std::string &path, std::string &report) {
  // Split modules too: a bundle holds the Program every rank runs.
  auto program = buildRankProgram(*m.module, knobs);
  if (!program)
    return absl::InvalidArgumentError(
        absl::StrCat(m.source.name, ": ", toString(program.takeError())));
  // cuBLASLt's FP8 GEMM needs FP8 tensor cores (Ada and Hopper on).
  if (program->usesFp8Gemm())
    for (const std::string &arch : archs) {
      llvm::StringRef digits(arch);
      int sm = 0;
      if (!digits.consume_front("sm_") ||
          digits.take_while([](char c) { return llvm::isDigit(c); })
              .getAsInteger(10, sm) ||
          sm < 89)
        return absl::InvalidArgumentError(absl::StrCat(
            "--target ", arch,
            ": quant-gemm=2 (cuBLASLt's FP8 GEMM) needs sm_89 or later"));
    }
  KernelCache cache(cacheDirFlag.empty() ? KernelCache::defaultDir()
                                         : std::string(cacheDirFlag));
  int hits = 0;
  auto compiled = compileKernelsCached(program->kernels, archs, cache, hits);
  if (!compiled)
    return absl::InternalError(toString(compiled.takeError()));
  report = llvm::formatv("  bundle    {0}: {1} kernels x {2} targets, {3} "
                         "compiled, {4} from the kernel cache\n",
                         path, program->kernels.size(), archs.size(),
                         compiled->size() - hits, hits)
               .str();
  Bundle bundle{
      m.source.name,        m.source.config, std::move(*program), {}, {},
      nvrtcVersionString(), m.lora};
  for (CompiledKernel &k : *compiled) {
    bundle.cubin[k.kernel][k.target] = std::move(k.cubin);
    bundle.ptx[k.kernel][k.target] = std::move(k.ptx);
  }
  return writeBundle(path, bundle);
}

namespace {

/// --stats-step: "decode:ROWS:KEYS" or "prefill:TOKENS".
absl::StatusOr<StepShape> parseStep(StringRef text) {
  llvm::SmallVector<StringRef> parts;
  text.split(parts, ':');
  auto bad = [&] {
    return absl::InvalidArgumentError(
        ("--stats-step '" + text +
         "': expected decode:ROWS:KEYS or prefill:TOKENS (positive numbers)")
            .str());
  };
  StepShape s;
  if (parts[0] == "decode" && parts.size() == 3) {
    if (parts[1].getAsInteger(10, s.rows) ||
        parts[2].getAsInteger(10, s.context))
      return bad();
  } else if (parts[0] == "prefill" && parts.size() == 2) {
    s.prefill = true;
    if (parts[1].getAsInteger(10, s.rows))
      return bad();
    s.context = s.rows;
  } else {
    return bad();
  }
  if (s.rows <= 0 || s.context <= 0)
    return bad();
  return s;
}

/// 6.74 B, 139.58 K: counts at a glance.
std::string count(double n) {
  if (n >= 1e9)
    return llvm::formatv("{0:F2} B", n / 1e9).str();
  if (n >= 1e6)
    return llvm::formatv("{0:F2} M", n / 1e6).str();
  return llvm::formatv("{0:F2} K", n / 1e3).str();
}

std::string bytes(double n) {
  if (n >= double(1 << 30))
    return llvm::formatv("{0:F2} GiB", n / (1 << 30)).str();
  return llvm::formatv("{0:F2} MiB", n / (1 << 20)).str();
}

void printSummary(CompiledModel &m, const FrontendOptions &opts) {
  const LlamaConfig &c = m.source.config;
  auto &os = llvm::outs();
  os << "kiln: compiled " << m.source.name
     << (m.source.isPreset ? " (preset)" : "") << " to kiln IR\n";
  os << llvm::formatv("  model     llama, {0} layers, hidden {1}, {2} heads "
                      "({3} kv), head dim {4}, ffn {5}, vocab {6}, context "
                      "{7}\n",
                      c.numLayers, c.hiddenSize, c.numHeads, c.numKVHeads,
                      c.headDim(), c.intermediateSize, c.vocabSize,
                      c.maxPositions);
  for (auto fn : m.module->getOps<func::FuncOp>()) {
    int64_t ops = 0, weights = 0;
    fn.walk([&](Operation *op) {
      if (isa<WeightOp, PackedWeightOp>(op))
        ++weights;
      else if (op->getDialect() && op->getDialect()->getNamespace() == "kiln")
        ++ops;
    });
    auto seq = cast<RankedTensorType>(fn.getArgumentTypes()[0]).getDimSize(0);
    os << llvm::formatv("  @{0,-8} {1} kiln ops over {2} weights, {3}\n",
                        fn.getName(), ops, weights,
                        ShapedType::isDynamic(seq)
                            ? std::string("S new tokens")
                            : std::to_string(seq) + " new token");
  }
  double elems = 0;
  for (const WeightSpec &w : m.weights) {
    double n = 1;
    for (int64_t d : w.shape)
      n *= double(d);
    elems += n;
  }
  os << llvm::formatv("  weights   {0} tensors, {1} parameters, {2} as {3} "
                      "(named in the IR, not embedded)\n",
                      m.weights.size(), count(elems),
                      bytes(elems * (opts.dtype == "f32" ? 4 : 2)), opts.dtype);
  // A quantized model's device buffers: what the GPU holds.
  double stored = 0;
  std::vector<std::string> formats; // the projections', in order of use
  std::string head; // a quantized LM head's (GGUF's output.weight)
  llvm::StringSet<> seen;
  if (auto decode = m.module->lookupSymbol<func::FuncOp>("decode"))
    decode.walk([&](Operation *op) {
      auto type = op->getNumResults()
                      ? dyn_cast<RankedTensorType>(op->getResult(0).getType())
                      : RankedTensorType();
      StringAttr name = op->getAttrOfType<StringAttr>("name");
      if (!isa<WeightOp, PackedWeightOp>(op) || !type || !name ||
          !seen.insert(name.getValue()).second)
        return;
      auto quant = weightQuant(type);
      auto packed = dyn_cast<PackedWeightOp>(op);
      bool isHead = name.getValue().starts_with("lm_head");
      if (quant && isHead)
        head = quant->name();
      else if (quant && llvm::find(formats, quant->name()) == formats.end())
        formats.push_back(quant->name());
      stored += quant ? double(quantLayout(*quant, type.getDimSize(0),
                                           type.getDimSize(1),
                                           packed && packed.getScaledBy())
                                   .bytes)
                      : double(type.getNumElements()) * 2;
    });
  if (!formats.empty())
    os << llvm::formatv(
        "  stored    {0} on the device, the projections {1}{2}\n",
        bytes(stored), llvm::join(formats, " and "),
        head.empty() ? "" : ", the LM head " + head);
}
} // namespace

int runCompile() {
  auto optsOr = frontendOptions();
  if (!optsOr.ok())
    return fail(optsOr.status(), 2);
  FrontendOptions opts = *optsOr;
  auto knobs = codegenOptions();
  if (!knobs.ok())
    return fail(knobs.status(), 2);
  std::vector<StepShape> extraSteps;
  for (const std::string &step : statsSteps) {
    auto shape = parseStep(step);
    if (!shape.ok())
      return fail(shape.status(), 2);
    extraSteps.push_back(*shape);
  }
  if (dumpIrAfterAll && dumpDir.empty())
    return fail(absl::InvalidArgumentError(
                    "--dump-ir-after-all: name the folder with --dump-dir"),
                2);
  StageHook dumpStage;
  int stageCount = 0;
  if (dumpIrAfterAll) {
    std::error_code ec;
    std::filesystem::create_directories(std::string(dumpDir), ec);
    if (ec)
      return fail(absl::InvalidArgumentError(absl::StrCat(
          std::string(dumpDir), ": cannot create the folder: ", ec.message())));
    dumpStage = [&](StringRef stage, ModuleOp module) {
      std::string text;
      llvm::raw_string_ostream os(text);
      module.print(os, OpPrintingFlags().enableDebugInfo());
      std::string file =
          llvm::formatv("{0}/{1:d2}-{2}.mlir", std::string(dumpDir),
                        stageCount++, stage)
              .str();
      return writeFileAtomically(file, text);
    };
  }

  MLIRContext ctx;
  auto compiled = compileModel(ctx, model, opts, dumpStage);
  if (!compiled.ok())
    return fail(compiled.status());
  if (dumpIrAfterAll) {
    const LlamaConfig &c = compiled->source.config;
    for (auto fn : compiled->module->getOps<func::FuncOp>()) {
      // decode: one token; prefill: the largest prefill the arena plans.
      CostShape shape{fn.getName() == "decode"
                          ? 1
                          : std::min<int64_t>(2048, c.maxPositions),
                      c.maxPositions};
      std::string dot = kernelGraphDot(fn, shape);
      auto svg = renderSvg(dot);
      if (!svg.ok())
        return fail(svg.status());
      std::string base = std::string(dumpDir) + "/" + fn.getName().str();
      if (absl::Status s = writeFileAtomically(base + ".dot", dot); !s.ok())
        return fail(s);
      if (absl::Status s = writeFileAtomically(base + ".svg", *svg); !s.ok())
        return fail(s);
    }
    llvm::errs() << "kiln: wrote " << stageCount
                 << " stages of IR and a kernel graph per function (.dot, "
                    ".svg) to "
                 << dumpDir << "\n";
  }
  auto lora = loraSpecs();
  if (!lora.ok())
    return fail(lora.status());
  compiled->lora = std::move(*lora);
  if (absl::Status s = checkWeightsIfPresent(*compiled); !s.ok())
    return fail(s);
  // The Program's launches, built once for the --stats-step check, the
  // --target compile and the predictions (whichever comes first).
  std::optional<Program> program;
  // A --stats-step no plan runs fails before anything is written or
  // printed.
  if (!extraSteps.empty()) {
    auto built = buildProgram(*compiled->module, *knobs);
    if (!built)
      return fail(absl::InvalidArgumentError(toString(built.takeError())));
    program = std::move(*built);
    for (size_t i = 0; i < extraSteps.size(); ++i)
      if (auto plan = planForStep(*program, extraSteps[i]); !plan)
        return fail(absl::InvalidArgumentError(
                        absl::StrCat("--stats-step '", statsSteps[i],
                                     "': ", toString(plan.takeError()))),
                    2);
  }

  std::string tuningReport;
  if (absl::Status s = applyTuningDb(
          *compiled->module, targets.empty() ? "sm_90" : targets.front(),
          *knobs, tuningReport);
      !s.ok())
    return fail(s);

  // Files first: a reader that closes stdout early must not cost the output.
  std::string bundleReport;
  if (StringRef(output).ends_with(".kiln")) {
    std::vector<std::string> archs(targets.begin(), targets.end());
    if (archs.empty())
      archs = {"sm_90"};
    if (absl::Status s =
            writeBundleFor(*compiled, *knobs, archs, output, bundleReport);
        !s.ok())
      return fail(s);
  } else if (!output.empty()) {
    // The IR keeps its locations (as #loc aliases at the end), so that
    // kiln-opt runs on the file keep the Hugging Face names.
    std::string text;
    llvm::raw_string_ostream os(text);
    compiled->module->print(os, OpPrintingFlags().enableDebugInfo());
    if (absl::Status s = writeFileAtomically(output, text); !s.ok())
      return fail(s);
  }

  if (emit == Emit::Mlir) {
    OpPrintingFlags flags;
    if (printLocations)
      flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false)
          .useLocalScope(); // each location inline, not as a #loc alias
    compiled->module->print(llvm::outs(), flags);
  } else {
    printSummary(*compiled, opts);
  }
  llvm::outs() << tuningReport << bundleReport;
  // The --target compile's kernels, for the predictions.
  std::vector<CompiledKernel> targetKernels;
  if (!targets.empty()) {
    if (!program) {
      auto built = buildProgram(*compiled->module, *knobs);
      if (!built)
        return fail(absl::InvalidArgumentError(toString(built.takeError())));
      program = std::move(*built);
    }
    std::vector<std::string> archs(targets.begin(), targets.end());
    for (const std::string &t : archs)
      if (!StringRef(t).starts_with("sm_"))
        return fail(absl::InvalidArgumentError(absl::StrCat(
                        "--target: '", t, "' is not a target like sm_90")),
                    2);
    const std::vector<KernelCode> &code = program->kernels;
    KernelCache cache(cacheDirFlag.empty() ? KernelCache::defaultDir()
                                           : std::string(cacheDirFlag));
    int hits = 0;
    auto compiledKernels = compileKernelsCached(code, archs, cache, hits);
    if (!compiledKernels) // the kernel, its provenance and NVRTC's log
      return fail(absl::InternalError(toString(compiledKernels.takeError())));
    auto count = [&](StringRef prefix) {
      return llvm::count_if(code, [&](const KernelCode &k) {
        return StringRef(k.name).starts_with(prefix);
      });
    };
    llvm::outs() << "  kernels   " << code.size() << " (" << count("prefill.")
                 << " for @prefill, " << count("decode.") << " for @decode, "
                 << count("sampling.") << " sampling), NVRTC "
                 << nvrtcVersionString() << ": "
                 << compiledKernels->size() - hits << " compiled, " << hits
                 << " from the kernel cache\n";
    for (const CompiledKernel &k : *compiledKernels)
      llvm::outs() << llvm::formatv(
          "    {0,-6} {1,-40} {2,3} registers, {3} bytes spill stores, {4} "
          "bytes spill loads, cubin {5} bytes\n",
          k.target, k.kernel, k.registers, k.spillStores, k.spillLoads,
          k.cubin.size());
    targetKernels = std::move(*compiledKernels);
  }
  if (stats) {
    FrontendOptions tensorLevel = opts;
    tensorLevel.fusion = false;
    auto unfused = compileModel(ctx, model, tensorLevel);
    if (!unfused.ok())
      return fail(unfused.status());
    printStats(*compiled->module, *unfused->module, compiled->source.config);
  }
  if (stats || !statsJson.empty()) {
    // The predictions: the Program's launches, and the SASS audit of the
    // kernels compiled for the first target (none without --target).
    PredictionInput in;
    in.knobs = *knobs;
    in.target = targets.empty() ? "sm_90" : targets.front();
    in.extraSteps = extraSteps;
    if (!program) {
      auto built = buildProgram(*compiled->module, *knobs);
      if (built)
        program = std::move(*built);
      else if (!statsJson.empty()) // (--stats has said why)
        return fail(absl::InvalidArgumentError(
            "--stats-json: no launches to predict: " +
            toString(built.takeError())));
      else
        llvm::consumeError(built.takeError());
    }
    in.program = program ? &*program : nullptr;
    if (targets.empty()) {
      in.unaudited = "the model reads each kernel's SASS: compile them with "
                     "--target sm_90";
    } else if (program) {
      Bundle bundle{
          compiled->source.name, compiled->source.config, *program, {}, {},
          nvrtcVersionString()};
      for (CompiledKernel &k : targetKernels) // the first target's only
        if (k.target == in.target) {
          bundle.cubin[k.kernel][k.target] = std::move(k.cubin);
          bundle.ptx[k.kernel][k.target] = std::move(k.ptx);
        }
      auto tools = sass::findTools();
      auto audits =
          tools.ok()
              ? sass::auditBundle(bundle, *tools)
              : absl::StatusOr<std::vector<sass::KernelAudit>>(tools.status());
      if (audits.ok())
        in.audits = std::move(*audits);
      else
        in.unaudited = "the model needs the SASS audit (docs/sass-audit.md): " +
                       std::string(audits.status().message());
    }
    if (absl::Status s = printPredictions(
            *compiled->module, compiled->source.name, in, stats, statsJson);
        !s.ok())
      return fail(s);
  }
  return 0;
}

} // namespace kiln

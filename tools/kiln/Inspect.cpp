//===- Inspect.cpp - kiln inspect: a bundle, readably ---------------------===//
#include "inspect/SassAudit.h"
#include "runtime/BlasMatmul.h"
#include "runtime/Bundle.h"
#include "runtime/GgufFile.h"
#include "runtime/PlanDevice.h"
#include "runtime/SafeTensors.h"
#include "tools/kiln/Commands.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace kiln {
namespace {
cl::opt<std::string>
    bundlePath(cl::Positional,
               cl::desc("BUNDLE, FILE.gguf or a llama2.c MODEL.bin"),
               cl::Required, cl::sub(inspectCommand()));
cl::opt<bool>
    sassFlag("sass",
             cl::desc("Audit each kernel's SASS: registers, spills, occupancy, "
                      "instruction mix, loads in flight (docs/sass-audit.md)"),
             cl::sub(inspectCommand()));
cl::opt<bool> sassJsonFlag("sass-json",
                           cl::desc("The SASS audit as JSON, for programs"),
                           cl::sub(inspectCommand()));
cl::list<std::string> sassExpectFlag(
    "sass-expect",
    cl::desc("With --sass or --sass-json: fail (exit 1) unless every "
             "matching kernel meets it, e.g. 'decode.*: spill_bytes == 0'"),
    cl::value_desc("KERNELS[@TARGET]: METRIC[+METRIC] OP NUMBER"),
    cl::sub(inspectCommand()));

/// kiln inspect --sass / --sass-json: the audit, then the expectations.
int runSassAudit(const Bundle &bundle) {
  for (const std::string &expectation : sassExpectFlag)
    if (auto form = sass::checkExpectation({}, expectation); !form.ok())
      return fail(form.status(), 2);
  auto tools = sass::findTools();
  if (!tools.ok())
    return fail(tools.status());
  auto audits = sass::auditBundle(bundle, *tools);
  if (!audits.ok())
    return fail(audits.status());
  if (sassJsonFlag)
    llvm::outs() << sass::formatJson(*audits);
  else
    llvm::outs() << "kiln SASS audit of " << bundlePath << " ("
                 << audits->size() << " kernel images)\n"
                 << sass::formatTable(*audits);
  llvm::outs().flush();
  int broken = 0;
  for (const std::string &expectation : sassExpectFlag) {
    auto lines = sass::checkExpectation(*audits, expectation);
    if (!lines.ok())
      return fail(lines.status(), 2);
    for (const std::string &line : *lines)
      llvm::errs() << "kiln: expectation '" << expectation
                   << "' fails: " << line << "\n";
    broken += int(lines->size());
  }
  if (broken)
    return fail(absl::FailedPreconditionError(
        std::to_string(broken) + " SASS expectation(s) fail (above)"));
  return 0;
}

void printLaunches(const Program &p, const std::vector<Launch> &launches) {
  auto &os = llvm::outs();
  for (const Launch &l : launches) {
    if (l.kernel == kGemm)
      os << llvm::formatv(
          "    {0,-34} cuBLAS GEMM {1}{2}", l.name, describeGemm(l.gemm),
          l.gemm.algo < 0
              ? std::string()
              : " (cuBLASLt algorithm " + std::to_string(l.gemm.algo) + ")");
    else if (!runsKernel(l.kernel))
      os << llvm::formatv("    {0,-34} {1} of {2} columns over {3} ranks",
                          l.name,
                          l.kernel == kAllReduce ? "all-reduce" : "all-gather",
                          l.collectiveCols, p.ranks);
    else
      os << llvm::formatv("    {0,-34} {1} grid ({2}, {3}, {4}) x {5}", l.name,
                          p.kernels[l.kernel].name, l.grid[0], l.grid[1],
                          l.grid[2], l.blockThreads);
    // The LM head of a prefill: every row's when the logits are read back,
    // else the last row's.
    if (l.when != LaunchWhen::Always)
      os << (l.when == LaunchWhen::EveryLogit ? ", if the logits are read"
                                              : ", if they are not");
    os << ":";
    for (const Argument &a : l.args) {
      os << " " << regionName(a.region);
      if (a.region == Region::Arena || a.region == Region::Pool ||
          (a.region == Region::Dequantized && a.offset))
        os << "+" << a.offset;
      if (a.region == Region::Weight)
        os << "(" << a.weight << ")";
    }
    os << "\n";
  }
}
} // namespace

int runInspect() {
  if (!sassFlag && !sassJsonFlag) {
    if (GgufFile::looksLikeGguf(bundlePath) ||
        llvm::StringRef(bundlePath).ends_with(".gguf"))
      return inspectGguf(bundlePath);
    if (llvm::StringRef(bundlePath).ends_with(".bin"))
      return inspectLlama2c(bundlePath);
  }
  auto bundle = readBundle(bundlePath);
  if (!bundle.ok())
    return fail(bundle.status());
  if (sassFlag || sassJsonFlag)
    return runSassAudit(*bundle);
  if (!sassExpectFlag.empty())
    return fail(
        absl::InvalidArgumentError("--sass-expect needs --sass or --sass-json"),
        2);
  const Program &p = bundle->program;
  const LlamaConfig &c = bundle->config;
  auto &os = llvm::outs();
  os << "kiln bundle " << bundlePath << ": format version " << kBundleVersion
     << ", compiled from " << bundle->model
     << (bundle->nvrtc.empty() ? "" : " by NVRTC " + bundle->nvrtc) << "\n";
  os << llvm::formatv("  model     llama, {0} layers, hidden {1}, {2} heads "
                      "({3} kv), ffn {4}, vocab {5}, context {6}\n",
                      c.numLayers, c.hiddenSize, c.numHeads, c.numKVHeads,
                      c.intermediateSize, c.vocabSize, c.maxPositions);
  if (!c.ropeScaling.empty())
    os << "  rope      " << c.ropeScaling << " scaling, factor "
       << absl::StrCat(c.ropeScalingFactor) << " (docs/rope-scaling.md)\n";
  if (bundle->program.ranks > 1)
    os << "  ranks     " << bundle->program.ranks
       << " (tensor parallelism: every rank runs these plans on its slices "
          "of the weights, docs/tensor-parallel.md)\n";
  for (const std::string &adapter : bundle->lora)
    os << "  lora      " << adapter
       << " (merged into the weights at load: docs/lora.md)\n";
  os << llvm::formatv("  memory    arena {0} bytes, KV pool {1} bytes ({2} "
                      "blocks of {3} tokens, {8}; {4} sequences of up to {5} "
                      "blocks), workspace {6} floats, {7} counters\n",
                      p.arenaBytes, p.poolBytes, p.poolBlocks, p.blockSize,
                      p.sequences, p.tableBlocks, p.workspaceFloats, p.counters,
                      p.kvDtype == "fp8" || p.kvDtype == "int8"
                          ? p.kvDtype + " codes, an f16 scale a head"
                          : p.kvDtype);
  if (p.dequantizedHalves > 0)
    os << "  dequantized " << p.dequantizedHalves * 2
       << " bytes: the largest quantized weight dequantized for cuBLAS (or "
          "the FP8 GEMM's e4m3 operands and scales)\n";
  os << "  kernels   " << p.kernels.size() << "\n";
  for (const KernelCode &k : p.kernels) {
    os << llvm::formatv("    {0,-34} {1} bytes of CUDA C++", k.name,
                        k.source.size());
    auto cubins = bundle->cubin.find(k.name);
    if (cubins != bundle->cubin.end())
      for (const auto &[target, bytes] : cubins->second)
        os << llvm::formatv(", {0}: cubin {1} bytes, ptx {2} bytes", target,
                            bytes.size(), bundle->ptx[k.name][target].size());
    if (k.dynamicSharedBytes > 0)
      os << ", " << k.dynamicSharedBytes << " bytes of dynamic shared memory";
    os << "\n";
  }
  os << "  weights   " << p.weights.size()
     << " buffers, packed from the checkpoint as listed\n";
  for (const WeightBuffer &w : p.weights) {
    int64_t rows = 0;
    std::string sources;
    for (const WeightSource &s : w.sources) {
      rows += s.shape.size() == 2 ? s.shape[0] : 1;
      sources +=
          (sources.empty() ? "" : " + ") + s.name + " " + shapeString(s.shape);
    }
    os << "    " << w.name << " " << shapeString({rows, w.cols}) << " "
       << (w.quant ? w.quant->name() : "f16") << " = " << sources;
    if (!w.scaledBy.empty())
      os << (w.quant ? ", x scaled by " : ", columns scaled by ") << w.scaledBy;
    if (w.quant)
      os << " (" << weightBufferBytes(w) << " bytes)";
    os << "\n";
  }
  os << "  decode    " << p.decode.size()
     << " launches, logits (f32) at arena offset " << p.decodeLogits << "\n";
  printLaunches(p, p.decode);
  os << "  prefill   " << p.prefill.size()
     << " buckets, logits (f32) at arena offset " << p.prefillLogits << "\n";
  auto buckets = [&](const std::vector<StepPlan> &plans, const char *what) {
    for (const StepPlan &plan : plans) {
      int64_t gemms = llvm::count_if(
          plan.launches, [](const Launch &l) { return l.kernel == kGemm; });
      os << llvm::formatv("    up to {0,-5} {1}: {2} launches, {3} of them "
                          "cuBLAS GEMMs\n",
                          plan.rows, what, plan.launches.size(), gemms);
    }
  };
  buckets(p.prefill, "tokens");
  // The smallest bucket, then each bucket whose kernels differ from the
  // one shown before it (quantized weights dequantized for cuBLAS from
  // some length on; tuned variants).
  auto kernelsOf = [](const StepPlan &plan) {
    std::vector<int> ids;
    for (const Launch &l : plan.launches)
      ids.push_back(l.kernel);
    return ids;
  };
  const StepPlan *shown = nullptr;
  for (const StepPlan &plan : p.prefill) {
    if (shown && kernelsOf(plan) == kernelsOf(*shown))
      continue;
    os << "  prefill of up to " << plan.rows << " tokens\n";
    printLaunches(p, plan.launches);
    shown = &plan;
  }
  os << "  batches   " << p.batches.size()
     << " buckets of decode steps of several sequences, logits at the "
        "prefill's offset\n";
  buckets(p.batches, "sequences");
  if (!p.batches.empty()) {
    os << "  batch of up to " << p.batches.front().rows << " sequences\n";
    printLaunches(p, p.batches.front().launches);
  }
  return 0;
}

} // namespace kiln

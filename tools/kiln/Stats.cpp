//===- Stats.cpp - kiln compile --stats -----------------------------------===//
//
// What the fusion pipeline bought, in the figures that decide decode speed:
// kernel launches per step and HBM bytes per token against the floor that
// any engine must read (the weights and the cached keys and values).
//
//===----------------------------------------------------------------------===//
#include "codegen/BuildProgram.h"
#include "ir/KernelOpInterface.h"
#include "ir/KilnOps.h"
#include "tools/kiln/Commands.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {
namespace {

std::string size(double n) {
  if (n >= double(1 << 30))
    return llvm::formatv("{0:F2} GiB", n / (1 << 30)).str();
  if (n >= double(1 << 20))
    return llvm::formatv("{0:F2} MiB", n / (1 << 20)).str();
  return llvm::formatv("{0:F2} KiB", n / (1 << 10)).str();
}

int64_t countKernels(func::FuncOp fn) {
  int64_t n = 0;
  fn.walk([&](Operation *op) { n += isa<KernelOpInterface>(op); });
  return n;
}

/// Kernels that belong to a decoder layer (named layers.N.*) and the rest.
std::pair<int64_t, int64_t> splitKernels(func::FuncOp fn) {
  int64_t layer = 0, step = 0;
  fn.walk([&](Operation *op) {
    if (!isa<KernelOpInterface>(op))
      return;
    auto name = op->getAttrOfType<StringAttr>("kiln.name");
    (name && name.getValue().starts_with("layers.") ? layer : step) += 1;
  });
  return {layer, step};
}

/// What one step launches on a device (the Program codegen builds): the
/// generated kernels of its ops, a GEMM for each of prefill's matmuls
/// (cuBLAS's or cuBLASLt's, or kiln's own kernel with gemm-algo=-2; an
/// epilogue kernel after it unless the GEMM writes the result itself), and
/// the sampling kernel that ends every step. A prefill as a server runs it:
/// the LM head of the last row only.
struct StepLaunches {
  int64_t kernels = 0, sampling = 0;
  int64_t cublas = 0, ownGemms = 0; // the GEMMs of each kind
  int64_t layerGemms = 0;           // those of the decoder layers
};

StepLaunches countLaunches(const Program &p,
                           const std::vector<Launch> &launches) {
  StepLaunches n;
  for (const Launch &l : launches) {
    // A step that samples without reading its logits back (the LM head of
    // its last row).
    if (l.when == LaunchWhen::EveryLogit)
      continue;
    bool inLayer = StringRef(l.name).starts_with("layers.");
    if (l.kernel == kGemm) {
      ++n.cublas;
      n.layerGemms += inLayer;
      continue;
    }
    StringRef kernel = p.kernels[l.kernel].name;
    std::string gemm = kSmallGemmSuffix;
    if (kernel.starts_with("sampling.")) {
      ++n.sampling;
    } else if (kernel.ends_with(gemm) || kernel.contains(gemm + "@") ||
               kernel.contains(gemm + kLastRowSuffix)) {
      ++n.ownGemms;
      n.layerGemms += inLayer;
    } else {
      ++n.kernels;
    }
  }
  return n;
}

/// What the cuBLAS GEMMs of a step (as a server runs it) write and over
/// which rows: "cuBLAS GEMMs: 64 onto the residual (beta 1, f16 out), 65
/// to f32 for an epilogue kernel; 128 of the real rows, 1 of the last";
/// empty without any.
std::string gemmLine(const std::vector<Launch> &launches) {
  int64_t residual = 0, f16 = 0, f32 = 0, real = 0, last = 0, all = 0;
  for (const Launch &l : launches) {
    if (l.kernel != kGemm || l.when == LaunchWhen::EveryLogit)
      continue;
    ++(l.gemm.beta ? residual : l.gemm.f16Out ? f16 : f32);
    ++(l.gemm.rows == GemmRows::Count  ? real
       : l.gemm.rows == GemmRows::Last ? last
                                       : all);
  }
  std::vector<std::string> out, rows;
  auto add = [](std::vector<std::string> &list, int64_t n, StringRef what) {
    if (n > 0)
      list.push_back(llvm::formatv("{0} {1}", n, what).str());
  };
  add(out, residual, "onto the residual (beta 1, f16 out)");
  add(out, f32, "to f32 for an epilogue kernel");
  add(out, f16, "to f16");
  add(rows, real, "of the real rows");
  add(rows, last, "of the last");
  add(rows, all, "of the whole bucket");
  if (out.empty())
    return "";
  return "cuBLAS GEMMs: " + llvm::join(out, ", ") + "; " +
         llvm::join(rows, ", ");
}

/// "163 launches: 162 kernels + 1 sampling", with the GEMMs when there are.
std::string launchLine(const StepLaunches &n, int64_t layers) {
  int64_t gemms = n.cublas + n.ownGemms;
  std::string line = llvm::formatv("{0} launches: {1} kernels",
                                   n.kernels + gemms + n.sampling, n.kernels);
  auto addGemms = [&](int64_t count, StringRef what) {
    if (count == 0)
      return;
    line += llvm::formatv(" + {0} {1} GEMMs", count, what).str();
    if (count == gemms) // per layer only when one kind fills every layer
      line += llvm::formatv(" ({0} per layer x {1} layers + {2} per step)",
                            n.layerGemms / layers, layers, gemms - n.layerGemms)
                  .str();
  };
  addGemms(n.cublas, "cuBLAS");
  addGemms(n.ownGemms, "kiln");
  line += llvm::formatv(" + {0} sampling", n.sampling).str();
  return line;
}
} // namespace

void printStats(ModuleOp fused, ModuleOp unfused, const LlamaConfig &c) {
  auto &os = llvm::outs();
  // The launches a device runs for a step: decode's plan, and prefill's for
  // its largest bucket (every bucket launches the same kernels).
  auto knobs = codegenOptions();
  std::string noPlan;
  std::optional<Program> program;
  if (!knobs.ok()) {
    noPlan = std::string(knobs.status().message());
  } else if (auto built = buildProgram(fused, *knobs)) {
    program = std::move(*built);
  } else {
    noPlan = toString(built.takeError());
  }
  os << "  kernels per step (before fusion -> after), and the launches of "
        "a step on the device\n";
  for (StringRef name : {"decode", "prefill"}) {
    auto fn = fused.lookupSymbol<func::FuncOp>(name);
    auto before = unfused.lookupSymbol<func::FuncOp>(name);
    if (!fn || !before)
      continue;
    auto [layer, step] = splitKernels(fn);
    os << llvm::formatv("    @{0,-8} {1} -> {2}", name, countKernels(before),
                        countKernels(fn));
    // Without the pipeline no op is named after its layer.
    if (layer > 0)
      os << llvm::formatv(": {0} per layer x {1} layers + {2} per step",
                          layer / c.numLayers, c.numLayers, step);
    os << "\n";
    if (!program)
      continue;
    const std::vector<Launch> &launches =
        name == "decode" ? program->decode : program->prefill.back().launches;
    os << "              "
       << launchLine(countLaunches(*program, launches), c.numLayers) << "\n";
    if (std::string gemms = gemmLine(launches); !gemms.empty())
      os << "              " << gemms << "\n";
  }
  if (!program)
    os << "    no launches to count: " << noPlan << "\n";

  auto decode = fused.lookupSymbol<func::FuncOp>("decode");
  if (decode) {
    KernelCost total;
    decode.walk([&](Operation *op) {
      total += estimateCost(op, {/*tokens=*/1, /*context=*/c.maxPositions});
    });
    double weights = double(total.weightBytes);
    double floor = weights + double(total.kvReadBytes);
    os << llvm::formatv("  HBM bytes per decode token (batch 1, context "
                        "{0})\n",
                        c.maxPositions);
    os << llvm::formatv("    weights      {0}\n", size(weights));
    os << llvm::formatv("    kv reads     {0}\n", size(total.kvReadBytes));
    os << llvm::formatv("    kv writes    {0}\n", size(total.kvWriteBytes));
    os << llvm::formatv("    activations  {0} ({1:F3}% of the weight "
                        "bytes)\n",
                        size(total.activationBytes),
                        100.0 * double(total.activationBytes) / weights);
    os << llvm::formatv("    total        {0}, {1:F4}x the floor of weights "
                        "+ kv reads ({2})\n",
                        size(total.bytes()), double(total.bytes()) / floor,
                        size(floor));
  }

  os << "  memory\n";
  if (auto arena = fused->getAttrOfType<IntegerAttr>("kiln.arena_bytes"))
    os << llvm::formatv(
        "    arena        {0} (the largest function; peak "
        "live {1})\n",
        size(arena.getInt()),
        size(fused->getAttrOfType<IntegerAttr>("kiln.arena_peak_bytes")
                 .getInt()));
  if (auto pool = fused->getAttrOfType<KVPoolAttr>("kiln.kv_pool"))
    os << llvm::formatv("    kv pool      {0} ({1} blocks of {2} tokens)\n",
                        size(pool.getBytes()), pool.getBlocks(),
                        pool.getBlockSize());
}

} // namespace kiln

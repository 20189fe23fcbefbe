//===- Stats.cpp - kiln compile --stats -----------------------------------===//
//
// What the fusion pipeline bought, in the figures that decide decode speed:
// kernel launches per step and HBM bytes per token against the floor that
// any engine must read (the weights and the cached keys and values).
//
//===----------------------------------------------------------------------===//
#include "ir/KilnOps.h"
#include "passes/CostModel.h"
#include "tools/kiln/Commands.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
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
  fn.walk([&](Operation *op) { n += isKernel(op); });
  return n;
}

/// Kernels that belong to a decoder layer (named layers.N.*) and the rest.
std::pair<int64_t, int64_t> splitKernels(func::FuncOp fn) {
  int64_t layer = 0, step = 0;
  fn.walk([&](Operation *op) {
    if (!isKernel(op))
      return;
    auto name = op->getAttrOfType<StringAttr>("kiln.name");
    (name && name.getValue().starts_with("layers.") ? layer : step) += 1;
  });
  return {layer, step};
}
} // namespace

void printStats(ModuleOp fused, ModuleOp unfused, const LlamaConfig &c) {
  auto &os = llvm::outs();
  os << "  kernels per step (before fusion -> after)\n";
  for (StringRef name : {"decode", "prefill"}) {
    auto fn = fused.lookupSymbol<func::FuncOp>(name);
    auto before = unfused.lookupSymbol<func::FuncOp>(name);
    if (!fn || !before)
      continue;
    auto [layer, step] = splitKernels(fn);
    os << llvm::formatv("    @{0,-8} {1} -> {2}: {3} per layer x {4} layers "
                        "+ {5} per step\n",
                        name, countKernels(before), countKernels(fn),
                        layer / c.numLayers, c.numLayers, step);
  }

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

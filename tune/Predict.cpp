//===- Predict.cpp --------------------------------------------------------===//
#include "tune/Predict.h"
#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace kiln {

KernelFacts kernelFacts(const sass::KernelAudit &a) {
  KernelFacts f;
  f.registers = a.resources.registers;
  f.sharedBytes = a.resources.sharedBytes + a.dynamicSharedBytes;
  auto count = [&](const char *key) {
    auto it = a.mix.find(key);
    return it == a.mix.end() ? 0 : it->second;
  };
  f.waits = count("ACQBULK") > 0;
  f.triggers = count("PREEXIT") > 0;
  if (a.loop) {
    f.bytesInFlight = double(a.loop->bytesInFlight);
    f.inFlightFromLoop = true;
  } else {
    // No loop that loads: every load of the kernel, at once.
    std::pair<const char *, int> widths[] = {{"LDG.8", 1},    {"LDG.16", 2},
                                             {"LDG.32", 4},   {"LDG.64", 8},
                                             {"LDG.128", 16}, {"LDGSTS", 16}};
    for (auto [key, bytes] : widths)
      if (auto it = a.mix.find(key); it != a.mix.end())
        f.bytesInFlight += double(it->second) * bytes;
  }
  const sass::PipeWork &w = a.computeWork;
  f.work.instructions = w.instructions;
  f.work.fma = w.fma;
  f.work.fmaFlopsPerLane = double(w.fmaFlopsPerLane);
  f.work.mufu = w.mufu;
  f.work.sharedCycles = double(w.sharedCycles);
  f.work.mmaFlops = double(w.mmaFlops);
  f.work.wgmmaFlops = double(w.wgmmaFlops);
  return f;
}

std::map<std::string, KernelFacts>
kernelFacts(const std::vector<sass::KernelAudit> &audits,
            const std::string &target) {
  std::map<std::string, KernelFacts> out;
  for (const sass::KernelAudit &a : audits)
    if (a.target == target)
      out[a.kernel] = kernelFacts(a);
  return out;
}

std::string describe(const StepShape &s) {
  if (s.prefill)
    return llvm::formatv("prefill, {0} tokens", s.rows).str();
  return llvm::formatv("decode, batch {0}, {1} keys", s.rows, s.context).str();
}

const KernelPrediction *StepPrediction::find(llvm::StringRef prefix) const {
  for (const KernelPrediction &k : kernels)
    if (llvm::StringRef(k.kernel).starts_with(prefix))
      return &k;
  return nullptr;
}

const KernelPrediction *StepPrediction::kernel(llvm::StringRef name) const {
  for (const KernelPrediction &k : kernels)
    if (k.kernel == name)
      return &k;
  return nullptr;
}

namespace {

int64_t dim(Value v, unsigned i) {
  return cast<RankedTensorType>(v.getType()).getDimSize(i);
}

/// Bytes of `op`'s results over `rows` rows (a dynamic first dimension).
double resultBytes(Operation *op, int64_t rows) {
  double bytes = 0;
  for (Value r : op->getResults()) {
    auto t = dyn_cast<RankedTensorType>(r.getType());
    if (!t)
      continue;
    double n = double(t.getElementTypeBitWidth()) / 8;
    for (int64_t d : t.getShape())
      n *= double(ShapedType::isDynamic(d) ? rows : d);
    bytes += n;
  }
  return bytes;
}

/// One launch as the model sees it.
struct Call {
  double bytes = 0, flops = 0, micros = 0, launchMicros = 0;
  /// The FLOPs the cores do, when more than `flops` (the useful ones):
  /// what the kernel's compute time follows.
  double workFlops = 0;
  bool tensorCores = false, predicted = false, dependent = false;
  std::string bound;
};

} // namespace

llvm::Expected<const StepPlan *> planForStep(const Program &program,
                                             const StepShape &shape) {
  int64_t capacity =
      std::min(program.maxPositions, program.tableBlocks * program.blockSize);
  if (shape.context > capacity)
    return llvm::createStringError(std::to_string(shape.context) +
                                   " keys: the KV pool holds " +
                                   std::to_string(capacity) + " a sequence");
  if (!shape.prefill && shape.rows == 1)
    return nullptr; // decode's own plan: Program::decode
  if (!shape.prefill) {
    if (program.batches.empty())
      return llvm::createStringError(
          "a decode of " + std::to_string(shape.rows) +
          " sequences: the bundle decodes one at a time (--max-batch)");
    const StepPlan &plan = Program::planFor(program.batches, shape.rows);
    if (plan.rows < shape.rows)
      return llvm::createStringError(
          "a decode of " + std::to_string(shape.rows) +
          " sequences: the largest batch plan holds " +
          std::to_string(plan.rows));
    return &plan;
  }
  const StepPlan &plan = program.prefillFor(shape.rows);
  if (plan.rows < shape.rows)
    return llvm::createStringError(
        "a prefill of " + std::to_string(shape.rows) +
        " tokens: the largest prefill plan holds " + std::to_string(plan.rows) +
        " (longer prompts run in chunks)");
  return &plan;
}

llvm::Expected<StepPrediction>
predictStep(ModuleOp module, const Program &program, const CodegenOptions &opts,
            const std::map<std::string, KernelFacts> &facts,
            const GpuModel &gpu, const StepShape &shape) {
  StepPrediction out;
  out.shape = shape;
  out.gpu = gpu.shortName;
  auto plan = planForStep(program, shape);
  if (!plan)
    return plan.takeError();
  // decode's plan (no StepPlan: Program::decode), or a batch's or prefill's.
  const std::vector<Launch> *launches =
      *plan ? &(*plan)->launches : &program.decode;
  int64_t planRows = *plan ? (*plan)->rows : shape.rows;
  bool batch = !shape.prefill && shape.rows > 1;
  auto fn = module.lookupSymbol<func::FuncOp>(
      !shape.prefill && shape.rows == 1 ? "decode" : "prefill");
  if (!fn)
    return llvm::createStringError("the module has no @decode and @prefill");
  llvm::StringMap<Operation *> byName;
  for (Operation &op : fn.getBody().front())
    if (auto name = op.getAttrOfType<StringAttr>("kiln.name");
        name && isa<KernelOpInterface>(op))
      byName[name.getValue()] = &op;

  std::map<std::string, KernelPrediction> byKernel;
  std::map<std::string, double> longest; // each kernel's longest call
  std::vector<std::string> order;
  // The kernel launched before (none after a cuBLAS GEMM, whose kernels
  // trigger nothing): whether it lets the next one launch early.
  const KernelFacts *previous = nullptr;
  for (const Launch &l : *launches) {
    if (l.when == LaunchWhen::EveryLogit)
      continue;
    bool gemm = l.kernel == kGemm;
    std::string name = gemm ? "cublas" : program.kernels[l.kernel].name;
    llvm::StringRef kernel(name);
    Call call;
    // The rows a launch computes: a step's real rows (the bucket's in a
    // batch plan, whose graph fixes them), or the last one.
    bool lastRow =
        l.when == LaunchWhen::LastLogit || kernel.contains(kLastRowSuffix);
    int64_t rows = lastRow ? 1 : batch ? planRows : shape.rows;
    if (gemm) {
      int64_t m = l.gemm.rowsFor(batch ? planRows : shape.rows);
      call.bytes = gemmBytes(m, l.gemm.n, l.gemm.k, l.gemm.fp8);
      call.flops = 2.0 * double(m) * double(l.gemm.n) * double(l.gemm.k);
      call.micros = gemmMicros(gpu, m, l.gemm.n, l.gemm.k, l.gemm.fp8);
      call.launchMicros = gpu.launchMicros;
      call.tensorCores = call.predicted = true;
      double peak = l.gemm.fp8 && gpu.fp8TensorFlops > 0 ? gpu.fp8TensorFlops
                                                         : gpu.tensorFlops;
      call.bound = call.flops / peak > call.bytes / gpu.reachableHbm()
                       ? "tensor peak"
                       : "memory";
    } else {
      LaunchCost cost;
      cost.grid = l.grid;
      cost.threads = l.blockThreads;
      if (kernel.starts_with("sampling.")) {
        // The logits of the rows it samples: the prompt's last, or each
        // sequence's.
        int64_t sampled = shape.prefill ? 1 : rows;
        call.bytes = double(sampled) * double(program.vocab) * 4;
      } else {
        Operation *op = byName.lookup(l.name);
        if (!op)
          return llvm::createStringError("launch of " + name + " (" + l.name +
                                         ") names no op of @" +
                                         fn.getName().str());
        auto kop = cast<KernelOpInterface>(op);
        Phase phase = !shape.prefill && shape.rows == 1 ? Phase::decode
                      : batch && kernel.contains(kBatchSuffix)
                          ? Phase::batch_decode
                          : Phase::prefill;
        KernelTemplate t = kop.getKernelTemplate(phase);
        // The knobs of a plan's variant ("kernel@knobs").
        CodegenOptions knobs = opts;
        if (size_t at = kernel.find('@'); at != llvm::StringRef::npos)
          llvm::consumeError(
              parseCodegenOptions(kernel.drop_front(at + 1), knobs));
        if (kernel.contains(kQuantGemmSuffix)) {
          // The quantized GEMM: W's packed bytes once (codes, scales,
          // zeros), x, 4 bytes an output; on tensor cores.
          double n = double(dim(op->getOperand(1), 0));
          double k = double(dim(op->getOperand(1), 1));
          double s = double(rows);
          call.bytes =
              double(estimateCost(op, {rows, shape.context}).weightBytes) +
              s * k * 2 + s * n * 4;
          call.flops = 2 * s * n * k;
          // Its mma.m16n8k16 multiplies 8 rows of x at once: one token
          // costs the tensor cores (and the dequantizing instructions the
          // SASS audit counts against them) what 8 do.
          call.workFlops = 2 * std::ceil(s / 8) * 8 * n * k;
        } else if (kernel.contains(kFp8WeightSuffix)) {
          // The FP8 GEMM's weight: W's packed bytes once, its codes
          // written row-major (a byte each) with an f32 scale a row.
          double n = double(dim(op->getOperand(1), 0));
          double k = double(dim(op->getOperand(1), 1));
          call.bytes =
              double(estimateCost(op, {rows, shape.context}).weightBytes) +
              n * k + n * 4;
        } else if (kernel.contains(kQuantizeActivationSuffix)) {
          // The activation quantizer: x [rows, k] f16 read (and the norm
          // weight), its codes and a scale a row written.
          double k = double(dim(op->getOperand(1), 1));
          double s = double(rows);
          call.bytes = s * k * 2 + k * 2 + s * k + s * 4;
        } else if (kernel.contains(kDequantizeSuffix)) {
          // The dequantize kernel: W's packed bytes once, W[n, k] f16
          // written (for the cuBLAS GEMM after it, which reads it again).
          double n = double(dim(op->getOperand(1), 0));
          double k = double(dim(op->getOperand(1), 1));
          call.bytes =
              double(estimateCost(op, {rows, shape.context}).weightBytes) +
              n * k * 2;
        } else if (kernel.contains(kSmallGemmSuffix)) {
          // kiln's own GEMM: W once per tile of rows, x, 4 bytes an
          // output; on CUDA cores.
          double n = double(dim(op->getOperand(1), 0));
          double k = double(dim(op->getOperand(1), 1));
          double s = double(rows),
                 tiles = double(std::max<int64_t>(l.grid[1], 1));
          call.bytes = tiles * n * k * 2 + s * k * 2 + s * n * 4;
          call.flops = 2 * s * n * k;
        } else if (followsGemm(t)) {
          // The epilogue of a cuBLAS GEMM: its f32 rows, x for the norm,
          // the results (and the keys and values it writes).
          double n = double(dim(op->getOperand(1), 0));
          double k = double(dim(op->getOperand(1), 1));
          double s = double(rows);
          call.bytes =
              s * (n * 4 + k * 2) + resultBytes(op, rows) +
              double(estimateCost(op, {rows, shape.context}).kvWriteBytes);
          call.flops = s * n * 4;
        } else {
          KernelCost c = estimateCost(op, {rows, shape.context});
          call.bytes = double(c.bytes());
          call.flops = double(c.flops);
          // A GEMV of a quantized weight is the quantized GEMM's loop (on
          // tensor cores, 8 rows of x a multiply): as .qgemm above.
          if ((t == KernelTemplate::gemv || t == KernelTemplate::qkv_gemv) &&
              hasQuantizedWeight(op))
            call.workFlops =
                call.flops * std::ceil(double(rows) / 8) * 8 / double(rows);
          if (t == KernelTemplate::decode_attention) {
            // Each sequence reads its own keys and values; blocks past the
            // splits its context fills leave at once.
            call.bytes += double(c.kvReadBytes) * double(rows - 1);
            auto att = cast<AttentionOp>(op);
            int64_t heads = att.getHeads(), kvHeads = att.getKvHeads();
            int64_t dh = dim(att.getQuery(), 1) / heads;
            DecodeAttentionTiling tiling =
                decodeAttentionTiling(dh, heads / kvHeads, knobs);
            cost.grid[1] = decodeAttentionSplits(
                tiling, l.grid[1], shape.context, knobs.kvSplits > 0);
          } else if (t == KernelTemplate::prefill_attention) {
            // Causal from position 0: row i attends i + 1 keys.
            double s = double(rows);
            call.flops *= (s + 1) / (2 * s);
          }
        }
      }
      // A prefill below its bucket: the blocks of the real rows.
      if (shape.prefill && !lastRow && planRows > shape.rows) {
        int64_t blocks = cost.grid[0] * cost.grid[1] * cost.grid[2];
        cost.grid = {std::max<int64_t>(1, (blocks * shape.rows + planRows - 1) /
                                              planRows),
                     1, 1};
      }
      auto f = facts.find(name);
      if (f != facts.end()) {
        cost.registers = f->second.registers;
        cost.sharedBytes = f->second.sharedBytes;
        cost.hbmBytes = call.bytes;
        cost.flops = std::max(call.flops, call.workFlops);
        cost.bytesInFlight = std::max(f->second.bytesInFlight, 1.0);
        ComputeRate rate = computeRate(gpu, f->second.work);
        cost.tensorCores = rate.tensorCores;
        cost.flopsPerSmCycle = rate.flopsPerSmCycle;
        if (f->second.inFlightFromLoop) // the audited loop's pass
          cost.passFlops = passFlops(f->second.work);
        call.tensorCores = rate.tensorCores;
        auto e = estimateLaunch(gpu, cost);
        if (!e)
          return llvm::createStringError(
              name + ": a block does not fit a multiprocessor of the " +
              gpu.shortName);
        call.micros = e->micros;
        call.launchMicros = gpu.launchMicros;
        if (gpu.dependentLaunch && f->second.waits && previous &&
            previous->triggers) {
          call.micros -= gpu.launchMicros - gpu.dependentLaunchMicros;
          call.launchMicros = gpu.dependentLaunchMicros;
          call.dependent = true;
        }
        call.predicted = true;
        call.bound = e->bound == "compute"
                         ? (rate.limiter.empty() ? "CUDA cores" : rate.limiter)
                         : e->bound;
      }
    }
    auto [it, fresh] = byKernel.try_emplace(name);
    KernelPrediction &k = it->second;
    if (fresh) {
      k.kernel = name;
      k.micros = 0.0;
      order.push_back(name);
    }
    if (!gemm) {
      auto f = facts.find(name);
      previous = f != facts.end() ? &f->second : nullptr;
    } else {
      previous = nullptr;
    }
    out.dependentLaunches += call.dependent;
    out.launchMicros += call.launchMicros;
    k.launchMicros += call.launchMicros;
    ++k.calls;
    k.bytes += call.bytes;
    k.flops += call.flops;
    k.tensorCores = k.tensorCores || call.tensorCores;
    if (call.predicted && k.micros) {
      if (call.micros > longest[name]) {
        longest[name] = call.micros;
        k.bound = call.bound;
      }
      *k.micros += call.micros;
    } else {
      k.micros.reset();
    }
    ++out.launches;
    out.bytes += call.bytes;
    out.flops += call.flops;
  }
  out.micros = 0.0;
  for (const std::string &name : order) {
    KernelPrediction &k = byKernel[name];
    if (k.micros)
      *out.micros += *k.micros;
    else
      out.unaudited.push_back(name);
    out.kernels.push_back(std::move(k));
  }
  if (!out.unaudited.empty())
    out.micros.reset();
  // By time, then bytes, then name: a total order, so a plain sort is stable.
  llvm::sort(out.kernels,
             [](const KernelPrediction &a, const KernelPrediction &b) {
               double x = a.micros.value_or(-1), y = b.micros.value_or(-1);
               if (x != y)
                 return x > y;
               if (a.bytes != b.bytes)
                 return a.bytes > b.bytes;
               return a.kernel < b.kernel;
             });
  return out;
}

} // namespace kiln

//===- Tuner.cpp ----------------------------------------------------------===//
#include "tune/Tuner.h"
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"
#include "runtime/AtomicFile.h"
#include "runtime/Hash.h"
#include "tune/CostModel.h"
#include "tune/Plot.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Parallel.h"
#include "llvm/Support/raw_ostream.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <map>
#include <mutex>

using namespace mlir;

namespace kiln {
namespace {

/// Every setting of the knobs, in the order the lists give.
std::vector<std::string>
product(const std::vector<std::pair<std::string, std::vector<int>>> &knobs) {
  std::vector<std::string> out = {""};
  for (const auto &[name, values] : knobs) {
    std::vector<std::string> next;
    for (const std::string &prefix : out)
      for (int v : values)
        next.push_back(prefix + (prefix.empty() ? "" : ",") + name + "=" +
                       std::to_string(v));
    out = std::move(next);
  }
  return out;
}

/// The matmuls: ops that run a GEMV in decode.
bool isMatmul(KernelOpInterface op) {
  KernelTemplate t = op.getKernelTemplate(Phase::decode);
  return t == KernelTemplate::gemv || t == KernelTemplate::qkv_gemv;
}

/// prefill.gemm and decode.gemm: cuBLAS's GEMMs or kiln's own, before
/// @prefill's matmul epilogues (a batched decode step runs @prefill's ops
/// with a row per sequence).
bool isGemmFamily(const TuneFamily &f) {
  return f.name == "prefill.gemm" || f.name == "decode.gemm";
}

/// prefill.quant-gemm: a quantized weight's matmul by kiln's quantized
/// GEMM, or dequantized for cuBLAS's.
bool isQuantFamily(const TuneFamily &f) {
  return f.name == "prefill.quant-gemm";
}

/// decode.quant-gemv: decode's GEMVs of quantized weights (dequantized in
/// registers, on tensor cores), by their split-K.
bool isQuantGemvFamily(const TuneFamily &f) {
  return f.name == "decode.quant-gemv";
}

/// The share of the dense tensor peak kiln's quantized GEMM reaches in a
/// prefill: the SASS audit of llama2-7b int4-g128's prefill .qgemm kernels
/// on sm_90 finds them issue-bound at 128 to 191 of 989 TFLOP/s (kiln
/// compile --stats; bench/RESULTS.md). kiln tune's cost mode reads no SASS,
/// and at mma.sync's share it would put the crossover five times too far.
constexpr double kQuantGemmTensorShare = 0.13;

/// cuBLAS's algorithms, then kiln's own GEMM with each tile.
std::vector<std::string> gemmCandidates() {
  auto c = product({{"gemm-algo", {-1, 0, 1, 2, 3}}});
  for (const std::string &k : product(
           {{"gemm-algo", {kSmallGemmAlgo}}, {"gemm-tile", {1, 2, 4, 8, 16}}}))
    c.push_back(k);
  return c;
}

/// The ops a family's kernels run: decode's or prefill's.
std::vector<Operation *> familyOps(ModuleOp module, const TuneFamily &f) {
  bool attention = f.name.find("attention") != std::string::npos;
  bool elementwise = f.name == "prefill.elementwise";
  // decode.attention: @decode's op at batch 1; above, the batched decode
  // plans run @prefill's op of the same layer (batchAttention). Their
  // GEMMs (decode.gemm) are @prefill's.
  bool decode = f.name.rfind("decode.", 0) == 0 && !isGemmFamily(f);
  auto fn = module.lookupSymbol<func::FuncOp>(decode ? "decode" : "prefill");
  std::vector<Operation *> ops;
  if (!fn)
    return ops;
  Phase phase = decode ? Phase::decode : Phase::prefill;
  for (auto op : fn.getBody().front().getOps<KernelOpInterface>()) {
    KernelTemplate t = op.getKernelTemplate(phase);
    if (attention ? t == KernelTemplate::prefill_attention ||
                        t == KernelTemplate::decode_attention
        : elementwise ? t == KernelTemplate::embedding
        : isQuantFamily(f)
            ? isMatmul(op) && hasQuantizedWeight(op) && followsGemm(t)
            // decode.gemv's are f16 weights' GEMVs, the quantized ones
            // decode.quant-gemv's.
            : isMatmul(op) && hasQuantizedWeight(op) == isQuantGemvFamily(f))
      ops.push_back(op);
  }
  return ops;
}

Operation *batchAttention(ModuleOp module, Operation *decodeOp) {
  // @prefill's attention op of the same layer (same kiln.name).
  auto fn = module.lookupSymbol<func::FuncOp>("prefill");
  auto name = decodeOp->getAttrOfType<StringAttr>("kiln.name");
  for (Operation &op : fn.getBody().front())
    if (isa<AttentionOp>(op) && op.getAttr("kiln.name") == name)
      return &op;
  return nullptr;
}

/// The kernel of `op` in family `f` with the knobs `opts`: kiln's own GEMM
/// for the GEMM families, else the op's template in the family's phase.
llvm::Expected<CudaKernel> emitFor(const TuneFamily &f, Operation *op,
                                   const CodegenOptions &opts, bool batch) {
  if (isGemmFamily(f))
    return emitSmallGemm(op, opts);
  if (isQuantFamily(f))
    return opts.quantGemm == 1 ? emitDequantizeWeight(op, opts)
                               : emitQuantGemm(op, opts, Phase::prefill);
  Phase phase = f.name.rfind("decode.", 0) != 0 ? Phase::prefill
                : batch                         ? Phase::batch_decode
                                                : Phase::decode;
  return emitTemplate(cast<KernelOpInterface>(op).getKernelTemplate(phase), op,
                      opts, phase);
}

/// Whether candidate `opts` of family `f` runs cuBLAS (no kernel of ours).
bool runsCublas(const TuneFamily &f, const CodegenOptions &opts) {
  return isGemmFamily(f) && opts.gemmAlgo != kSmallGemmAlgo;
}

int64_t dim(Value v, unsigned i) {
  return cast<RankedTensorType>(v.getType()).getDimSize(i);
}

/// The bytes and FLOPs of `op`'s launch over `rows` rows at sequence length
/// `length`, as the kernel `k` does them.
LaunchCost traffic(const TuneFamily &f, Operation *op, const CudaKernel &k,
                   const CodegenOptions &opts, int64_t rows, int64_t length) {
  LaunchCost l;
  l.grid = k.gridFor(rows);
  l.threads = k.blockThreads;
  if (auto att = dyn_cast<AttentionOp>(op)) {
    double h = double(att.getHeads()), kvh = double(att.getKvHeads());
    double dh = double(dim(att.getQuery(), 1)) / h;
    if (f.name == "decode.attention") {
      // Each row reads its keys and values once, for all heads of a KV
      // group; splits (as many as the context fills) add partials.
      DecodeAttentionTiling t =
          decodeAttentionTiling(int64_t(dh), int64_t(h / kvh), opts);
      l.grid[1] =
          decodeAttentionSplits(t, l.grid[1], length, opts.kvSplits > 0);
      double keys = double(length);
      l.hbmBytes = double(rows) * (keys * kvh * dh * 4 + h * dh * 4);
      if (l.grid[1] > 1)
        l.hbmBytes += double(rows) * h * double(l.grid[1]) * (dh + 2) * 8;
      l.flops = double(rows) * h * keys * dh * 4;
      l.loadBytes = 2 * t.vec;
    } else {
      // Each block of TOK tokens (a KV group's heads, or a slice of them)
      // copies the keys and values up to its last token: the re-reads come
      // from L2.
      PrefillAttentionTiling t =
          prefillAttentionTiling(int64_t(dh), int64_t(h / kvh), opts);
      double s = double(rows), q = double(k.rowsPerBlock);
      double tiles = std::ceil(s / q);
      l.hbmBytes = s * kvh * dh * 4 + s * h * dh * 4;
      l.l2Bytes =
          kvh * double(t.headSlices) * dh * 4 * q * tiles * (tiles + 1) / 2;
      l.flops = h * dh * 4 * s * (s + 1) / 2;
      l.tensorCores = true; // mma.sync: the template's QK^T and PV
    }
    return l;
  }
  if (auto emb = dyn_cast<EmbeddingOp>(op)) {
    // A row read from the table and written: no arithmetic.
    double d = double(dim(emb.getResult(), 1));
    l.hbmBytes = double(rows) * d * 4;
    l.loadBytes = 2 * vectorWidth(int64_t(d), opts.maxVectorWidth);
    return l;
  }
  Value w = op->getOperand(1);
  double n = double(dim(w, 0)), kd = double(dim(w, 1));
  double outs = (isa<FusedLinearOp>(op) && cast<FusedLinearOp>(op).getSwiglu())
                    ? n / 2
                    : n;
  if (f.name == "decode.gemv") {
    l.hbmBytes = n * kd * 2 + kd * 2 + outs * 2;
    l.l2Bytes = double(l.grid[0]) * kd * 2; // x staged by every block
    l.flops = 2 * n * kd;
    l.loadBytes = 2 * vectorWidth(int64_t(kd), opts.maxVectorWidth);
    l.loadsInFlight = 2 * opts.gemvUnroll; // two rows, gemv-unroll each
  } else if (isQuantGemvFamily(f)) {
    // W's packed bytes once, x (staged by every block, from L2), the
    // results; the token padded to an n8 tile of the mmas.
    l.hbmBytes = double(estimateCost(op, {rows, length}).weightBytes) + kd * 2 +
                 outs * 2;
    l.l2Bytes = double(l.grid[0]) * kd * 2;
    l.flops = 2 * 8 * n * kd;
    l.tensorCores = true;
    l.loadsInFlight = opts.gemvUnroll; // 16 bytes each, a lane
  } else if (isQuantFamily(f) && opts.quantGemm == 1) {
    // The dequantize kernel: the packed weight read once, W f16 written
    // (cuBLAS's GEMM of it is added by the caller).
    l.hbmBytes =
        double(estimateCost(op, {rows, length}).weightBytes) + n * kd * 2;
    l.loadsInFlight = 4; // its UNROLL
  } else if (isQuantFamily(f)) {
    // kiln's quantized GEMM: W's packed bytes once, x, C written; on tensor
    // cores at the share the SASS audit finds.
    double s = double(rows);
    l.hbmBytes = double(estimateCost(op, {rows, length}).weightBytes) +
                 s * kd * 2 + s * n * 4;
    l.flops = 2 * s * n * kd;
    l.tensorCores = true;
    l.loadsInFlight = opts.gemvUnroll;
  } else if (isGemmFamily(f)) {
    // kiln's own GEMM: W streamed once per tile of rows (counted from HBM:
    // a 7B layer's W does not stay in L2 from one tile to the next), x
    // again for every block from L2, C written; FLOPs on CUDA cores.
    double s = double(rows), tiles = double(l.grid[1]);
    l.hbmBytes = tiles * n * kd * 2 + s * kd * 2 + s * n * 4;
    l.l2Bytes = double(l.grid[0]) * s * kd * 2;
    l.flops = 2 * s * n * kd;
    l.loadBytes = 2 * vectorWidth(int64_t(kd), opts.maxVectorWidth);
  } else {
    // The epilogue reads the GEMM's f32 row and x (for the norm), writes
    // the results.
    double s = double(rows);
    l.hbmBytes = s * (n * 4 + kd * 2 + outs * 2);
    l.flops = s * n * 4;
    l.loadBytes = 4;
  }
  return l;
}

struct Figures {
  int registers = 0;
  int64_t shared = 0;
};

} // namespace

const std::vector<TuneFamily> &tuneFamilies() {
  static const std::vector<TuneFamily> families = {
      {"decode.gemv", "context", false,
       product({{"gemv-rows", {1, 2, 4, 8}},
                {"gemv-split-k", {1, 2, 4}},
                {"gemv-unroll", {4, 8}}})},
      // Its quantized weights' GEMVs (none in an f16 model): the warps an
      // SM their split-K makes at least (16 by default; 32 before
      // 2026-12-06), fewer warps each streaming longer or more in shorter.
      {"decode.quant-gemv", "context", false,
       product({{"quant-warps", {8, 16, 32, 64}}})},
      {"decode.attention", "context", true,
       product({{"attention-warps", {2, 4, 8}},
                {"kv-splits", {0, 1, 2, 4, 8, 16}}})},
      // The batched decode plans' GEMMs (a row per sequence; batch 1 runs
      // decode's GEMVs): the context length does not change them.
      {"decode.gemm", "context", true, gemmCandidates(), 2},
      {"prefill.attention", "prompt", false,
       product({{"attention-warps", {2, 4, 8}},
                {"prefill-attention-rows", {16, 32}},
                {"prefill-attention-keys", {16, 32, 64}}})},
      {"prefill.epilogue", "prompt", false,
       product({{"epilogue-threads", {64, 128, 256, 512}}})},
      {"prefill.elementwise", "prompt", false,
       product({{"elementwise-threads", {64, 128, 256, 512}}})},
      {"prefill.gemm", "prompt", false, gemmCandidates()},
      // The matmuls of quantized weights (none in an f16 model).
      {"prefill.quant-gemm", "prompt", false,
       product({{"quant-gemm", {0, 1}}})},
  };
  return families;
}

/// The op whose result @prefill returns: the logits.
static bool isLmHead(Operation *op) {
  return llvm::any_of(op->getUsers(),
                      [](Operation *u) { return isa<func::ReturnOp>(u); });
}

std::vector<std::string> familyKernels(ModuleOp module,
                                       const TuneFamily &family) {
  std::vector<std::string> names;
  if (isQuantFamily(family)) {
    // The quantized GEMMs, or the dequantize kernels and cuBLAS's GEMMs.
    names.push_back("cublas");
    for (Operation *op : familyOps(module, family))
      if (auto kernel = op->getAttrOfType<StringAttr>("kiln.kernel"))
        for (std::string name : {kernel.str() + kQuantGemmSuffix,
                                 kernel.str() + kDequantizeSuffix})
          if (llvm::find(names, name) == names.end())
            names.push_back(name);
    return names;
  }
  if (isGemmFamily(family)) {
    // cuBLAS's (PlanDevice::recordLaunch of every cuBLAS GEMM) or kiln's own.
    names.push_back("cublas");
    for (Operation *op : familyOps(module, family)) {
      auto kernel = op->getAttrOfType<StringAttr>("kiln.kernel");
      if (!kernel)
        continue; // unnamed: no kernel of it was emitted
      // And the LM head's of the last row (a prefill that reads no logits).
      for (std::string name :
           {kernel.str() + kSmallGemmSuffix,
            kernel.str() + kSmallGemmSuffix + kLastRowSuffix})
        if (llvm::find(names, name) == names.end())
          names.push_back(name);
    }
    return names;
  }
  auto add = [&](Operation *op, const char *suffix) {
    auto kernel = op ? op->getAttrOfType<StringAttr>("kiln.kernel") : nullptr;
    std::string name = kernel ? kernel.str() + suffix : "";
    if (!name.empty() && llvm::find(names, name) == names.end())
      names.push_back(name);
  };
  for (Operation *op : familyOps(module, family)) {
    add(op, "");
    if (family.name == "decode.attention")
      add(batchAttention(module, op), kBatchSuffix);
    if (family.name == "prefill.epilogue" && isLmHead(op))
      add(op, kLastRowSuffix);
  }
  return names;
}

std::string familySignature(ModuleOp module, const TuneFamily &family) {
  Fnv1a h;
  h.add(family.name);
  std::map<std::string, bool> seen;
  for (Operation *op : familyOps(module, family)) {
    auto kernel = op->getAttrOfType<StringAttr>("kiln.kernel");
    std::string name = kernel ? kernel.str() : "";
    if (seen[name])
      continue;
    seen[name] = true;
    std::string text;
    llvm::raw_string_ostream os(text);
    os << op->getName() << " " << name << " (";
    for (Type t : op->getOperandTypes())
      os << t << " ";
    os << ") -> (";
    for (Type t : op->getResultTypes())
      os << t << " ";
    os << ")";
    for (NamedAttribute a : op->getAttrs())
      if (!a.getName().getValue().starts_with("kiln."))
        os << " " << a.getName().getValue() << "=" << a.getValue();
    h.add(text);
  }
  return h.hex();
}

llvm::Expected<TuneResult>
tune(ModuleOp module, const TuneOptions &opts, KernelCache &cache,
     const std::function<void(int64_t, int64_t)> &progress) {
  auto gpu = gpuModelFor(opts.target);
  if (!gpu)
    return llvm::createStringError("--target " + opts.target +
                                   ": the cost model knows sm_80 and sm_90");
  TuningDb db;
  if (!opts.dbPath.empty()) {
    auto read = readTuningDb(opts.dbPath);
    if (!read.ok())
      return llvm::createStringError(std::string(read.status().message()));
    db = std::move(*read);
  }
  std::vector<const TuneFamily *> families;
  for (const TuneFamily &f : tuneFamilies())
    if (opts.families.empty() ||
        std::find(opts.families.begin(), opts.families.end(), f.name) !=
            opts.families.end())
      families.push_back(&f);

  TuneResult result;
  int64_t total = 0, done = 0;
  for (const TuneFamily *f : families)
    total += int64_t(opts.seqLens.size() * f->batchesOf(opts.batches).size());
  std::string nvrtc = nvrtcVersionString();

  for (const TuneFamily *f : families) {
    std::vector<Operation *> ops = familyOps(module, *f);
    // The matmul families split by weight: a model may have none of one.
    const char *none = isQuantFamily(*f) || isQuantGemvFamily(*f)
                           ? "the model has no quantized weights"
                       : f->name == "decode.gemv"
                           ? "every matmul's weight is quantized"
                           : nullptr;
    if (ops.empty() && none) {
      result.lines.push_back(absl::StrFormat("%-19s none: %s", f->name, none));
      done += int64_t(opts.seqLens.size());
      continue;
    }
    if (ops.empty())
      return llvm::createStringError("the module has no " + f->name +
                                     " kernels: compile it with the kiln "
                                     "pipeline");
    std::vector<int64_t> batches = f->batchesOf(opts.batches);
    if (batches.empty())
      result.lines.push_back(absl::StrFormat(
          "%-19s none: its kernels run at batches of %d and more (--batch)",
          f->name, f->minBatch));
    for (int64_t batch : batches) {
      bool batched = f->name == "decode.attention" && batch > 1;
      std::vector<Operation *> launched = ops;
      if (batched)
        for (Operation *&op : launched)
          op = batchAttention(module, op);
      // Every candidate's kernels (one per distinct kiln.kernel), compiled
      // once for ptxas' figures; a candidate that does not build is out.
      struct Candidate {
        std::string knobs;
        CodegenOptions opts;
        std::map<Operation *, CudaKernel> kernels;
        bool ok = true;
      };
      std::vector<Candidate> candidates;
      auto only = opts.candidates.find(f->name);
      for (const std::string &knobs :
           only == opts.candidates.end() ? f->candidates : only->second) {
        Candidate c{knobs, {}, {}, true};
        c.opts.smCount = gpu->sms;
        if (llvm::Error e = parseCodegenOptions(knobs, c.opts)) {
          llvm::consumeError(std::move(e));
          continue;
        }
        for (Operation *op : launched) {
          if (runsCublas(*f, c.opts)) // no kernel of ours
            break;
          auto k = emitFor(*f, op, c.opts, batched);
          if (!k) {
            llvm::consumeError(k.takeError());
            c.ok = false;
            break;
          }
          c.kernels.emplace(op, std::move(*k));
        }
        if (c.ok)
          candidates.push_back(std::move(c));
      }
      std::map<std::string, KernelCode> codes; // by source: compile once
      for (const Candidate &c : candidates)
        for (const auto &[op, k] : c.kernels)
          codes.emplace(k.source, kernelCode(k));
      std::vector<const KernelCode *> jobs;
      for (const auto &[source, code] : codes)
        jobs.push_back(&code);
      std::map<std::string, Figures> figures; // by source
      std::mutex lock;
      llvm::parallelFor(0, jobs.size(), [&](size_t i) {
        int hits = 0;
        auto compiled =
            compileKernelsCached({*jobs[i]}, {opts.target}, cache, hits);
        std::lock_guard<std::mutex> guard(lock);
        if (!compiled) { // too much shared memory, say: not a candidate
          llvm::consumeError(compiled.takeError());
          return;
        }
        figures[jobs[i]->source] = {(*compiled)[0].registers,
                                    (*compiled)[0].staticSharedBytes +
                                        jobs[i]->dynamicSharedBytes};
      });

      TuningKey key{gpu->name, opts.target, "none",
                    nvrtc,     f->name,     familySignature(module, *f),
                    batch};
      TuningEntry &entry = db.entry(key, "cost-model");
      for (int64_t length : opts.seqLens) {
        if (entry.times.count(length)) {
          result.resumed += int64_t(entry.times[length].size());
        } else {
          std::map<std::string, double> times;
          for (const Candidate &c : candidates) {
            double micros = 0;
            bool fits = true;
            for (Operation *op : launched) {
              int64_t rows = f->length == "prompt" ? length : batch;
              // A prompt read back by no one runs its LM head for the last
              // row only; o_proj's and down_proj's GEMMs add the residual
              // (no epilogue kernel).
              if (f->length == "prompt" && isLmHead(op))
                rows = 1;
              if (f->name == "prefill.epilogue" && gemmWritesResult(op))
                continue;
              if (runsCublas(*f, c.opts)) {
                Value w = op->getOperand(1);
                micros += gemmMicros(*gpu, rows, dim(w, 0), dim(w, 1));
                continue;
              }
              const CudaKernel &k = c.kernels.at(op);
              auto fig = figures.find(k.source);
              if (fig == figures.end()) {
                fits = false;
                break;
              }
              LaunchCost l = traffic(*f, op, k, c.opts, rows, length);
              l.registers = fig->second.registers;
              l.sharedBytes = fig->second.shared;
              if (isQuantFamily(*f) && l.tensorCores)
                l.flopsPerSmCycle =
                    gpu->tensorFlopsPerSmCycle() * kQuantGemmTensorShare;
              if (isQuantFamily(*f) && c.opts.quantGemm == 1) {
                Value w = op->getOperand(1);
                micros += gemmMicros(*gpu, rows, dim(w, 0), dim(w, 1));
              }
              auto t = launchMicros(*gpu, l);
              if (!t) {
                fits = false;
                break;
              }
              micros += *t;
            }
            if (fits)
              times[c.knobs] = micros;
          }
          entry.times[length] = std::move(times);
          result.computed += int64_t(entry.times[length].size());
        }
        entry.buckets = mergeBuckets(entry.times);
        if (!opts.dbPath.empty())
          if (absl::Status s = writeTuningDb(opts.dbPath, db); !s.ok())
            return llvm::createStringError(std::string(s.message()));
        if (progress)
          progress(++done, total);
      }
      std::string line = absl::StrFormat("%-19s batch %-3d %d candidates, %d "
                                         "buckets:",
                                         f->name, batch, candidates.size(),
                                         entry.buckets.size());
      for (const TuningBucket &b : entry.buckets)
        absl::StrAppendFormat(&line, " [%d, %d] %s (%.1f us)", b.from, b.to,
                              b.knobs, b.micros);
      result.lines.push_back(line);
      if (!opts.plotDir.empty()) {
        std::string path =
            absl::StrCat(opts.plotDir, "/", f->name, "-batch", batch, ".svg");
        if (absl::Status s = writeFileAtomically(path, plotEntry(entry));
            !s.ok())
          return llvm::createStringError(std::string(s.message()));
        result.plots.push_back(path);
      }
    }
  }
  return result;
}

llvm::Error applyTuning(ModuleOp module, const TuningDb &db,
                        const std::string &target, CodegenOptions &opts,
                        std::vector<std::string> &notes) {
  std::string nvrtc = nvrtcVersionString();
  std::vector<const TuningEntry *> used;
  for (const TuningEntry &e : db.entries) {
    const TuneFamily *family = nullptr;
    for (const TuneFamily &f : tuneFamilies())
      if (f.name == e.key.family)
        family = &f;
    std::string why;
    if (!family)
      why = "a family this kiln does not have";
    else if (e.key.arch != target)
      why = "tuned for " + e.key.arch;
    else if (e.key.nvrtc != nvrtc)
      why = "tuned with NVRTC " + e.key.nvrtc + ", this is " + nvrtc;
    else if (e.key.signature != familySignature(module, *family))
      why = "other kernels: another model or other compile options";
    else if (e.buckets.empty())
      why = "no buckets";
    else if (e.source == "cost-model")
      for (const TuningEntry &m : db.entries)
        if (m.source != "cost-model" && m.key.arch == e.key.arch &&
            m.key.nvrtc == e.key.nvrtc && m.key.family == e.key.family &&
            m.key.signature == e.key.signature && m.key.batch == e.key.batch &&
            !m.buckets.empty())
          why = "measured on " + m.key.gpu + " (" + m.source + ")";
    if (!why.empty()) {
      notes.push_back("ignored " + e.key.str() + ": " + why);
      continue;
    }
    notes.push_back("used    " + e.key.str() + " (" + e.source + ")");
    used.push_back(&e);
  }
  auto apply = [&](const std::string &knobs) -> llvm::Error {
    if (llvm::Error e = parseCodegenOptions(knobs, opts))
      return llvm::createStringError("tuned knobs '" + knobs +
                                     "': " + toString(std::move(e)));
    return llvm::Error::success();
  };
  // Decode: one plan for every context; its longest lengths weigh most.
  for (const TuningEntry *e : used)
    if (e->key.batch == 1 && (e->key.family == "decode.gemv" ||
                              e->key.family == "decode.quant-gemv" ||
                              e->key.family == "decode.attention"))
      if (llvm::Error err = apply(e->buckets.back().knobs))
        return err;
  // Batched decode: for each bucket, every batched family's winner at the
  // nearest batch tuned at or below it (else the smallest above).
  auto pool = module->getAttrOfType<KVPoolAttr>("kiln.kv_pool");
  std::map<std::string, std::map<int64_t, const TuningEntry *>>
      byBatch; // family -> batch > 1, ascending
  for (const TuningEntry *e : used)
    if ((e->key.family == "decode.attention" ||
         e->key.family == "decode.gemm") &&
        e->key.batch > 1)
      byBatch[e->key.family][e->key.batch] = e;
  for (int64_t rows : batchBuckets(pool ? pool.getSequences() : 1)) {
    std::string knobs;
    for (const auto &[family, entries] : byBatch) {
      auto above = entries.upper_bound(rows); // the first batch above rows
      const TuningEntry *e =
          above == entries.begin() ? above->second : std::prev(above)->second;
      knobs += (knobs.empty() ? "" : ",") + e->buckets.back().knobs;
    }
    if (!knobs.empty())
      opts.batchKnobs[rows] = knobs;
  }
  // Prefill: the buckets the families' winners make, each with its knobs.
  auto prefill = module.lookupSymbol<func::FuncOp>("prefill");
  auto maxTokens =
      prefill ? prefill->getAttrOfType<IntegerAttr>("kiln.arena_tokens")
              : IntegerAttr();
  std::vector<const TuningEntry *> prefillEntries;
  for (const TuningEntry *e : used)
    if (e->key.family.rfind("prefill.", 0) == 0)
      prefillEntries.push_back(e);
  if (prefillEntries.empty() || !maxTokens)
    return llvm::Error::success();
  std::vector<int64_t> ends;
  for (const TuningEntry *e : prefillEntries)
    for (const TuningBucket &b : e->buckets)
      if (b.to < maxTokens.getInt())
        ends.push_back(b.to);
  llvm::sort(ends);
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  opts.prefillBuckets = ends;
  for (int64_t rows : prefillBuckets(opts, maxTokens.getInt())) {
    std::string knobs;
    for (const TuningEntry *e : prefillEntries) {
      const TuningBucket *b = &e->buckets.back(); // past the last: the last
      for (const TuningBucket &candidate : e->buckets)
        if (rows >= candidate.from && rows <= candidate.to)
          b = &candidate;
      knobs += (knobs.empty() ? "" : ",") + b->knobs;
    }
    opts.prefillKnobs[rows] = knobs;
  }
  return llvm::Error::success();
}

} // namespace kiln

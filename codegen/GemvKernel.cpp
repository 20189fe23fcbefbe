//===- GemvKernel.cpp - decode matmuls: fused_linear, linear, logits ------===//
//
// Each warp streams a pair of W's rows once (kiln_gemv_pair in the prelude:
// x staged once per block in shared memory, 2 x UNROLL loads of W in flight
// per lane, fp32 accumulation); with split-K, SPLIT_K warps share a pair,
// each streaming a span of it. A pair is two consecutive output columns,
// or with SwiGLU the gate row j and the up row F + j in one loop. The
// RMSNorm prologue's 1 / rms(x) scales the dots (the norm weight is folded
// into W); the residual is added before the store. Results split the
// output columns in order. The wait for the previous kernel (PDL) is in
// kiln_gemv_pair, between the first step's loads of W and the staging of x.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

llvm::Expected<LinearShape> linearShape(Operation *op) {
  Value input = op->getOperand(0), weight = op->getOperand(1);
  auto w = cast<RankedTensorType>(weight.getType());
  if (llvm::Error e = requireF16(w.getElementType()))
    return std::move(e);
  if (llvm::Error e =
          requireF16(cast<RankedTensorType>(input.getType()).getElementType()))
    return std::move(e);
  LinearShape s;
  s.n = w.getDimSize(0);
  s.k = w.getDimSize(1);
  if (auto f = dyn_cast<FusedLinearOp>(op)) {
    if (auto e = f.getNormEpsilon())
      s.eps = e->convertToDouble();
    s.swiglu = f.getSwiglu();
    s.residual = f.getResidual();
  }
  s.tasks = s.swiglu ? s.n / 2 : s.n;
  return s;
}

llvm::Expected<CudaKernel> emitGemv(Operation *op, const CodegenOptions &opts) {
  if (hasQuantizedWeight(op)) // dequantized in registers, on tensor cores
    return emitQuantGemm(op, opts, Phase::decode, /*fused=*/true);
  auto shape = linearShape(op);
  if (!shape)
    return shape.takeError();
  auto [n, kdim, tasks, eps, swiglu, residual] = *shape;
  int vec = vectorWidth(kdim, opts.maxVectorWidth);
  int rows = opts.gemvWarps, splitK = opts.gemvSplitK;
  // A warp's pair: gate and up with SwiGLU, else two output columns.
  int64_t pairs = swiglu ? tasks : (tasks + 1) / 2;

  CudaKernel k = kernelFor(op, opts.kernelSuffix);
  k.params = {{ParamKind::Activation, "x", "const __half *"},
              {ParamKind::Weight, "w", "const __half *"}};
  if (residual)
    k.params.push_back({ParamKind::Activation, "residual", "const __half *"});
  k.grid = {(pairs + rows - 1) / rows, 1, 1};
  k.blockThreads = 32 * rows * splitK;

  ResultStores outs = resultStores(op, k);

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << "\n// kernel " << k.kernel << ": x[1, " << kdim << "] . W[" << n << ", "
     << kdim << "]^T" << (eps ? ", RMSNorm prologue" : "")
     << (swiglu ? ", SwiGLU epilogue" : "")
     << (residual ? ", residual epilogue" : "") << "\n";
  os << "constexpr int K = " << kdim << ", TASKS = " << tasks
     << ", PAIRS = " << pairs << ", VEC = " << vec << ";\n";
  os << "constexpr int ROWS = " << rows << ", SPLIT_K = " << splitK
     << ", UNROLL = " << opts.gemvUnroll << ";\n";
  os << "constexpr bool NORM = " << (eps ? "true" : "false")
     << ", SWIGLU = " << (swiglu ? "true" : "false")
     << ", RESIDUAL = " << (residual ? "true" : "false") << ";\n";
  os << "constexpr float EPS = " << floatLiteral(eps.value_or(0)) << ";\n";
  os << "\n" << outs.store;
  os << "\n// x [1, K] f16, w [" << n << ", K] f16"
     << (residual ? ", residual [1, TASKS] f16" : "")
     << "; the results [1, TASKS].\n"
     << "// grid (ceil(PAIRS / ROWS)), block (32 * ROWS * SPLIT_K): "
        "SPLIT_K warps per pair of W's rows, each over a span of K\n";
  os << "constexpr int THREADS = 32 * ROWS * SPLIT_K;\n";
  os << "extern \"C\" __global__ void __launch_bounds__(THREADS, "
        "kiln_gemv_min_blocks<THREADS, UNROLL>) "
     << k.entry << "(" << kernelParameters(k) << ") {\n";
  os << R"cuda(  kiln_launch_dependents();
  const int lane = threadIdx.x & 31;
  const int pair = blockIdx.x * ROWS + (threadIdx.x >> 5) / SPLIT_K;
  const bool active = pair < PAIRS;
  // SwiGLU: gate row `pair` and up row TASKS + pair; else columns 2 pair and
  // 2 pair + 1 (the last one alone when TASKS is odd: its row twice).
  const int col_a = SWIGLU ? pair : 2 * pair;
  const int col_b = SWIGLU ? TASKS + pair : min(2 * pair + 1, TASKS - 1);
  const float2 dot = kiln_gemv_pair<K, VEC, UNROLL, SPLIT_K, THREADS, NORM>(
      x, w + (long long)(active ? col_a : 0) * K,
      w + (long long)(active ? col_b : 0) * K, active, EPS);
  if (!active || (threadIdx.x >> 5) % SPLIT_K != 0)
    return;
  if constexpr (SWIGLU) {
    if (lane == 0)
      kiln_store(0, pair, kiln_silu(dot.x) * dot.y)cuda";
  os << outs.names << ");\n    return;\n  }\n";
  os << R"cuda(  // Lane 0 stores column a, lane 1 column b.
  const int col = lane == 0 ? col_a : 2 * pair + 1;
  if (lane > 1 || col >= TASKS)
    return;
  float y = lane == 0 ? dot.x : dot.y;
)cuda";
  if (residual)
    os << "  y += __half2float(residual[col]);\n";
  os << "  kiln_store(0, col, y" << outs.names << ");\n}\n";
  k.source = src;
  return k;
}

} // namespace kiln

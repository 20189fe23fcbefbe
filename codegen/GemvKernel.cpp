//===- GemvKernel.cpp - decode matmuls: fused_linear, linear, logits ------===//
//
// One warp per output row streams the row of W once (VEC halves per lane per
// step, fp32 accumulation); with split-K, SPLIT_K warps share a row, each
// streaming a span of it, and add their partial sums in shared memory. The
// RMSNorm prologue is one block-wide sum of squares of x; SwiGLU has each warp
// compute the gate row j and the up row F + j; the residual is added before the
// store. Results split the output columns in order.
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
  auto shape = linearShape(op);
  if (!shape)
    return shape.takeError();
  auto [n, kdim, tasks, eps, swiglu, residual] = *shape;
  int vec = vectorWidth(kdim, opts.maxVectorWidth);
  int rows = opts.gemvWarps, splitK = opts.gemvSplitK;

  CudaKernel k = kernelFor(op, opts.kernelSuffix);
  k.params = {{ParamKind::Activation, "x", "const __half *"},
              {ParamKind::Weight, "w", "const __half *"}};
  if (residual)
    k.params.push_back({ParamKind::Activation, "residual", "const __half *"});
  k.grid = {(tasks + rows - 1) / rows, 1, 1};
  k.blockThreads = 32 * rows * splitK;

  ResultStores outs = resultStores(op, k);

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << "\n// kernel " << k.kernel << ": x[1, " << kdim << "] . W[" << n << ", "
     << kdim << "]^T" << (eps ? ", RMSNorm prologue" : "")
     << (swiglu ? ", SwiGLU epilogue" : "")
     << (residual ? ", residual epilogue" : "") << "\n";
  os << "constexpr int K = " << kdim << ", TASKS = " << tasks
     << ", VEC = " << vec << ", ROWS = " << rows << ", SPLIT_K = " << splitK
     << ";\n";
  os << "// Halves of K per split, whole vectors each.\n"
     << "constexpr int SPAN = (K / VEC + SPLIT_K - 1) / SPLIT_K * VEC;\n";
  os << "constexpr bool NORM = " << (eps ? "true" : "false")
     << ", SWIGLU = " << (swiglu ? "true" : "false")
     << ", RESIDUAL = " << (residual ? "true" : "false") << ";\n";
  os << "constexpr float EPS = " << floatLiteral(eps.value_or(0)) << ";\n";
  os << "\n" << outs.store;
  os << "\n// grid (ceil(TASKS / ROWS)), block (32 * ROWS * SPLIT_K): "
        "SPLIT_K warps per output column, each over SPAN of K\n";
  // Without a minimum of blocks ptxas aims at full occupancy (32 registers
  // at 128 threads) and spills SwiGLU's two rows; half occupancy (64
  // registers) still streams W at full bandwidth.
  os << "constexpr int THREADS = 32 * ROWS * SPLIT_K;\n";
  os << "extern \"C\" __global__ void __launch_bounds__(THREADS, "
        "THREADS <= 512 ? 1024 / THREADS : 1) "
     << k.entry << "(" << kernelParameters(k) << ") {\n";
  os << R"cuda(  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float scale = kiln_prologue_scale<K, VEC, NORM>(x, EPS);
  const int row = warp / SPLIT_K, part = warp % SPLIT_K;
  const int task = blockIdx.x * ROWS + row;
  const int begin = part * SPAN, end = min(K, begin + SPAN);
  float gate = 0.0f, up = 0.0f;
  if (task < TASKS) {
    gate = kiln_warp_dot_range<VEC>(w + (long long)task * K, x, lane, begin, end);
    if constexpr (SWIGLU)
      up = kiln_warp_dot_range<VEC>(w + (long long)(task + TASKS) * K, x, lane,
                                    begin, end);
  }
  if constexpr (SPLIT_K > 1) { // the splits meet in shared memory, in order
    __shared__ float partial[ROWS][SPLIT_K][2];
    if (lane == 0) {
      partial[row][part][0] = gate;
      partial[row][part][1] = up;
    }
    __syncthreads();
    if (part != 0)
      return;
    gate = up = 0.0f;
    for (int s = 0; s < SPLIT_K; ++s) {
      gate += partial[row][s][0];
      up += partial[row][s][1];
    }
  }
  if (task >= TASKS || lane != 0)
    return;
  float y = scale * gate;
  if constexpr (SWIGLU)
    y = kiln_silu(y) * (scale * up);
)cuda";
  if (residual)
    os << "  y += __half2float(residual[task]);\n";
  os << "  kiln_store(0, task, y" << outs.names << ");\n}\n";
  k.source = src;
  return k;
}

} // namespace kiln

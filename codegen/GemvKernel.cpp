//===- GemvKernel.cpp - decode matmuls: fused_linear, linear, logits ------===//
//
// One warp per output row streams the row of W once (VEC halves per lane per
// step, fp32 accumulation). The RMSNorm prologue is one block-wide sum of
// squares of x; SwiGLU has each warp compute the gate row j and the up row
// F + j; the residual is added before the store. Results split the output
// columns in order.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

llvm::Expected<CudaKernel> emitGemv(Operation *op, const CodegenOptions &opts) {
  Value input = op->getOperand(0), weight = op->getOperand(1);
  auto w = cast<RankedTensorType>(weight.getType());
  int64_t n = w.getDimSize(0), kdim = w.getDimSize(1);
  std::optional<double> eps;
  bool swiglu = false;
  Value residual;
  if (auto f = dyn_cast<FusedLinearOp>(op)) {
    if (auto e = f.getNormEpsilon())
      eps = e->convertToDouble();
    swiglu = f.getSwiglu();
    residual = f.getResidual();
  }
  if (llvm::Error e = requireF16(w.getElementType()))
    return std::move(e);
  if (llvm::Error e =
          requireF16(cast<RankedTensorType>(input.getType()).getElementType()))
    return std::move(e);
  int64_t tasks = swiglu ? n / 2 : n;
  int vec = vectorWidth(kdim);
  int warps = opts.gemvWarps;

  CudaKernel k = kernelFor(op);
  k.params = {{ParamKind::Activation, "x"}, {ParamKind::Weight, "w"}};
  if (residual)
    k.params.push_back({ParamKind::Activation, "residual"});
  k.grid = {(tasks + warps - 1) / warps, 1, 1};
  k.blockThreads = 32 * warps;

  std::string signature =
      std::string("const __half *__restrict__ x, const __half *__restrict__ "
                  "w") +
      (residual ? ", const __half *__restrict__ residual" : "");
  ResultStores outs = resultStores(op, k);

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << "\n// kernel " << k.kernel << ": x[1, " << kdim << "] . W[" << n << ", "
     << kdim << "]^T" << (eps ? ", RMSNorm prologue" : "")
     << (swiglu ? ", SwiGLU epilogue" : "")
     << (residual ? ", residual epilogue" : "") << "\n";
  os << "constexpr int K = " << kdim << ", TASKS = " << tasks
     << ", VEC = " << vec << ", WARPS = " << warps << ";\n";
  os << "constexpr bool NORM = " << (eps ? "true" : "false")
     << ", SWIGLU = " << (swiglu ? "true" : "false")
     << ", RESIDUAL = " << (residual ? "true" : "false") << ";\n";
  os << "constexpr float EPS = " << floatLiteral(eps.value_or(0)) << ";\n";
  os << "\n" << outs.store;
  os << "\n// grid (ceil(TASKS / WARPS)), block (32 * WARPS): warp -> output "
        "column\n";
  os << "extern \"C\" __global__ void __launch_bounds__(32 * WARPS) " << k.entry
     << "(" << signature << outs.params << ") {\n";
  os << R"cuda(  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float scale = kiln_prologue_scale<K, VEC, NORM>(x, EPS);
  const int task = blockIdx.x * WARPS + warp;
  if (task >= TASKS)
    return;
  float y = scale * kiln_warp_dot<K, VEC>(w + (long long)task * K, x, lane);
  if constexpr (SWIGLU) {
    const float up = scale * kiln_warp_dot<K, VEC>(
                                 w + (long long)(task + TASKS) * K, x, lane);
    y = kiln_silu(y) * up;
  }
  if (lane != 0)
    return;
)cuda";
  if (residual)
    os << "  y += __half2float(residual[task]);\n";
  os << "  kiln_store(0, task, y" << outs.names << ");\n}\n";
  k.source = src;
  return k;
}

} // namespace kiln

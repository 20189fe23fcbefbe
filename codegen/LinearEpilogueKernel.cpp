//===- LinearEpilogueKernel.cpp - prefill matmuls after cuBLAS ------------===//
//
// Prefill's fused_linear (and linear, logits) is a cuBLAS GEMM of x and W
// into the f32 workspace, then this kernel: one block per token row applies
// what decode's GEMV fuses. The RMSNorm prologue becomes a scale of the
// row's outputs (x . (g*W)^T / rms(x) equals (x / rms(x)) . (g*W)^T, and
// the norm weight g is folded into W), SwiGLU pairs gate column j with up
// column F + j, the residual is added, and the results are stored. Rows at
// and past the real token count (a bucket's padding) are skipped. A matmul
// with none of these but the residual has no epilogue kernel
// (gemmWritesResult): its GEMM adds the residual and rounds once, as this
// kernel would. A thread takes 4 columns at a time (16-byte loads of the
// GEMM's f32 row, two steps in flight) when the row allows. The LM head's
// `.last` variant is one block, for the step's
// last real row: what sampling reads when the logits are not read back.
// Everything it reads is an earlier kernel's: it waits for the previous
// kernel (PDL) first.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

bool gemmWritesResult(Operation *op, bool dequantized) {
  auto kernel = dyn_cast<KernelOpInterface>(op);
  if (!kernel ||
      kernel.getKernelTemplate(Phase::prefill) !=
          KernelTemplate::linear_epilogue ||
      (hasQuantizedWeight(op) && !dequantized))
    return false;
  auto shape = linearShape(op);
  if (!shape) {
    llvm::consumeError(shape.takeError());
    return false;
  }
  if (shape->eps || shape->swiglu || op->getNumResults() != 1)
    return false;
  // cuBLASLt's C has D's type: the residual must be of the result's.
  Type out =
      cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
  return (out.isF16() || out.isF32()) &&
         (!shape->residual ||
          cast<RankedTensorType>(shape->residual.getType()).getElementType() ==
              out);
}

llvm::Expected<CudaKernel>
emitLinearEpilogue(Operation *op, const CodegenOptions &opts, bool lastRow,
                   Phase phase) {
  auto shape = linearShape(op);
  if (!shape)
    return shape.takeError();
  auto [n, kdim, tasks, eps, swiglu, residual] = *shape;
  int threads = opts.epilogueThreads;

  CudaKernel k = kernelFor(op, (lastRow ? std::string(kLastRowSuffix) : "") +
                                   opts.kernelSuffix);
  k.afterGemm = true;
  k.params = {{ParamKind::Activation, "x", "const __half *"},
              {ParamKind::Workspace, "c", "const float *"}};
  if (residual)
    k.params.push_back({ParamKind::Activation, "residual", "const __half *"});
  k.params.push_back({ParamKind::Count, "count", "const int *"});
  k.rowAxis = lastRow ? -1 : 0; // one block, whatever the bucket
  k.blockThreads = threads;
  ResultStores outs = resultStores(op, k);

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << "\n// kernel " << k.kernel << ": the epilogue of C[S, " << n
     << "] = x[S, " << kdim << "] . W[" << n << ", " << kdim << "]^T (cuBLAS)"
     << (eps ? ", RMSNorm scale" : "") << (swiglu ? ", SwiGLU" : "")
     << (residual ? ", residual" : "")
     << (lastRow ? ", the last real row only" : "") << "\n";
  // Columns a thread takes at a time: 4 (16-byte loads of c, 8 of the
  // residual) when every row and the up half start 16-byte aligned.
  int cols = n % 4 == 0 && tasks % 4 == 0 ? 4 : 1;
  // One row (decode): its columns over blocks, a pass of a thread each.
  int64_t colBlocks =
      phase == Phase::decode ? (tasks + cols * threads - 1) / (cols * threads)
                             : 1;
  k.grid = {1, colBlocks, 1};
  os << "constexpr int K = " << kdim << ", N = " << n << ", TASKS = " << tasks
     << ", VEC = " << vectorWidth(kdim, opts.maxVectorWidth)
     << ", THREADS = " << threads << ", COLS = " << cols
     << ", COL_BLOCKS = " << colBlocks << ";\n";
  os << "constexpr bool NORM = " << (eps ? "true" : "false")
     << ", SWIGLU = " << (swiglu ? "true" : "false")
     << ", RESIDUAL = " << (residual ? "true" : "false")
     << ", LAST_ROW = " << (lastRow ? "true" : "false") << ";\n";
  os << "constexpr float EPS = " << floatLiteral(eps.value_or(0)) << ";\n\n";
  os << outs.store;
  os << R"cuda(
// x [S, K] f16 (the GEMM's input), c [S, N] f32 (its output),
// residual [S, TASKS] f16, count [1] i32; grid (S, COL_BLOCKS), block
// (THREADS), or with LAST_ROW grid (1): row count - 1
extern "C" __global__ void __launch_bounds__(THREADS) )cuda"
     << k.entry << "(" << kernelParameters(k) << ") {\n";
  os << R"cuda(  kiln_launch_dependents();
  const long long row = LAST_ROW ? count[0] - 1 : blockIdx.x;
  kiln_wait_previous_grid(); // x, c and the residual are earlier kernels'
  if (row < 0 || row >= count[0])
    return; // padding: the whole block leaves together
  const float scale = kiln_prologue_scale<K, VEC, NORM>(x + row * K, EPS);
  const float *c_row = c + row * N;
  // COLS columns a thread at a time, two steps' loads in flight.
#pragma unroll 2
  for (int col = COLS * (blockIdx.y * THREADS + threadIdx.x); col < TASKS;
       col += COLS * THREADS * COL_BLOCKS) {
    float y[COLS], up[COLS];
    kiln_load_f32<COLS>(c_row + col, y);
    if constexpr (SWIGLU)
      kiln_load_f32<COLS>(c_row + col + TASKS, up);
)cuda";
  if (residual)
    os << "    float r[COLS];\n"
          "    kiln_load<COLS>(residual + row * TASKS + col, r);\n";
  os << "#pragma unroll\n    for (int e = 0; e < COLS; ++e) {\n"
        "      y[e] *= scale;\n"
        "      if constexpr (SWIGLU)\n"
        "        y[e] = kiln_silu(y[e]) * (scale * up[e]);\n";
  if (residual)
    os << "      y[e] += r[e];\n";
  os << "      kiln_store(row, col + e, y[e]" << outs.names
     << ");\n    }\n  }\n}\n";
  k.source = src;
  return k;
}

} // namespace kiln

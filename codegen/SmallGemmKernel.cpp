//===- SmallGemmKernel.cpp - kiln's own GEMM for short prompts ------------===//
//
// The GEMM before a prefill epilogue, C[S, N] f32 = x[S, K] . W[N, K]^T,
// generated instead of cuBLAS's (gemm-algo=-2). A warp owns one output
// column and TILE token rows: it streams its row of W once per tile (VEC
// halves per lane per step, as decode's GEMV does) and takes each token's
// x from L1/L2, accumulating in fp32. For a few tokens the GEMM is W's
// bytes, which this reads at the GEMV's rate without tensor cores; rows at
// and past the step's real token count are not computed (cuBLAS computes
// the whole bucket). Past a few tiles W is re-read per tile and the FLOPs
// run on CUDA cores, so cuBLAS wins: which side of that line a length is
// on is what `kiln tune`'s prefill.gemm family measures. For a matmul whose
// epilogue is only the residual (gemmWritesResult) it writes the result
// itself, sum + residual rounded once, as cuBLASLt does with beta 1; the
// LM head's `.last` variant computes the step's last real row only. It
// waits for the previous kernel (PDL) before its loop.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

llvm::Expected<CudaKernel>
emitSmallGemm(Operation *op, const CodegenOptions &opts, bool lastRow) {
  auto w = cast<RankedTensorType>(op->getOperand(1).getType());
  auto x = cast<RankedTensorType>(op->getOperand(0).getType());
  if (llvm::Error e = requireDenseWeight(w))
    return std::move(e);
  if (llvm::Error e = requireF16(w.getElementType()))
    return std::move(e);
  if (llvm::Error e = requireF16(x.getElementType()))
    return std::move(e);
  int64_t n = w.getDimSize(0), kdim = w.getDimSize(1);
  int vec = vectorWidth(kdim, opts.maxVectorWidth);
  int tile = lastRow ? 1 : opts.gemmTile;
  bool direct = gemmWritesResult(op);
  Value residual = direct ? linearShape(op)->residual : Value();

  CudaKernel k = kernelFor(op, kSmallGemmSuffix +
                                   std::string(lastRow ? kLastRowSuffix : "") +
                                   opts.kernelSuffix);
  k.params = {{ParamKind::Activation, "x", "const __half *"},
              {ParamKind::Weight, "w", "const __half *"}};
  if (!direct)
    k.params.push_back({ParamKind::Workspace, "c", "float *"});
  if (residual)
    k.params.push_back({ParamKind::Activation, "residual", "const __half *"});
  k.params.push_back({ParamKind::Count, "count", "const int *"});
  k.grid = {(n + kSmallGemmWarps - 1) / kSmallGemmWarps, 1, 1};
  k.rowAxis = lastRow ? -1 : 1;
  k.rowsPerBlock = tile;
  k.blockThreads = 32 * kSmallGemmWarps;
  ResultStores outs;
  if (direct)
    outs = resultStores(op, k);

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << "\n// kernel " << k.kernel << ": " << (direct ? "y" : "C") << "[S, "
     << n << "] = x[S, " << kdim << "] . W[" << n << ", " << kdim << "]^T"
     << (residual ? " + residual" : "") << ", kiln's GEMM for short prompts"
     << (lastRow ? ", the last real row only" : "") << "\n";
  os << "constexpr int K = " << kdim << ", N = " << n << ", VEC = " << vec
     << ", TILE = " << tile << ", WARPS = " << kSmallGemmWarps << ";\n";
  os << "constexpr bool LAST_ROW = " << (lastRow ? "true" : "false") << ";\n";
  os << outs.store;
  os << "\n// x [S, K] f16, w [N, K] f16, " << (direct ? "" : "c [S, N] f32, ")
     << (residual ? "residual [S, N] f16, " : "") << "count [1] i32"
     << (direct ? ", the result [S, N]" : "") << ";";
  os << R"cuda(
// grid (ceil(N / WARPS), ceil(S / TILE)), block (32 * WARPS): a warp per
// output column, TILE token rows per block; with LAST_ROW grid
// (ceil(N / WARPS)): row count - 1
extern "C" __global__ void __launch_bounds__(32 * WARPS) )cuda"
     << k.entry << "(" << kernelParameters(k) << R"cuda() {
  kiln_launch_dependents();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col = blockIdx.x * WARPS + warp;
  const long long row0 =
      LAST_ROW ? count[0] - 1 : (long long)blockIdx.y * TILE;
  const int rows = (int)min((long long)TILE, count[0] - row0);
  // x (and the residual) are earlier kernels'. W's loads are not issued
  // ahead of the wait: the loop issues them with x's, and a chunk loaded
  // before it changed ptxas' unrolling (more registers, fewer warps).
  kiln_wait_previous_grid();
  if (col >= N || rows <= 0 || row0 < 0)
    return; // past the last column, or padding: the warp leaves together
  const __half *w_row = w + (long long)col * K;
  const __half *x_tile = x + row0 * K;
  float acc[TILE];
#pragma unroll
  for (int t = 0; t < TILE; ++t)
    acc[t] = 0.0f;
  for (int k = lane * VEC; k < K; k += 32 * VEC) {
    float wv[VEC];
    kiln_load<VEC>(w_row + k, wv);
#pragma unroll
    for (int t = 0; t < TILE; ++t) {
      if (t < rows) { // the same for the whole warp
        float xv[VEC];
        kiln_load<VEC>(x_tile + (long long)t * K + k, xv);
#pragma unroll
        for (int i = 0; i < VEC; ++i)
          acc[t] += wv[i] * xv[i];
      }
    }
  }
#pragma unroll
  for (int t = 0; t < TILE; ++t) {
    const float sum = kiln_warp_sum(acc[t]);
    if (lane == 0 && t < rows)
)cuda";
  if (!direct)
    os << "      c[(row0 + t) * N + col] = sum;\n";
  else if (residual)
    os << "      kiln_store(row0 + t, col, sum + __half2float(residual[(row0 "
          "+ t) * N + col])"
       << outs.names << ");\n";
  else
    os << "      kiln_store(row0 + t, col, sum" << outs.names << ");\n";
  os << R"cuda(  }
}
)cuda";
  k.source = src;
  return k;
}

} // namespace kiln

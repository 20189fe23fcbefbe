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
// on is what `kiln tune`'s prefill.gemm family measures.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

llvm::Expected<CudaKernel> emitSmallGemm(Operation *op,
                                         const CodegenOptions &opts) {
  auto w = cast<RankedTensorType>(op->getOperand(1).getType());
  auto x = cast<RankedTensorType>(op->getOperand(0).getType());
  if (llvm::Error e = requireF16(w.getElementType()))
    return std::move(e);
  if (llvm::Error e = requireF16(x.getElementType()))
    return std::move(e);
  int64_t n = w.getDimSize(0), kdim = w.getDimSize(1);
  int vec = vectorWidth(kdim, opts.maxVectorWidth);
  int tile = opts.gemmTile;

  CudaKernel k = kernelFor(op, kSmallGemmSuffix + opts.kernelSuffix);
  k.params = {{ParamKind::Activation, "x", "const __half *"},
              {ParamKind::Weight, "w", "const __half *"},
              {ParamKind::Workspace, "c", "float *"},
              {ParamKind::Count, "count", "const int *"}};
  k.grid = {(n + kSmallGemmWarps - 1) / kSmallGemmWarps, 1, 1};
  k.rowAxis = 1;
  k.rowsPerBlock = tile;
  k.blockThreads = 32 * kSmallGemmWarps;

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << "\n// kernel " << k.kernel << ": C[S, " << n << "] = x[S, " << kdim
     << "] . W[" << n << ", " << kdim << "]^T, kiln's GEMM for short "
     << "prompts\n";
  os << "constexpr int K = " << kdim << ", N = " << n << ", VEC = " << vec
     << ", TILE = " << tile << ", WARPS = " << kSmallGemmWarps << ";\n";
  os << R"cuda(
// x [S, K] f16, w [N, K] f16, c [S, N] f32, count [1] i32;
// grid (ceil(N / WARPS), ceil(S / TILE)), block (32 * WARPS): a warp per
// output column, TILE token rows per block
extern "C" __global__ void __launch_bounds__(32 * WARPS) )cuda"
     << k.entry << "(" << kernelParameters(k) << R"cuda() {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col = blockIdx.x * WARPS + warp;
  const long long row0 = (long long)blockIdx.y * TILE;
  const int rows = (int)min((long long)TILE, count[0] - row0);
  if (col >= N || rows <= 0)
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
      c[(row0 + t) * N + col] = sum;
  }
}
)cuda";
  k.source = src;
  return k;
}

} // namespace kiln

//===- DequantizeWeightKernel.cpp - a quantized weight to f16 for cuBLAS --===//
//
// out[N, K] f16 = dequant(W) diag(g): a quantized weight buffer (the
// layout of runtime/QuantLayout.h) written out as the dense weight the f16
// path would hold, so that a long prompt's matmul runs on cuBLAS's GEMM
// (quant-gemm=1) instead of kiln's quantized GEMM, whose dequantizing in
// registers costs issue slots for every 8 rows of x. A block owns a tile of
// 16 rows; its warps take UNROLL of the tile's 16-byte loads a lane at a
// time (each load 16 rows of 64 columns for int4, 32 for the 8-bit
// formats), dequantize each k-step's A fragment with the quantized GEMM's
// own functions (quantPrelude), scale it by its row's group scale in fp32
// (exact: a code times an f16 scale), multiply the norm weight g in and
// round once to f16 (as runtime/PlanDevice.cpp folds g into an f16
// weight), stage the 16 rows in shared memory and store them as 16-byte
// row chunks. With act-order the buffer's columns are permuted: each
// element goes back to W's column perm[j]. Padding rows past N are not
// written. Each pass's loads are issued while the pass before it is used.
// It waits for the previous kernel (PDL) after issuing its first loads of W
// and before its first store: the GEMM before it read the buffer it
// overwrites.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"
#include "runtime/QuantLayout.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace kiln {

namespace {
constexpr int kWarps = 4;  // warps a block: a tile's loads split four ways
constexpr int kUnroll = 4; // 16-byte loads a lane in flight
} // namespace

CudaKernel emitDequantizeWeight(const QuantFormat &format, int64_t n,
                                int64_t kdim, bool norm,
                                const std::string &kernel, int smCount) {
  QuantLayout layout = quantLayout(format, n, kdim, norm);
  const bool int4 = format.kind == QuantKind::Int4;
  const int64_t cols = int4 ? 64 : 32; // columns a 16-byte load covers
  const int64_t loads = kdim / cols;
  // A tile's loads split over blocks (grid y) where the tiles alone leave
  // fewer than 8 blocks an SM: o_proj's and down_proj's 256 tiles on 132
  // SMs would keep too few bytes in flight.
  const int64_t perPass = kWarps * kUnroll;
  const int64_t splits = std::clamp<int64_t>(
      (8 * int64_t(smCount) + layout.tiles - 1) / layout.tiles, 1,
      (loads + perPass - 1) / perPass);
  const int64_t span = (loads + splits - 1) / splits;
  CudaKernel k;
  k.kernel = kernel;
  k.entry = entryName(kernel);
  k.params = {{ParamKind::Weight, "w", "const unsigned char *"},
              {ParamKind::Dequantized, "out", "__half *"}};
  k.grid = {layout.tiles, splits, 1};
  k.blockThreads = 32 * kWarps;

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << "\n// kernel " << k.kernel << ": out[" << n << ", " << kdim
     << "] f16 = dequant(W " << format.name() << ")" << (norm ? " diag(g)" : "")
     << "\n";
  os << quantBufferConstants({format, n, kdim, norm});
  os << "constexpr int COLS = " << cols << "; // columns a load\n";
  os << "constexpr int SPAN = " << span << "; // loads a block (grid y)\n";
  os << "constexpr int WARPS = " << kWarps << ", UNROLL = " << kUnroll << ";\n";
  os << quantPrelude();
  os << "\n// w the " << format.name() << " buffer (" << layout.bytes
     << " bytes), out [N, K] f16 (row-major, W's column order).\n"
     << "// grid (TILES = " << layout.tiles
     << ", ceil(LOADS / SPAN) = " << splits
     << "), block (32 * WARPS): SPAN loads of a tile of 16 rows, the warps "
        "UNROLL loads at a time\n";
  os << "extern \"C\" __global__ void __launch_bounds__(32 * WARPS) " << k.entry
     << "(" << kernelParameters(k) << ") {\n";
  os << R"cuda(  kiln_launch_dependents();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int tile = blockIdx.x;
  // A warp's 16 rows x COLS columns, rows 8 halves apart past COLS (16
  // bytes: the row chunks stay aligned).
  constexpr int STRIDE = COLS + 8;
  __shared__ uint4 stage_raw[WARPS][16 * STRIDE / 8];
  __half *stage = reinterpret_cast<__half *>(stage_raw[warp]);
  const __half *gs = reinterpret_cast<const __half *>(w + NORM_AT);
  const unsigned short *perm =
      reinterpret_cast<const unsigned short *>(w + PERM_AT);
  const uint4 *wp =
      reinterpret_cast<const uint4 *>(w) + (long long)tile * LOADS * 32 + lane;
  const int begin = blockIdx.y * SPAN, end = min(LOADS, begin + SPAN);
  constexpr int ITER = (SPAN + WARPS * UNROLL - 1) / (WARPS * UNROLL);
  // This warp's UNROLL loads of pass `it`, the next pass's issued before
  // this one's are used.
  auto first = [&](int it) { return begin + (it * WARPS + warp) * UNROLL; };
  uint4 buf[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u)
    if (first(0) + u < end)
      buf[u] = kiln_stream_load(wp + (long long)(first(0) + u) * 32);
  kiln_wait_previous_grid(); // the GEMM before read what this writes
#pragma unroll 1
  for (int it = 0; it < ITER; ++it) {
    uint4 cur[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      cur[u] = buf[u];
      if (it + 1 < ITER && first(it + 1) + u < end)
        buf[u] = kiln_stream_load(wp + (long long)(first(it + 1) + u) * 32);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int l = first(it) + u;
      if (l < end) { // the same for the whole warp
        const unsigned q[4] = {cur[u].x, cur[u].y, cur[u].z, cur[u].w};
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
          const int k0 = (l * STEPS + s) * 16, group = k0 / GROUP;
          const kiln_quant_zero z =
              kiln_quant_zeros<ZP, MIDDLE>(w, ZEROS, tile, GROUPS, group, g);
          const float2 scale =
              kiln_quant_scales<KIND>(w, SCALES, tile, GROUPS, group, g);
          unsigned a[4];
          kiln_dequant<KIND>(q + s * (4 / STEPS), a, z);
          // a[i]: row g + 8 (i % 2), columns 2t, 2t + 1 (+ 8 for i >= 2).
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int row = g + 8 * (i & 1), col = s * 16 + 2 * t + 8 * (i >> 1);
            const float sc = i & 1 ? scale.y : scale.x;
            float2 v = __half22float2(kiln_bits_half2(a[i]));
            v.x *= sc; // exact: (code - zero) times an f16 scale
            v.y *= sc;
            if constexpr (NORM) {
              const float2 gv = __half22float2(
                  *reinterpret_cast<const __half2 *>(gs + l * COLS + col));
              v.x *= gv.x; // the one rounding the f16 path makes
              v.y *= gv.y;
            }
            *reinterpret_cast<__half2 *>(stage + row * STRIDE + col) =
                __floats2half2_rn(v.x, v.y);
          }
        }
      }
      __syncthreads();
      if (l < end) {
        if constexpr (PERM) {
          // Buffer column j is W's perm[j]: element by element.
#pragma unroll 4
          for (int e = lane; e < 16 * COLS; e += 32) {
            const int row = e / COLS, j = e % COLS;
            const long long r = (long long)tile * 16 + row;
            if (r < N)
              out[r * K + perm[l * COLS + j]] = stage[row * STRIDE + j];
          }
        } else {
          // 16 rows of COLS / 8 chunks of 8 halves.
          constexpr int CHUNKS = COLS / 8;
#pragma unroll
          for (int c = lane; c < 16 * CHUNKS; c += 32) {
            const int row = c / CHUNKS, chunk = c % CHUNKS;
            const long long r = (long long)tile * 16 + row;
            if (r < N)
              *reinterpret_cast<uint4 *>(out + r * K + l * COLS + chunk * 8) =
                  *reinterpret_cast<const uint4 *>(stage + row * STRIDE +
                                                   chunk * 8);
          }
        }
      }
      __syncthreads();
    }
  }
}
)cuda";
  k.source = src;
  return k;
}

llvm::Expected<CudaKernel> emitDequantizeWeight(Operation *op,
                                                const CodegenOptions &opts) {
  auto w = quantizedWeight(op, "the dequantize kernel");
  if (!w)
    return w.takeError();
  CudaKernel base = kernelFor(op, kDequantizeSuffix);
  CudaKernel k = emitDequantizeWeight(w->format, w->n, w->k, w->norm,
                                      base.kernel, opts.smCount);
  k.provenance = base.provenance;
  return k;
}

} // namespace kiln

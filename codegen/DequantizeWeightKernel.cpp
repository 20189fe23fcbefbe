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
// (exact: a code times an f16 scale; with mins, then minus the group's
// min, as llama.cpp computes it), multiply the norm weight g in and
// round once to f16 (as runtime/PlanDevice.cpp folds g into an f16
// weight), stage the 16 rows in shared memory and store them as 16-byte
// row chunks. With act-order the buffer's columns are permuted: each
// element goes back to W's column perm[j]. Padding rows past N are not
// written. Each pass's loads are issued while the pass before it is used.
// It waits for the previous kernel (PDL) after issuing its first loads of W
// and before its first store: the GEMM before it read the buffer it
// overwrites.
//
// For cuBLASLt's FP8 GEMM (quant-gemm=2) an fp8 buffer is written out as
// e4m3 codes [N, K] row-major instead, each byte moved from its fragment
// slot unchanged, and its rows' f16 scales as f32 [N]; the norm weight is
// left to the activation's quantizer (FP8ActivationKernel.cpp).
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
                                const std::string &kernel, int smCount,
                                bool e4m3) {
  QuantLayout layout = quantLayout(format, n, kdim, norm);
  e4m3 = e4m3 && format.kind == QuantKind::FP8;
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
  if (e4m3)
    k.params = {{ParamKind::Weight, "w", "const unsigned char *"},
                {ParamKind::Dequantized, "out", "unsigned char *"},
                {ParamKind::Dequantized, "row_scales", "float *"}};
  k.grid = {layout.tiles, splits, 1};
  k.blockThreads = 32 * kWarps;

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  if (e4m3)
    os << "\n// kernel " << k.kernel << ": codes[" << n << ", " << kdim
       << "] e4m3, row_scales[" << n << "] f32 = W " << format.name()
       << " row-major\n";
  else
    os << "\n// kernel " << k.kernel << ": out[" << n << ", " << kdim
       << "] f16 = dequant(W " << format.name() << ")"
       << (norm ? " diag(g)" : "") << "\n";
  os << quantBufferConstants({format, n, kdim, norm});
  os << "constexpr int COLS = " << cols << "; // columns a load\n";
  os << "constexpr int SPAN = " << span << "; // loads a block (grid y)\n";
  os << "constexpr int WARPS = " << kWarps << ", UNROLL = " << kUnroll << ";\n";
  os << "constexpr bool E4M3 = " << (e4m3 ? "true" : "false")
     << "; // codes and f32 row scales out\n";
  os << quantPrelude();
  if (e4m3)
    os << "using kiln_out_t = unsigned char;\n";
  else
    os << "using kiln_out_t = __half;\n";
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
  // A warp's 16 rows x COLS columns, rows 16 bytes apart past COLS (the
  // row chunks stay aligned).
  constexpr int VEC = 16 / sizeof(kiln_out_t); // elements a 16-byte chunk
  constexpr int STRIDE = COLS + VEC;
  __shared__ uint4 stage_raw[WARPS][16 * STRIDE / VEC];
  kiln_out_t *stage = reinterpret_cast<kiln_out_t *>(stage_raw[warp]);
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
@SCALES@#pragma unroll 1
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
        if constexpr (E4M3) {
          // q[2s + h]: k-step s's bytes of rows g (0, 1) and g + 8 (2, 3),
          // columns s * 16 + 8h + 2t (+ 1), moved as they are.
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            unsigned char *at = reinterpret_cast<unsigned char *>(stage) +
                                (i >> 1) * 16 + (i & 1) * 8 + 2 * t;
            *reinterpret_cast<unsigned short *>(at + g * STRIDE) =
                (unsigned short)(q[i] & 0xffff);
            *reinterpret_cast<unsigned short *>(at + (g + 8) * STRIDE) =
                (unsigned short)(q[i] >> 16);
          }
        } else {
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
          const int k0 = (l * STEPS + s) * 16, group = k0 / GROUP;
          const kiln_quant_group<MINS, ZP> grp =
              kiln_quant_group_load<MINS, ZP>(w, SCALES, MINS_AT, ZEROS, tile,
                                              GROUPS, group, g);
          const kiln_quant_zero z = kiln_quant_zeros_of<ZP, MIDDLE>(grp);
          const float2 scale = kiln_quant_scales_of<KIND>(grp);
          const float2 mn = kiln_quant_mins_of(grp);
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
            if constexpr (MINS) { // code * scale - min, as llama.cpp
              const float m = i & 1 ? mn.y : mn.x;
              v.x -= m;
              v.y -= m;
            }
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
          // 16 rows of COLS / VEC chunks of 16 bytes.
          constexpr int CHUNKS = COLS / VEC;
#pragma unroll
          for (int c = lane; c < 16 * CHUNKS; c += 32) {
            const int row = c / CHUNKS, chunk = c % CHUNKS;
            const long long r = (long long)tile * 16 + row;
            if (r < N)
              *reinterpret_cast<uint4 *>(out + r * K + l * COLS +
                                         chunk * VEC) =
                  *reinterpret_cast<const uint4 *>(stage + row * STRIDE +
                                                   chunk * VEC);
          }
        }
      }
      __syncthreads();
    }
  }
}
)cuda";
  const std::string scales =
      e4m3
          ? R"cuda(  // The tile's rows' scales (one group), by the first block of the tile.
  if (blockIdx.y == 0 && threadIdx.x < 8) {
    const float2 sc = __half22float2(
        (reinterpret_cast<const __half2 *>(w + SCALES) +
         (long long)tile * 8)[threadIdx.x]);
    const long long r = (long long)tile * 16 + threadIdx.x;
    if (r < N)
      row_scales[r] = sc.x;
    if (r + 8 < N)
      row_scales[r + 8] = sc.y;
  }
)cuda"
          : "";
  src.replace(src.find("@SCALES@"), 8, scales);
  k.source = src;
  return k;
}

QuantGemm quantGemmOf(Operation *op, QuantGemm plan) {
  auto w = weightQuant(op->getOperand(1).getType());
  if (plan == QuantGemm::Fp8 && (!w || w->kind != QuantKind::FP8))
    return QuantGemm::Dequantized;
  return plan;
}

Fp8GemmLayout fp8GemmLayout(int64_t n, int64_t k, int64_t rows) {
  auto up = [](int64_t bytes) { return (bytes + 15) / 16 * 16; };
  Fp8GemmLayout l;
  l.wScales = up(n * k);
  l.a = up(l.wScales + 4 * n);
  l.aScales = up(l.a + rows * k);
  l.bytes = l.aScales + 4 * rows;
  return l;
}

llvm::Expected<CudaKernel>
emitDequantizeWeight(Operation *op, const CodegenOptions &opts, bool e4m3) {
  auto w = quantizedWeight(op, "the dequantize kernel");
  if (!w)
    return w.takeError();
  CudaKernel base = kernelFor(op, e4m3 ? kFp8WeightSuffix : kDequantizeSuffix);
  CudaKernel k = emitDequantizeWeight(w->format, w->n, w->k, w->norm,
                                      base.kernel, opts.smCount, e4m3);
  k.provenance = base.provenance;
  return k;
}

} // namespace kiln

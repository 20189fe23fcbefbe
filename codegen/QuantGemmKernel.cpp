//===- QuantGemmKernel.cpp - matmuls of quantized weights -----------------===//
//
// C[S, N] f32 = (x[S, K] * g) . W[N, K]^T for a weight of #kiln.quant,
// before the op's epilogue kernel (linear_epilogue, qkv_epilogue), in every
// phase: one token (decode), a batch's rows and a prefill's. W is read in
// the layout of runtime/QuantLayout.h: a warp owns a tile of 16 rows of W
// and streams it once, UNROLL 16-byte loads a lane in flight; each 16 x 16
// piece of the tile dequantizes in registers into an mma.m16n8k16 A
// fragment (int4: masks and the 0x6400 exponent, so that 1024 + code is an
// f16 from which 1024 + zero is subtracted exactly; int8: a byte permute
// into the same; fp8: the e4m3 bits moved into f16's, 2^-8 of the value)
// and multiplies 8 x-rows at once per n-tile. A group's products sum in
// their own fp32 accumulators, scaled by the group's f16 scales as the
// group ends, so the weights are dequantized exactly. The norm weight g
// (a folded RMSNorm's, which a quantized W cannot absorb) scales x as it
// is loaded; the epilogue then applies 1 / rms(x) as after a dense GEMM.
// With act-order the buffer's columns are permuted (each group's
// contiguous) and x is gathered through the permutation.
// With split-K, SPLIT_K warps share a tile, each a span of K, summed
// through shared memory. Rows at and past the step's count are not loaded
// (zero fragments). It waits for the previous kernel (PDL) after issuing
// its first loads of W, before it reads x.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"
#include "runtime/QuantLayout.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace kiln {

llvm::Expected<CudaKernel> emitQuantGemm(Operation *op,
                                         const CodegenOptions &opts,
                                         Phase phase) {
  auto w = cast<RankedTensorType>(op->getOperand(1).getType());
  auto x = cast<RankedTensorType>(op->getOperand(0).getType());
  std::optional<QuantFormat> quant = weightQuant(w);
  if (!quant)
    return llvm::createStringError("the quantized GEMM needs a #kiln.quant "
                                   "weight");
  if (llvm::Error e = requireF16(w.getElementType()))
    return std::move(e);
  if (llvm::Error e = requireF16(x.getElementType()))
    return std::move(e);
  int64_t n = w.getDimSize(0), kdim = w.getDimSize(1);
  if (std::string e = quantShapeError(*quant, kdim); !e.empty())
    return llvm::createStringError("a " + quant->name() + " weight: " + e);
  auto packed = op->getOperand(1).getDefiningOp<PackedWeightOp>();
  bool norm = packed && packed.getScaledBy();
  QuantLayout layout = quantLayout(*quant, n, kdim, norm);

  const bool int4 = quant->kind == QuantKind::Int4;
  const int64_t perLoad = int4 ? 64 : 32; // columns a 16-byte load covers
  const int64_t loads = kdim / perLoad;
  // One n-tile (8 rows) for a token, four for a batch's or a prompt's.
  const int nTiles = phase == Phase::decode ? 1 : 4;
  const int unroll = std::max(1, opts.gemvUnroll);
  // Enough warps a tile that each streams about 2 x UNROLL loads.
  const int splitK = int(std::clamp<int64_t>(loads / (2 * unroll), 1, 8));
  const int tilesPerBlock = std::max(1, 8 / splitK);

  CudaKernel k = kernelFor(op, kQuantGemmSuffix + opts.kernelSuffix);
  k.params = {{ParamKind::Activation, "x", "const __half *"},
              {ParamKind::Weight, "w", "const unsigned char *"},
              {ParamKind::Workspace, "c", "float *"},
              {ParamKind::Count, "count", "const int *"}};
  k.grid = {(layout.tiles + tilesPerBlock - 1) / tilesPerBlock, 1, 1};
  k.rowAxis = 1;
  k.rowsPerBlock = 8 * nTiles;
  k.blockThreads = 32 * tilesPerBlock * splitK;

  std::string src = cudaPrelude() + tensorCorePrelude();
  llvm::raw_string_ostream os(src);
  os << "\n// kernel " << k.kernel << ": C[S, " << n << "] = x[S, " << kdim
     << "]" << (norm ? " * g" : "") << " . W[" << n << ", " << kdim
     << "]^T, W " << quant->name() << "\n";
  os << "constexpr int K = " << kdim << ", N = " << n
     << ", TILES = " << layout.tiles << ", GROUPS = " << layout.groups
     << ", GROUP = " << (quant->group ? quant->group : kdim) << ";\n";
  os << "constexpr int KIND = "
     << (int4 ? 4 : quant->kind == QuantKind::FP8 ? 2 : 8)
     << "; // 4: int4, 8: int8, 2: fp8\n";
  os << "constexpr bool ZP = " << (quant->zeroPoints ? "true" : "false")
     << ", NORM = " << (norm ? "true" : "false")
     << ", PERM = " << (quant->actOrder ? "true" : "false") << ";\n";
  os << "constexpr int MIDDLE = " << quant->middle() << ";\n";
  os << "constexpr long long SCALES = " << layout.scales
     << ", ZEROS = " << layout.zeros << ", NORM_AT = " << layout.norm
     << ", PERM_AT = " << layout.perm << "; // byte offsets in w\n";
  os << "constexpr int LOADS = " << loads
     << ", STEPS = " << (int4 ? 4 : 2) << "; // 16-byte loads a row of tiles,"
     << " k-steps of 16 a load\n";
  os << "constexpr int NT = " << nTiles << ", SPLIT_K = " << splitK
     << ", TPB = " << tilesPerBlock << ", UNROLL = " << unroll << ";\n";
  os << "constexpr int THREADS = 32 * TPB * SPLIT_K;\n";
  os << R"cuda(
__device__ __forceinline__ unsigned kiln_prmt(unsigned a, unsigned b,
                                              unsigned sel) {
#ifdef KILN_CUDA_EMU_H
  unsigned long long both = (unsigned long long)b << 32 | a;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i)
    r |= unsigned(both >> (8 * ((sel >> (4 * i)) & 7)) & 0xff) << (8 * i);
  return r;
#else
  return __byte_perm(a, b, sel);
#endif
}
__device__ __forceinline__ __half2 kiln_bits_half2(unsigned u) {
  return *reinterpret_cast<const __half2 *>(&u);
}
__device__ __forceinline__ unsigned kiln_half2_bits(__half2 h) {
  return *reinterpret_cast<const unsigned *>(&h);
}
// a * b + c (cuda_fp16.h has no host __hfma2; here every use is exact).
__device__ __forceinline__ __half2 kiln_hfma2(__half2 a, __half2 b,
                                              __half2 c) {
#ifdef KILN_CUDA_EMU_H
  const float2 x = __half22float2(a), y = __half22float2(b),
               z = __half22float2(c);
  return __floats2half2_rn(fmaf(x.x, y.x, z.x), fmaf(x.y, y.y, z.y));
#else
  return __hfma2(a, b, c);
#endif
}

// The A fragment of one k-step from its codes (int4: one word; 8-bit: two),
// each pair (code - zero) exactly, or fp8's value times 2^-8. zlo, zhi:
// 1024 + the zero of rows g and g + 8, as f16 pairs; zhi16: 64 + the zero
// of row g + 8 (int4's odd nibbles come 16 times their code).
__device__ __forceinline__ void kiln_dequant(const unsigned *q,
                                             unsigned (&a)[4], __half2 zlo,
                                             __half2 zhi, __half2 zhi16) {
  if constexpr (KIND == 4) {
    // Nibbles 0, 4 | 1, 5 | 2, 6 | 3, 7 hold a0, a1 | a2, a3 | ...
    const unsigned lo = q[0], hi = q[0] >> 8;
    // (1024 + 16 c) / 16 - (64 + z) = c - z
    const __half2 sixteenth = __floats2half2_rn(0.0625f, 0.0625f);
    a[0] = kiln_half2_bits(
        __hsub2(kiln_bits_half2((lo & 0x000f000f) | 0x64006400), zlo));
    a[1] = kiln_half2_bits(kiln_hfma2(
        kiln_bits_half2((lo & 0x00f000f0) | 0x64006400), sixteenth,
        __hneg2(zhi16)));
    a[2] = kiln_half2_bits(
        __hsub2(kiln_bits_half2((hi & 0x000f000f) | 0x64006400), zlo));
    a[3] = kiln_half2_bits(kiln_hfma2(
        kiln_bits_half2((hi & 0x00f000f0) | 0x64006400), sixteenth,
        __hneg2(zhi16)));
  } else if constexpr (KIND == 8) {
    // Bytes a0..a7; each pair 0x64 above it: 1024 + code.
    a[0] = kiln_half2_bits(__hsub2(
        kiln_bits_half2(kiln_prmt(q[0], 0x64646464, 0x4140)), zlo));
    a[1] = kiln_half2_bits(__hsub2(
        kiln_bits_half2(kiln_prmt(q[0], 0x64646464, 0x4342)), zhi));
    a[2] = kiln_half2_bits(__hsub2(
        kiln_bits_half2(kiln_prmt(q[1], 0x64646464, 0x4140)), zlo));
    a[3] = kiln_half2_bits(__hsub2(
        kiln_bits_half2(kiln_prmt(q[1], 0x64646464, 0x4342)), zhi));
  } else {
    // e4m3 in the top byte of each f16, then sign in place, exponent and
    // mantissa one bit down: the f16 is the value times 2^-8 (biases 15
    // and 7), subnormals included.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const unsigned v = kiln_prmt(q[i / 2], 0, i % 2 ? 0x3424 : 0x1404);
      a[i] = ((v >> 1) & 0x3f803f80) | (v & 0x80008000);
    }
  }
}
)cuda";
  os << "\n// x [S, K] f16, w the " << quant->name() << " buffer ("
     << layout.bytes << " bytes), c [S, N] f32, count [1] i32.\n";
  os << "// grid (ceil(TILES / TPB), ceil(S / (8 * NT))), block (THREADS): "
        "SPLIT_K warps a tile of 16 rows of W, each a span of K\n";
  os << "extern \"C\" __global__ void __launch_bounds__(THREADS) " << k.entry
     << "(" << kernelParameters(k) << ") {\n";
  os << R"cuda(  kiln_launch_dependents();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int tile = blockIdx.x * TPB + warp / SPLIT_K, part = warp % SPLIT_K;
  constexpr int SPAN = (LOADS + SPLIT_K - 1) / SPLIT_K;
  const int begin = part * SPAN;
  const int end = tile < TILES ? min(LOADS, begin + SPAN) : begin;
  const uint4 *wp = reinterpret_cast<const uint4 *>(w) +
                    (long long)(tile < TILES ? tile : 0) * LOADS * 32 + lane;
  uint4 buf[UNROLL]; // the loads in flight
#pragma unroll
  for (int u = 0; u < UNROLL; ++u)
    if (begin + u < end)
      buf[u] = kiln_stream_load(wp + (long long)(begin + u) * 32);
  kiln_wait_previous_grid(); // x is the previous kernel's; W was not
  const long long row0 = (long long)blockIdx.y * 8 * NT;
  const int rows = (int)min((long long)8 * NT, (long long)count[0] - row0);
  const __half *gs = reinterpret_cast<const __half *>(w + NORM_AT);
  const unsigned short *perm =
      reinterpret_cast<const unsigned short *>(w + PERM_AT);
  const __half2 *scales =
      reinterpret_cast<const __half2 *>(w + SCALES) + (long long)tile * GROUPS * 8;
  const unsigned short *zeros =
      reinterpret_cast<const unsigned short *>(w + ZEROS) +
      (long long)tile * GROUPS * 8;
  float acc[NT][4], part_acc[NT][4]; // all the groups', this group's
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      acc[i][j] = part_acc[i][j] = 0.0f;
  int group = -1;
  __half2 zlo, zhi, zhi16;
  // This group's sums into acc, times its scales (fp8: and 2^8).
  auto flush = [&] {
    if (group < 0)
      return;
    const float2 s = __half22float2(scales[group * 8 + g]);
    const float lo = KIND == 2 ? s.x * 256.0f : s.x;
    const float hi = KIND == 2 ? s.y * 256.0f : s.y;
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      acc[i][0] += part_acc[i][0] * lo;
      acc[i][1] += part_acc[i][1] * lo;
      acc[i][2] += part_acc[i][2] * hi;
      acc[i][3] += part_acc[i][3] * hi;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        part_acc[i][j] = 0.0f;
    }
  };
  // One k-step: its group's zeros, the fragment, NT mmas.
  auto step = [&](const unsigned *q, int kstep) {
    const int k0 = kstep * 16;
    if (k0 / GROUP != group) {
      flush();
      group = k0 / GROUP;
      float z_lo = MIDDLE, z_hi = MIDDLE;
      if constexpr (ZP) {
        const unsigned short z = zeros[group * 8 + g];
        z_lo = float(z & 0xff);
        z_hi = float(z >> 8);
      }
      zlo = __floats2half2_rn(1024.0f + z_lo, 1024.0f + z_lo);
      zhi = __floats2half2_rn(1024.0f + z_hi, 1024.0f + z_hi);
      zhi16 = __floats2half2_rn(64.0f + z_hi, 64.0f + z_hi);
    }
    unsigned a[4];
    kiln_dequant(q, a, zlo, zhi, zhi16);
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      unsigned b[2] = {0u, 0u}; // x rows past the count are zeros
      const int r = i * 8 + g;
      if (r < rows) {
        __half2 x0, x1;
        if constexpr (PERM) { // x's columns perm[j] of the buffer's j
          const __half *xr = x + (row0 + r) * K;
          const int j = k0 + 2 * t;
          x0 = __halves2half2(xr[perm[j]], xr[perm[j + 1]]);
          x1 = __halves2half2(xr[perm[j + 8]], xr[perm[j + 9]]);
        } else {
          const __half *xr = x + (row0 + r) * K + k0 + 2 * t;
          x0 = *reinterpret_cast<const __half2 *>(xr);
          x1 = *reinterpret_cast<const __half2 *>(xr + 8);
        }
        if constexpr (NORM) {
          x0 = __hmul2(x0, *reinterpret_cast<const __half2 *>(gs + k0 + 2 * t));
          x1 = __hmul2(x1,
                       *reinterpret_cast<const __half2 *>(gs + k0 + 8 + 2 * t));
        }
        b[0] = kiln_half2_bits(x0);
        b[1] = kiln_half2_bits(x1);
      }
      kiln_mma<false>(part_acc[i], a, b);
    }
  };
#pragma unroll 1
  for (int l = begin; l < end; l += UNROLL) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (l + u < end) { // the same for the whole warp
        const uint4 v = buf[u];
        if (l + u + UNROLL < end)
          buf[u] = kiln_stream_load(wp + (long long)(l + u + UNROLL) * 32);
        const unsigned q[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int s = 0; s < STEPS; ++s)
          step(q + s * (4 / STEPS), (l + u) * STEPS + s);
      }
    }
  }
  flush();
  if constexpr (SPLIT_K > 1) {
    // The parts' sums, [warp][NT * 4][lane], added by each tile's first.
    __shared__ float red[TPB * SPLIT_K][NT * 4][32];
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        red[warp][i * 4 + j][lane] = acc[i][j];
    __syncthreads();
    if (part != 0)
      return;
    for (int p = 1; p < SPLIT_K; ++p)
#pragma unroll
      for (int i = 0; i < NT; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[i][j] += red[warp + p][i * 4 + j][lane];
  }
  if (tile >= TILES)
    return;
  // c0, c1: W row g, x rows 2t and 2t + 1; c2, c3: W row g + 8.
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = i * 8 + 2 * t + (j & 1), col = tile * 16 + g + 8 * (j >> 1);
      if (r < rows && col < N)
        c[(row0 + r) * N + col] = acc[i][j];
    }
}
)cuda";
  k.source = src;
  return k;
}

} // namespace kiln

//===- QuantPrelude.cpp - reading a quantized weight buffer in a kernel ---===//
//
// The device functions every kernel that reads runtime/QuantLayout.h's
// buffer shares (the quantized GEMM, the dequantize kernel): a k-step's A
// fragment dequantized in registers, and a tile's group: its scales, mins
// and zero points loaded, then read. One copy, so that the two kernels cannot
// drift apart in what a code means.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"
#include "runtime/QuantLayout.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

llvm::Expected<QuantizedWeight> quantizedWeight(Operation *op,
                                                llvm::StringRef kernel) {
  auto w = cast<RankedTensorType>(op->getOperand(1).getType());
  std::optional<QuantFormat> quant = weightQuant(w);
  if (!quant)
    return llvm::createStringError(kernel + " needs a #kiln.quant weight");
  if (llvm::Error e = requireF16(w.getElementType()))
    return std::move(e);
  QuantizedWeight q{*quant, w.getDimSize(0), w.getDimSize(1), false};
  if (std::string e = quantShapeError(*quant, q.k); !e.empty())
    return llvm::createStringError("a " + quant->name() + " weight: " + e);
  auto packed = op->getOperand(1).getDefiningOp<PackedWeightOp>();
  q.norm = packed && packed.getScaledBy();
  return q;
}

std::string quantBufferConstants(const QuantizedWeight &w) {
  const QuantFormat &f = w.format;
  QuantLayout layout = quantLayout(f, w.n, w.k, w.norm);
  const bool int4 = f.kind == QuantKind::Int4;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "constexpr int K = " << w.k << ", N = " << w.n
     << ", TILES = " << layout.tiles << ", GROUPS = " << layout.groups
     << ", GROUP = " << (f.group ? f.group : w.k) << ";\n";
  os << "constexpr int KIND = "
     << (int4                       ? 4
         : f.kind == QuantKind::FP8 ? 2
                                    : 8)
     << "; // 4: int4, 8: int8, 2: fp8\n";
  os << "constexpr bool ZP = " << (f.zeroPoints ? "true" : "false")
     << ", MINS = " << (f.mins ? "true" : "false")
     << ", NORM = " << (w.norm ? "true" : "false")
     << ", PERM = " << (f.actOrder ? "true" : "false") << ";\n";
  os << "constexpr int MIDDLE = " << f.middle() << ";\n";
  os << "constexpr long long SCALES = " << layout.scales
     << ", ZEROS = " << layout.zeros << ", MINS_AT = " << layout.mins
     << ", NORM_AT = " << layout.norm << ", PERM_AT = " << layout.perm
     << "; // byte offsets in w\n";
  os << "constexpr int LOADS = " << w.k / (int4 ? 64 : 32)
     << ", STEPS = " << (int4 ? 4 : 2)
     << "; // 16-byte loads a row of tiles, k-steps of 16 a load\n";
  return s;
}

std::string quantPrelude() {
  return R"cuda(
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
// lop3.b32: each bit of the result is LUT's bit (a << 2 | b << 1 | c) of
// a's, b's and c's bits. (x & mask) | magic in one instruction (LUT 0xea),
// where the compiler would emit an AND and an OR.
template <int LUT>
__device__ __forceinline__ unsigned kiln_lop3(unsigned a, unsigned b,
                                              unsigned c) {
#ifdef KILN_CUDA_EMU_H
  unsigned r = 0;
  for (int i = 0; i < 8; ++i)
    if (LUT >> i & 1)
      r |= (i & 4 ? a : ~a) & (i & 2 ? b : ~b) & (i & 1 ? c : ~c);
  return r;
#else
  unsigned r;
  asm("lop3.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(a), "r"(b), "r"(c),
      "n"(LUT));
  return r;
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

// One group's values for a tile's rows g (low) and g + 8 (high), as
// loaded: the scales (an f16 pair; with mins f32), the mins, the zero
// points (a byte each). Kernels load a group with the weights it scales
// and read it when it starts or ends: kept as loaded, so that no
// conversion waits for the load before its use.
template <bool MINS, bool ZP> struct kiln_quant_group {
  unsigned scales;        // without mins: rows g, g + 8 as f16
  float2 fscales, mins;   // with mins
  unsigned short zeros;   // with zero points
};
template <bool MINS, bool ZP>
__device__ __forceinline__ kiln_quant_group<MINS, ZP>
kiln_quant_group_load(const unsigned char *w, long long scales_at,
                      long long mins_at, long long zeros_at, int tile,
                      int groups, int group, int g) {
  kiln_quant_group<MINS, ZP> r{};
  const long long tile_at = (long long)tile * groups * 8; // the tile's first
  const int at = group * 8 + g;
  if constexpr (MINS) {
    r.fscales = (reinterpret_cast<const float2 *>(w + scales_at) + tile_at)[at];
    r.mins = (reinterpret_cast<const float2 *>(w + mins_at) + tile_at)[at];
  } else {
    r.scales = (reinterpret_cast<const unsigned *>(w + scales_at) + tile_at)[at];
  }
  if constexpr (ZP)
    r.zeros =
        (reinterpret_cast<const unsigned short *>(w + zeros_at) + tile_at)[at];
  return r;
}

// A group's zeros as the fragments subtract them: lo, hi = 1024 + zero of
// rows g and g + 8 as f16 pairs; hi16 = 64 + the zero of row g + 8
// (int4's odd nibbles come 16 times their code). MIDDLE without zero
// points.
struct kiln_quant_zero {
  __half2 lo, hi, hi16;
};
// A group's zero codes of rows g (x) and g + 8 (y): its zero points, or
// MIDDLE without them.
template <bool ZP, int MIDDLE, bool MINS>
__device__ __forceinline__ float2
kiln_quant_zero_codes(const kiln_quant_group<MINS, ZP> &q) {
  if constexpr (ZP)
    return make_float2(float(q.zeros & 0xff), float(q.zeros >> 8));
  return make_float2(MIDDLE, MIDDLE);
}
template <bool ZP, int MIDDLE, bool MINS>
__device__ __forceinline__ kiln_quant_zero
kiln_quant_zeros_of(const kiln_quant_group<MINS, ZP> &q) {
  const float2 z = kiln_quant_zero_codes<ZP, MIDDLE>(q);
  return {__floats2half2_rn(1024.0f + z.x, 1024.0f + z.x),
          __floats2half2_rn(1024.0f + z.y, 1024.0f + z.y),
          __floats2half2_rn(64.0f + z.y, 64.0f + z.y)};
}

// A group's scales of rows g (x) and g + 8 (y), as the fragments' values
// need them (fp8: times KILN_FP8_UNIT, what kiln_dequant took).
template <int KIND, bool MINS, bool ZP>
__device__ __forceinline__ float2
kiln_quant_scales_of(const kiln_quant_group<MINS, ZP> &q) {
  if constexpr (MINS)
    return q.fscales;
  float2 s = __half22float2(kiln_bits_half2(q.scales));
  if constexpr (KIND == 2) {
    s.x *= KILN_FP8_UNIT;
    s.y *= KILN_FP8_UNIT;
  }
  return s;
}

// A group's mins of rows g (x) and g + 8 (y) (0 without them).
template <bool MINS, bool ZP>
__device__ __forceinline__ float2
kiln_quant_mins_of(const kiln_quant_group<MINS, ZP> &q) {
  return q.mins;
}

// A group's zeros as its raw codes carry them (RAW below): the mmas
// summed (1024 + code) x, int4's rows g + 8 (1024 + 16 code) x, so that a
// row's sum of (code - zero) x is part - offset * X, int4's rows g + 8
// part / 16 - offset * X, X the group's sum of x. The offsets of rows g
// (x) and g + 8 (y): constants without zero points.
template <int KIND, bool ZP, int MIDDLE, bool MINS>
__device__ __forceinline__ float2
kiln_quant_raw_offsets(const kiln_quant_group<MINS, ZP> &q) {
  const float2 z = kiln_quant_zero_codes<ZP, MIDDLE>(q);
  return make_float2(1024.0f + z.x, (KIND == 4 ? 64.0f : 1024.0f) + z.y);
}

// The A fragment of one k-step from its codes (int4: one word; 8-bit: two),
// each pair (code - zero) exactly, or fp8's value over KILN_FP8_UNIT.
// RAW (int4, int8): 1024 + code as f16 (int4's odd nibbles 1024 + 16 code),
// no zero taken off: the group's flush takes it off its sum at once
// (kiln_quant_raw_offsets), four instructions fewer a k-step.
// KIND: 4 int4, 8 int8, 2 fp8.
template <int KIND, bool RAW = false>
__device__ __forceinline__ void kiln_dequant(const unsigned *q,
                                             unsigned (&a)[4],
                                             const kiln_quant_zero &z) {
  static_assert(!RAW || KIND != 2, "fp8's codes are not integers");
  if constexpr (KIND == 4) {
    // Nibbles 0, 4 | 1, 5 | 2, 6 | 3, 7 hold a0, a1 | a2, a3 | ...
    const unsigned lo = q[0], hi = q[0] >> 8;
    constexpr int AND_OR = 0xea; // (a & b) | c
    if constexpr (RAW) {
      a[0] = kiln_lop3<AND_OR>(lo, 0x000f000f, 0x64006400);
      a[1] = kiln_lop3<AND_OR>(lo, 0x00f000f0, 0x64006400);
      a[2] = kiln_lop3<AND_OR>(hi, 0x000f000f, 0x64006400);
      a[3] = kiln_lop3<AND_OR>(hi, 0x00f000f0, 0x64006400);
      return;
    }
    // (1024 + 16 c) / 16 - (64 + z) = c - z
    const __half2 sixteenth = __floats2half2_rn(0.0625f, 0.0625f);
    a[0] = kiln_half2_bits(__hsub2(
        kiln_bits_half2(kiln_lop3<AND_OR>(lo, 0x000f000f, 0x64006400)),
        z.lo));
    a[1] = kiln_half2_bits(kiln_hfma2(
        kiln_bits_half2(kiln_lop3<AND_OR>(lo, 0x00f000f0, 0x64006400)),
        sixteenth, __hneg2(z.hi16)));
    a[2] = kiln_half2_bits(__hsub2(
        kiln_bits_half2(kiln_lop3<AND_OR>(hi, 0x000f000f, 0x64006400)),
        z.lo));
    a[3] = kiln_half2_bits(kiln_hfma2(
        kiln_bits_half2(kiln_lop3<AND_OR>(hi, 0x00f000f0, 0x64006400)),
        sixteenth, __hneg2(z.hi16)));
  } else if constexpr (KIND == 8) {
    // Bytes a0..a7; each pair 0x64 above it: 1024 + code.
    if constexpr (RAW) {
      a[0] = kiln_prmt(q[0], 0x64646464, 0x4140);
      a[1] = kiln_prmt(q[0], 0x64646464, 0x4342);
      a[2] = kiln_prmt(q[1], 0x64646464, 0x4140);
      a[3] = kiln_prmt(q[1], 0x64646464, 0x4342);
      return;
    }
    a[0] = kiln_half2_bits(__hsub2(
        kiln_bits_half2(kiln_prmt(q[0], 0x64646464, 0x4140)), z.lo));
    a[1] = kiln_half2_bits(__hsub2(
        kiln_bits_half2(kiln_prmt(q[0], 0x64646464, 0x4342)), z.hi));
    a[2] = kiln_half2_bits(__hsub2(
        kiln_bits_half2(kiln_prmt(q[1], 0x64646464, 0x4140)), z.lo));
    a[3] = kiln_half2_bits(__hsub2(
        kiln_bits_half2(kiln_prmt(q[1], 0x64646464, 0x4342)), z.hi));
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#if KILN_FP8_CVT
      a[i] = kiln_e4m3x2_to_half2((unsigned short)(q[i / 2] >> 16 * (i % 2)));
#else
      // e4m3 in the top byte of each f16, then sign in place, exponent and
      // mantissa one bit down: the f16 is the value times 2^-8 (biases 15
      // and 7), subnormals included.
      const unsigned v = kiln_prmt(q[i / 2], 0, i % 2 ? 0x3424 : 0x1404);
      a[i] = ((v >> 1) & 0x3f803f80) | (v & 0x80008000);
#endif
    }
  }
}
)cuda";
}

} // namespace kiln

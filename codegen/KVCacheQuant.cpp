//===- KVCacheQuant.cpp - the KV cache's storage as the kernels see it ----===//
//
// A cache of f16 keeps each element as it is; a quantized one (an 8-bit
// element type: e4m3 or int8) keeps a head of a token slot as DH codes and
// one f16 scale (runtime/KVCacheQuant.h has the rounding rules, which the
// ref device follows too). The kernels that write the cache quantize a
// head in one warp; those that read it turn four codes at a time into
// floats with bit moves only (no I2F on the hot path), the scale applied
// by the caller: once a key for a score, once a value for its weight.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"

#include "llvm/Support/raw_ostream.h"

namespace kiln {

std::vector<KernelParam> kvCacheParams(KVCacheType cache, bool readOnly) {
  std::string codes = readOnly ? "const kiln_kv_t *" : "kiln_kv_t *";
  std::string scales = readOnly ? "const __half *" : "__half *";
  std::vector<KernelParam> params = {{ParamKind::KCache, "k_cache", codes},
                                     {ParamKind::VCache, "v_cache", codes}};
  if (cache.isQuantized())
    params.insert(params.end(), {{ParamKind::KScales, "k_scales", scales},
                                 {ParamKind::VScales, "v_scales", scales}});
  return params;
}

const char *kvScaleArguments(KVCacheType cache) {
  return cache.isQuantized() ? "k_scales, v_scales" : "nullptr, nullptr";
}

std::string kvCachePrelude(KVCacheType cache) {
  bool quant = cache.isQuantized();
  bool int8 = quant && cache.getElementType().isInteger(8);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "\n// The KV cache: "
     << (!quant ? "f16 elements"
         : int8 ? "int8 codes, an f16 scale a head of a slot"
                : "e4m3 codes, an f16 scale a head of a slot")
     << "\nusing kiln_kv_t = " << (quant ? "unsigned char" : "__half") << ";\n"
     << "constexpr bool KV_QUANT = " << (quant ? "true" : "false")
     << ", KV_INT8 = " << (int8 ? "true" : "false") << ";\n"
     << "// The largest code; a decoded code's value over what "
        "kiln_kv_decode4\n"
     << "// gives (e4m3's: KILN_FP8_UNIT).\n"
     << "constexpr float KV_MAX = " << (int8 ? "127.0f" : "448.0f")
     << ", KV_UNIT = " << (int8 ? "1.0f" : "KILN_FP8_UNIT") << ";\n";
  os << R"cuda(
__device__ __forceinline__ float2 kiln_kv_half2_floats(unsigned bits) {
  return __half22float2(*reinterpret_cast<const __half2 *>(&bits));
}

// The four codes of w (byte i: code i) as floats, each KV_UNIT times less
// than its code's value: int8 biased to 0 ..= 255 and put under 0x64
// (1024 + code, exact in f16) less 1152; e4m3's by the target's conversion
// (Prelude: its sign, exponent and mantissa moved into f16's before sm_89).
__device__ __forceinline__ void kiln_kv_decode4(unsigned w, float *f) {
#if KILN_FP8_CVT
  if constexpr (!KV_INT8) {
    const float2 a = kiln_kv_half2_floats(kiln_e4m3x2_to_half2(w & 0xffff));
    const float2 b = kiln_kv_half2_floats(kiln_e4m3x2_to_half2(w >> 16));
    f[0] = a.x;
    f[1] = a.y;
    f[2] = b.x;
    f[3] = b.y;
    return;
  }
#endif
  unsigned lo, hi; // f16 pairs of codes (0, 2) and (1, 3)
  if constexpr (KV_INT8) {
    const unsigned u = w ^ 0x80808080u;
    lo = (u & 0x00ff00ffu) | 0x64006400u;
    hi = ((u >> 8) & 0x00ff00ffu) | 0x64006400u;
    const __half2 bias = __floats2half2_rn(1152.0f, 1152.0f);
    const __half2 l = __hsub2(*reinterpret_cast<const __half2 *>(&lo), bias);
    const __half2 h = __hsub2(*reinterpret_cast<const __half2 *>(&hi), bias);
    lo = *reinterpret_cast<const unsigned *>(&l);
    hi = *reinterpret_cast<const unsigned *>(&h);
  } else {
    lo = ((w << 8) & 0x80008000u) | ((w << 7) & 0x3f803f80u);
    hi = (w & 0x80008000u) | ((w >> 1) & 0x3f803f80u);
  }
  const float2 a = kiln_kv_half2_floats(lo), b = kiln_kv_half2_floats(hi);
  f[0] = a.x;
  f[1] = b.x;
  f[2] = a.y;
  f[3] = b.y;
}

// One code as kiln_kv_decode4 gives it.
__device__ __forceinline__ float kiln_kv_decode1(unsigned char c) {
  float f[4];
  kiln_kv_decode4(c, f);
  return f[0];
}

// y (|y| <= KV_MAX) as its code, rounded to nearest even: int8's integer,
// e4m3's (kiln_e4m3_encode).
__device__ __forceinline__ unsigned char kiln_kv_encode(float y) {
  if constexpr (KV_INT8)
    return (unsigned char)(signed char)(int)rintf(y);
  else
    return kiln_e4m3_encode(y);
}

// One head of a token slot into a quantized cache, by one warp: lane l
// holds elements l, l + 32, ... of x [DH]; the head's codes [DH] and its
// scale (the largest magnitude over KV_MAX, in f16) are stored.
template <int DH>
__device__ __forceinline__ void
kiln_kv_store_head(const float (&x)[(DH + 31) / 32], kiln_kv_t *codes,
                   __half *scale) {
  const int lane = threadIdx.x & 31;
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < (DH + 31) / 32; ++i)
    if (lane + 32 * i < DH)
      amax = fmaxf(amax, fabsf(x[i]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const __half s = __float2half_rn(fminf(amax / KV_MAX, 65504.0f));
  const float sf = __half2float(s);
#pragma unroll
  for (int i = 0; i < (DH + 31) / 32; ++i)
    if (lane + 32 * i < DH)
      codes[lane + 32 * i] =
          sf == 0.0f ? (unsigned char)0
                     : kiln_kv_encode(fminf(fmaxf(x[i] / sf, -KV_MAX), KV_MAX));
  if (lane == 0)
    *scale = s;
}
)cuda";
  return s;
}

} // namespace kiln

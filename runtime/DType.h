//===- DType.h - element types of stored tensors ----------------*- C++ -*-===//
#ifndef KILN_RUNTIME_DTYPE_H
#define KILN_RUNTIME_DTYPE_H

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace kiln {

/// Element types that safetensors files hold for kiln: weights are F32, F16
/// or BF16; token ids in logits dumps are I32; bundles keep bytes as U8.
/// The rest are ggml's block types, which GGUF files hold (GgmlBlocks.h):
/// a tensor of them is read as floats, dequantized exactly.
enum class DType {
  F32,
  F16,
  BF16,
  I32,
  I64,
  U8,
  Q8_0,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q4_K,
  Q5_K,
  Q6_K,
};

/// Bytes of one element; 0 for ggml's block types (GgmlBlocks.h sizes
/// their blocks).
constexpr size_t dtypeSize(DType t) {
  switch (t) {
  case DType::U8:
    return 1;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  default:
    return 0;
  }
}

constexpr const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  case DType::U8:
    return "U8";
  case DType::Q8_0:
    return "Q8_0";
  case DType::Q4_0:
    return "Q4_0";
  case DType::Q4_1:
    return "Q4_1";
  case DType::Q5_0:
    return "Q5_0";
  case DType::Q5_1:
    return "Q5_1";
  case DType::Q4_K:
    return "Q4_K";
  case DType::Q5_K:
    return "Q5_K";
  case DType::Q6_K:
    return "Q6_K";
  }
  return "?";
}

/// safetensors' dtype names (ggml's block types are not among them).
inline std::optional<DType> parseDType(std::string_view s) {
  for (DType t :
       {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8})
    if (std::string_view(dtypeName(t)) == s)
      return t;
  return std::nullopt;
}

constexpr bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

/// ggml's block types: floats once dequantized.
constexpr bool isGgmlBlock(DType t) { return t >= DType::Q8_0; }

/// IEEE binary16 bits to float, exact (every half is a float).
inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) { // inf or nan
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) { // normal
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) { // zero
    bits = sign;
  } else { // subnormal: renormalize
    exp = 113;
    while (!(mant & 0x400)) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// float to IEEE binary16 bits, rounding to nearest even (as __float2half).
inline uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
  if (exp == 0xff) // inf or nan
    return uint16_t(sign | 0x7c00 | (mant ? 0x200 : 0));
  int e = int(exp) - 127 + 15;
  if (e >= 0x1f) // overflow: inf
    return uint16_t(sign | 0x7c00);
  if (e <= 0) { // subnormal or zero
    if (e < -10)
      return uint16_t(sign);
    mant |= 0x800000;
    int shift = 14 - e;
    uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1)))
      ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = (uint32_t(e) << 10) | (mant >> 13), rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half; // may carry into the exponent, which is right
  return uint16_t(sign | half);
}

/// bfloat16 bits are the top half of a float's.
inline float bf16ToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// The nearest bfloat16 (ties to even) of a finite float.
inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  return uint16_t(bits >> 16);
}

/// `n` elements of a float type (isFloat) at `data` into out[n].
inline void floatsToFloat(DType t, const uint8_t *data, int64_t n, float *out) {
  if (t == DType::F32) {
    std::memcpy(out, data, size_t(n) * 4);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, data + 2 * i, 2);
    out[i] = t == DType::F16 ? halfToFloat(bits) : bf16ToFloat(bits);
  }
}

} // namespace kiln

#endif // KILN_RUNTIME_DTYPE_H

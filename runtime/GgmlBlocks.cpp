//===- GgmlBlocks.cpp - ggml's blocks, dequantized as llama.cpp does ------===//
//
// Built with -ffp-contract=off (runtime/CMakeLists.txt): llama.cpp's
// reference dequantizers round each product and difference to float32, and
// a fused multiply-add would differ from them in the last bit.
//
//===----------------------------------------------------------------------===//
#include "runtime/GgmlBlocks.h"

#include <cstring>

namespace kiln {
namespace {
struct Entry {
  GgmlType type;
  GgmlTypeInfo info;
};

// ggml.c's type_traits (blck_size, type_size), as gguf-py's
// GGML_QUANT_SIZES lists them.
constexpr Entry kTypes[] = {
    {GgmlType::F32, {"F32", 1, 4}},
    {GgmlType::F16, {"F16", 1, 2}},
    {GgmlType::Q4_0, {"Q4_0", 32, 18}},
    {GgmlType::Q4_1, {"Q4_1", 32, 20}},
    {GgmlType::Q5_0, {"Q5_0", 32, 22}},
    {GgmlType::Q5_1, {"Q5_1", 32, 24}},
    {GgmlType::Q8_0, {"Q8_0", 32, 34}},
    {GgmlType::Q8_1, {"Q8_1", 32, 40}},
    {GgmlType::Q2_K, {"Q2_K", 256, 84}},
    {GgmlType::Q3_K, {"Q3_K", 256, 110}},
    {GgmlType::Q4_K, {"Q4_K", 256, 144}},
    {GgmlType::Q5_K, {"Q5_K", 256, 176}},
    {GgmlType::Q6_K, {"Q6_K", 256, 210}},
    {GgmlType::Q8_K, {"Q8_K", 256, 292}},
    {GgmlType::IQ2_XXS, {"IQ2_XXS", 256, 66}},
    {GgmlType::IQ2_XS, {"IQ2_XS", 256, 74}},
    {GgmlType::IQ3_XXS, {"IQ3_XXS", 256, 98}},
    {GgmlType::IQ1_S, {"IQ1_S", 256, 50}},
    {GgmlType::IQ4_NL, {"IQ4_NL", 32, 18}},
    {GgmlType::IQ3_S, {"IQ3_S", 256, 110}},
    {GgmlType::IQ2_S, {"IQ2_S", 256, 82}},
    {GgmlType::IQ4_XS, {"IQ4_XS", 256, 136}},
    {GgmlType::I8, {"I8", 1, 1}},
    {GgmlType::I16, {"I16", 1, 2}},
    {GgmlType::I32, {"I32", 1, 4}},
    {GgmlType::I64, {"I64", 1, 8}},
    {GgmlType::F64, {"F64", 1, 8}},
    {GgmlType::IQ1_M, {"IQ1_M", 256, 56}},
    {GgmlType::BF16, {"BF16", 1, 2}},
    {GgmlType::TQ1_0, {"TQ1_0", 256, 54}},
    {GgmlType::TQ2_0, {"TQ2_0", 256, 66}},
    {GgmlType::MXFP4, {"MXFP4", 32, 17}},
    {GgmlType::NVFP4, {"NVFP4", 64, 36}},
    {GgmlType::Q1_0, {"Q1_0", 128, 18}},
};

float half(const uint8_t *p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return halfToFloat(h);
}

// Q4_0: d f16, qs[16]: value j is low nibble of qs[j], j + 16 the high.
void q4_0(const uint8_t *b, float *y) {
  const float d = half(b);
  const uint8_t *qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = float((qs[j] & 0x0f) - 8) * d;
    y[j + 16] = float((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: d f16, m f16, qs[16]: value = q * d + m.
void q4_1(const uint8_t *b, float *y) {
  const float d = half(b), m = half(b + 2);
  const uint8_t *qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = float(qs[j] & 0x0f) * d + m;
    y[j + 16] = float(qs[j] >> 4) * d + m;
  }
}

// Q5_0: d f16, qh u32 (bit j: value j's fifth bit), qs[16].
void q5_0(const uint8_t *b, float *y) {
  const float d = half(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t *qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    int lo = (qs[j] & 0x0f) | int(((qh >> j) << 4) & 0x10);
    int hi = (qs[j] >> 4) | int((qh >> (j + 12)) & 0x10);
    y[j] = float(lo - 16) * d;
    y[j + 16] = float(hi - 16) * d;
  }
}

// Q5_1: d f16, m f16, qh u32, qs[16]: value = q * d + m.
void q5_1(const uint8_t *b, float *y) {
  const float d = half(b), m = half(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t *qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    int lo = (qs[j] & 0x0f) | int(((qh >> j) << 4) & 0x10);
    int hi = (qs[j] >> 4) | int((qh >> (j + 12)) & 0x10);
    y[j] = float(lo) * d + m;
    y[j + 16] = float(hi) * d + m;
  }
}

// Q8_0: d f16, qs[32] int8.
void q8_0(const uint8_t *b, float *y) {
  const float d = half(b);
  for (int j = 0; j < 32; ++j)
    y[j] = float(int8_t(b[2 + j])) * d;
}

// Q4_K: d f16, dmin f16, scales[12], qs[128]: 8 sub-blocks of 32,
// value = d * scale * q - dmin * min.
void q4_K(const uint8_t *b, float *y) {
  const float d = half(b), min = half(b + 2);
  const uint8_t *scales = b + 4, *q = b + 16;
  int is = 0;
  for (int j = 0; j < 256; j += 64) {
    uint8_t sc, m;
    ggmlScaleMinK4(is + 0, scales, sc, m);
    const float d1 = d * sc, m1 = min * m;
    ggmlScaleMinK4(is + 1, scales, sc, m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l)
      *y++ = d1 * float(q[l] & 0x0f) - m1;
    for (int l = 0; l < 32; ++l)
      *y++ = d2 * float(q[l] >> 4) - m2;
    q += 32;
    is += 2;
  }
}

// Q5_K: d, dmin f16, scales[12], qh[32], qs[128]: Q4_K with a fifth bit.
void q5_K(const uint8_t *b, float *y) {
  const float d = half(b), min = half(b + 2);
  const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
  int is = 0;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 256; j += 64) {
    uint8_t sc, m;
    ggmlScaleMinK4(is + 0, scales, sc, m);
    const float d1 = d * sc, m1 = min * m;
    ggmlScaleMinK4(is + 1, scales, sc, m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l)
      *y++ = d1 * float((ql[l] & 0x0f) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l)
      *y++ = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    ql += 32;
    is += 2;
    u1 <<= 2;
    u2 <<= 2;
  }
}

// Q6_K: ql[128], qh[64], scales[16] int8, d f16: 16 sub-blocks of 16,
// value = d * scale * (q - 32).
void q6_K(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = reinterpret_cast<const int8_t *>(b + 192);
  const float d = half(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      int is = l / 16;
      int q1 = int((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      int q2 = int((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * float(sc[is + 0]) * float(q1);
      y[l + 32] = d * float(sc[is + 2]) * float(q2);
      y[l + 64] = d * float(sc[is + 4]) * float(q3);
      y[l + 96] = d * float(sc[is + 6]) * float(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}
} // namespace

void ggmlScaleMinK4(int j, const uint8_t *q, uint8_t &d, uint8_t &m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

std::optional<GgmlTypeInfo> ggmlTypeInfo(uint32_t id) {
  for (const Entry &e : kTypes)
    if (uint32_t(e.type) == id)
      return e.info;
  return std::nullopt;
}

namespace {
/// The types kiln reads: their DType, and their block's dequantizer (none
/// for the plain float types).
struct Readable {
  GgmlType type;
  DType dtype;
  void (*block)(const uint8_t *, float *);
};
constexpr Readable kReadable[] = {
    {GgmlType::F32, DType::F32, nullptr},
    {GgmlType::F16, DType::F16, nullptr},
    {GgmlType::BF16, DType::BF16, nullptr},
    {GgmlType::Q8_0, DType::Q8_0, q8_0},
    {GgmlType::Q4_0, DType::Q4_0, q4_0},
    {GgmlType::Q4_1, DType::Q4_1, q4_1},
    {GgmlType::Q5_0, DType::Q5_0, q5_0},
    {GgmlType::Q5_1, DType::Q5_1, q5_1},
    {GgmlType::Q4_K, DType::Q4_K, q4_K},
    {GgmlType::Q5_K, DType::Q5_K, q5_K},
    {GgmlType::Q6_K, DType::Q6_K, q6_K},
};

const Readable *readable(GgmlType t) {
  for (const Readable &r : kReadable)
    if (r.type == t)
      return &r;
  return nullptr;
}
} // namespace

std::optional<DType> dtypeOfGgml(GgmlType t) {
  if (const Readable *r = readable(t))
    return r->dtype;
  return std::nullopt;
}

std::optional<GgmlType> ggmlTypeOf(DType t) {
  if (!isGgmlBlock(t))
    return std::nullopt;
  for (const Readable &r : kReadable)
    if (r.dtype == t)
      return r.type;
  return std::nullopt;
}

std::optional<uint64_t> ggmlBytes(GgmlType t, int64_t elements) {
  GgmlTypeInfo info = ggmlTypeInfo(t);
  if (elements < 0 || elements % info.blockElements)
    return std::nullopt;
  uint64_t blocks = uint64_t(elements / info.blockElements);
  uint64_t bytes;
  if (__builtin_mul_overflow(blocks, uint64_t(info.blockBytes), &bytes))
    return std::nullopt;
  return bytes;
}

void ggmlDequantize(GgmlType t, const uint8_t *blocks, int64_t elements,
                    float *out) {
  const Readable *r = readable(t);
  if (!r) {
    std::memset(out, 0, size_t(elements) * 4); // callers check dtypeOfGgml
    return;
  }
  if (!r->block) {
    floatsToFloat(r->dtype, blocks, elements, out);
    return;
  }
  const GgmlTypeInfo info = ggmlTypeInfo(t);
  for (int64_t i = 0; i < elements / info.blockElements; ++i)
    r->block(blocks + i * info.blockBytes, out + i * info.blockElements);
}

} // namespace kiln

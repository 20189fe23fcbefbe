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

// The 6-bit scale (d) and min (m) of sub-block j of a Q4_K/Q5_K block's 12
// packed bytes q.
void scaleMinK4(int j, const uint8_t *q, uint8_t &d, uint8_t &m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_0, Q5_0, Q4_1, Q5_1: 16 bytes of nibbles (value j the low nibble of
// qs[j], j + 16 the high), Q5's fifth bit j in the u32 at qh.
void nibbles(const uint8_t *qs, const uint8_t *qh, uint8_t *codes) {
  uint32_t bits = 0;
  if (qh)
    std::memcpy(&bits, qh, 4);
  for (int j = 0; j < 16; ++j) {
    codes[j] = uint8_t((qs[j] & 0x0f) | (((bits >> j) << 4) & 0x10));
    codes[j + 16] = uint8_t((qs[j] >> 4) | ((bits >> (j + 12)) & 0x10));
  }
}
} // namespace

int ggmlGroupSize(GgmlType t) { return t == GgmlType::Q6_K ? 16 : 32; }

int ggmlZeroCode(GgmlType t) {
  switch (t) {
  case GgmlType::Q4_0:
    return 8;
  case GgmlType::Q5_0:
    return 16;
  case GgmlType::Q8_0:
    return 128;
  case GgmlType::Q6_K:
    return 32;
  default:
    return -1;
  }
}

void ggmlBlockGroups(GgmlType t, const uint8_t *b, uint8_t *codes,
                     float *scales, float *mins) {
  switch (t) {
  case GgmlType::Q4_0: // d f16, qs[16]
    nibbles(b + 2, nullptr, codes);
    scales[0] = half(b);
    break;
  case GgmlType::Q5_0: // d f16, qh u32, qs[16]
    nibbles(b + 6, b + 2, codes);
    scales[0] = half(b);
    break;
  case GgmlType::Q4_1: // d f16, m f16, qs[16]: q d + m
    nibbles(b + 4, nullptr, codes);
    scales[0] = half(b);
    mins[0] = -half(b + 2);
    return;
  case GgmlType::Q5_1: // d f16, m f16, qh u32, qs[16]
    nibbles(b + 8, b + 4, codes);
    scales[0] = half(b);
    mins[0] = -half(b + 2);
    return;
  case GgmlType::Q8_0: // d f16, qs[32] int8
    for (int j = 0; j < 32; ++j)
      codes[j] = uint8_t(int(int8_t(b[2 + j])) + 128);
    scales[0] = half(b);
    break;
  case GgmlType::Q4_K: // d, dmin f16, scales[12], (qh[32],) qs[128]:
  case GgmlType::Q5_K: // 8 groups, d sc q - dmin m
  {
    const bool five = t == GgmlType::Q5_K;
    const float d = half(b), dmin = half(b + 2);
    const uint8_t *packed = b + 4, *qh = b + 16, *q = b + (five ? 48 : 16);
    for (int chunk = 0; chunk < 4; ++chunk, q += 32)
      for (int h = 0; h < 2; ++h) {
        const int group = 2 * chunk + h;
        uint8_t sc, m;
        scaleMinK4(group, packed, sc, m);
        scales[group] = d * float(sc);
        mins[group] = dmin * float(m);
        for (int l = 0; l < 32; ++l)
          codes[group * 32 + l] =
              uint8_t((h ? q[l] >> 4 : q[l] & 0x0f) |
                      (five && (qh[l] >> group & 1) ? 16 : 0));
      }
    return;
  }
  case GgmlType::Q6_K: { // ql[128], qh[64], scales[16] int8, d f16
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = reinterpret_cast<const int8_t *>(b + 192);
    const float d = half(b + 208);
    for (int n = 0; n < 2; ++n, ql += 64, qh += 32)
      for (int l = 0; l < 32; ++l) {
        uint8_t *c = codes + 128 * n + l; // values l, l + 32, l + 64, l + 96
        c[0] = uint8_t((ql[l] & 0x0f) | ((qh[l] & 3) << 4));
        c[32] = uint8_t((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4));
        c[64] = uint8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
        c[96] = uint8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
      }
    for (int g = 0; g < 16; ++g)
      scales[g] = d * float(sc[g]);
    break;
  }
  default:
    return;
  }
  // (code - zero) * scale as code * scale - zero * scale: exact.
  const int zero = ggmlZeroCode(t);
  for (int g = 0; g < ggmlTypeInfo(t).blockElements / ggmlGroupSize(t); ++g)
    mins[g] = float(zero) * scales[g];
}

std::optional<GgmlTypeInfo> ggmlTypeInfo(uint32_t id) {
  for (const Entry &e : kTypes)
    if (uint32_t(e.type) == id)
      return e.info;
  return std::nullopt;
}

namespace {
/// The types kiln reads and their DType.
struct Readable {
  GgmlType type;
  DType dtype;
};
constexpr Readable kReadable[] = {
    {GgmlType::F32, DType::F32},   {GgmlType::F16, DType::F16},
    {GgmlType::BF16, DType::BF16}, {GgmlType::Q8_0, DType::Q8_0},
    {GgmlType::Q4_0, DType::Q4_0}, {GgmlType::Q4_1, DType::Q4_1},
    {GgmlType::Q5_0, DType::Q5_0}, {GgmlType::Q5_1, DType::Q5_1},
    {GgmlType::Q4_K, DType::Q4_K}, {GgmlType::Q5_K, DType::Q5_K},
    {GgmlType::Q6_K, DType::Q6_K},
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
  if (!isGgmlBlock(r->dtype)) {
    floatsToFloat(r->dtype, blocks, elements, out);
    return;
  }
  // Each value as llama.cpp's dequantize_row_* computes it: (code - zero)
  // * scale for the types with a zero code, code * scale - min (Q4_1's
  // q * d + m the same sum) for the others.
  const GgmlTypeInfo info = ggmlTypeInfo(t);
  const int zero = ggmlZeroCode(t), group = ggmlGroupSize(t);
  uint8_t codes[256];
  float scales[16], mins[16]; // a block's groups
  for (int64_t i = 0; i < elements / info.blockElements; ++i) {
    ggmlBlockGroups(t, blocks + i * info.blockBytes, codes, scales, mins);
    float *y = out + i * info.blockElements;
    for (int64_t j = 0; j < info.blockElements; ++j)
      y[j] = zero >= 0 ? float(int(codes[j]) - zero) * scales[j / group]
                       : float(codes[j]) * scales[j / group] - mins[j / group];
  }
}

} // namespace kiln

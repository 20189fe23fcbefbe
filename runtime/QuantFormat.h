//===- QuantFormat.h - quantized weight formats, canonical form -*- C++ -*-===//
//
// A quantized weight W[rows, cols] (cols = the matmul's input dimension K)
// in kiln's canonical form, which every source converts to (--quantize's
// round-to-nearest, GPTQ, AWQ) and every consumer reads (the ref device
// dequantizes it, the runtime repacks it into the layout the kernels load):
//
//   W[r, c] = (codes[r, c] - zero(r, g)) * scales[r, g],  g = group of c
//
// int8/int4: codes are unsigned (0..255, 0..15); zero(r, g) is zeros[r, g]
// with zero points, else the middle code (128, 8). fp8: codes are e4m3
// bits, W[r, c] = e4m3(codes[r, c]) * scales[r, 0] (one group, no zeros).
// With mins (llama.cpp's Q4_1, Q5_1 and K-quants, whose group scales and
// offsets f16 cannot hold) the scales are f32 and each group has an f32
// min: W[r, c] = codes[r, c] * scales[r, g] - mins[r, g], in f32 as
// llama.cpp computes it.
// The group of column c is c / group (group 0: the whole row), or gIdx[c]
// when a GPTQ act-order checkpoint gives one. docs/quantization.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_QUANTFORMAT_H
#define KILN_RUNTIME_QUANTFORMAT_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class QuantKind { Int8, Int4, FP8 };

struct QuantFormat {
  QuantKind kind = QuantKind::Int8;
  int64_t group = 0;       // columns a scale covers; 0: the whole row
  bool zeroPoints = false; // int8/int4 only
  /// GPTQ's act-order (desc_act): the groups are column sets that g_idx
  /// names, so the kernels' buffer holds the columns permuted to make each
  /// group contiguous, and the permutation (QuantLayout.h). Needs a group.
  bool actOrder = false;
  /// f32 scales and an f32 min per group, W = code * scale - min (int8 and
  /// int4 with a group; no zero points, no act-order).
  bool mins = false;

  int bits() const { return kind == QuantKind::Int4 ? 4 : 8; }
  /// The code of zero without zero points (and the symmetric codes' middle);
  /// with mins, 0 (the code a padding row holds, its scale and min 0).
  int middle() const { return mins ? 0 : kind == QuantKind::Int4 ? 8 : 128; }
  /// Bytes of a group's scale (and of its min, with mins).
  int scaleBytes() const { return mins ? 4 : 2; }
  int64_t groups(int64_t cols) const { return group ? cols / group : 1; }
  /// Bytes of a [rows, cols] weight in this format: its codes, scales and
  /// zero points (what a matmul reads of it).
  int64_t bytes(int64_t rows, int64_t cols) const {
    return rows * (cols * bits() / 8 +
                   groups(cols) * (scaleBytes() * (1 + mins) + zeroPoints)) +
           (actOrder ? cols * 2 : 0);
  }
  /// "int8", "int8-g128", "int4-g128", "int4-g128-zp", "int4" (whole row),
  /// "int4-g32-min", "fp8"; "-act" last for act-order: --quantize's
  /// spelling (without -act), the bundle's and the IR's.
  std::string name() const;
  /// The inverse of name(); nullopt for anything else (a group of 0, a
  /// zero point on fp8, fp8 with a group, act-order without a group, mins
  /// without a group or with zero points or act-order).
  static std::optional<QuantFormat> parse(std::string_view text);
  bool operator==(const QuantFormat &) const = default;
};

/// The formats --quantize accepts, for its error message.
const char *quantFormatChoices();

/// A quantized [rows, cols] matrix in canonical form (above).
struct QuantizedMatrix {
  QuantFormat format;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> codes;          // [rows, cols]
  std::vector<uint16_t> scales;        // [rows, groups] f16 bits, without mins
  std::vector<uint8_t> zeros;          // [rows, groups], with zero points only
  std::vector<float> wideScales, mins; // [rows, groups] f32, with mins only
  std::vector<int32_t> gIdx;           // [cols] group of each column, or empty

  int64_t groups() const { return format.groups(cols); }
  int64_t groupOf(int64_t c) const {
    return gIdx.empty() ? (format.group ? c / format.group : 0) : gIdx[c];
  }
  /// W[r, c], exact in float32 (every code times every f16 scale is; with
  /// mins, code * scale - min rounded once, as llama.cpp computes it).
  float value(int64_t r, int64_t c) const;
  /// Every W[r, c] into out[rows * cols], row-major.
  void dequantize(float *out) const;
  /// Rows [first, first + count): a tensor-parallel rank's slice of a
  /// column-parallel weight (docs/tensor-parallel.md).
  QuantizedMatrix rowSlice(int64_t first, int64_t count) const;
  /// Columns [first, first + count) of every row, a row-parallel rank's:
  /// whole groups only (first and count multiples of the group, no
  /// act-order), so every value and scale is the whole matrix's.
  QuantizedMatrix columnSlice(int64_t first, int64_t count) const;
};

/// e4m3 (fp8, no infinities, one NaN code pair) bits to float, exact.
float e4m3ToFloat(uint8_t bits);
/// float to e4m3 bits, rounding to nearest even and saturating at +-448 (as
/// cvt.rn.satfinite.e4m3x2.f32 and torch's float8_e4m3fn conversion do for
/// finite inputs).
uint8_t floatToE4m3(float f);

/// Round-to-nearest quantization of w[rows, cols] (row-major floats) to
/// `format` (no gIdx), as kiln compile|run --quantize does; the scales are
/// rounded to f16 first and the codes computed with the rounded scale, so
/// dequantize() is what the kernels compute with (with mins: the range
/// [lo, hi] in 2^b - 1 steps of an f32 scale, min = -lo).
/// docs/quantization.md has the rule for each format.
QuantizedMatrix quantizeRoundToNearest(const float *w, int64_t rows,
                                       int64_t cols, QuantFormat format);

} // namespace kiln

#endif // KILN_RUNTIME_QUANTFORMAT_H

//===- QuantLayout.h - a quantized weight as the kernels load it -*- C++
//-*-===//
//
// The device buffer of a quantized weight W[rows, cols], in sections that
// each start 16-byte aligned (docs/quantization.md draws them):
//
//   codes   [rows / 16 tiles][cols / 64 (int4) or / 32 (int8, fp8)]
//           [32 lanes][16 bytes]: lane L's 16 bytes are its mma.m16n8k16
//           A fragments of 16 rows x 16 columns, four k-steps (int4) or two
//           (8-bit) of them, so that a warp's loads are 512 bytes in a row;
//   scales  [tiles][groups][8][2] f16 (f32 with mins): rows g and g + 8 of
//           a tile side by side, a lane's pair one 4-byte (8-byte) load;
//   zeros   [tiles][groups][8][2] u8, with zero points only;
//   mins    [tiles][groups][8][2] f32, with mins only;
//   norm    [cols] f16: the folded RMSNorm weight, which a quantized matrix
//           cannot absorb (its scales run along the rows), applied to x;
//   perm    [cols] u16, act-order only: column j of the buffer is column
//           perm[j] of W (and the norm section is permuted alike), so that
//           each g_idx group's columns are contiguous; the kernels gather x.
//
// Rows are padded to whole tiles (zero codes at the middle, zero scales,
// zero mins).
// Within a lane's fragment (g = L / 4, t = L % 4) element a_i is row
// g + 8 * ((i / 2) % 2), column 2t + (i % 2) + 8 * (i / 4): int4 puts a_0..a_7
// in the nibbles 0, 4, 1, 5, 2, 6, 3, 7 of a 32-bit word (the dequantizing
// masks then yield f16 pairs in order), 8-bit formats in bytes 0..7.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_QUANTLAYOUT_H
#define KILN_RUNTIME_QUANTLAYOUT_H

#include "runtime/QuantFormat.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// Byte offsets of the sections of a quantized buffer (0 and absent when a
/// section is not there).
struct QuantLayout {
  int64_t tiles = 0, groups = 0;
  int64_t codes = 0, scales = 0, zeros = 0, mins = 0, norm = 0, perm = 0,
          bytes = 0;
  bool hasZeros = false, hasMins = false, hasNorm = false, hasPerm = false;
};

/// Columns a quantized weight's columns must be a multiple of (a lane's
/// 16-byte load covers this many).
constexpr int64_t kQuantColumnMultiple = 64;

/// The layout of a [rows, cols] buffer of `format`, with the norm section
/// when `norm` (and the permutation with act-order); cols must be a
/// multiple of kQuantColumnMultiple.
QuantLayout quantLayout(const QuantFormat &format, int64_t rows, int64_t cols,
                        bool norm);

/// An empty string, or why `format` cannot hold a [rows, cols] weight (the
/// group does not divide the columns, the columns are not a multiple of 64).
std::string quantShapeError(const QuantFormat &format, int64_t cols);

/// The device buffer of `q` in the layout above, with `norm` ([cols] f16
/// bits) when given. With act-order (q.format.actOrder) the columns are
/// sorted by their group, stably (q.gIdx; none: the identity); q.gIdx must
/// then hold exactly `group` columns a group. Without it q.gIdx is empty.
std::vector<uint8_t> packForKernels(const QuantizedMatrix &q,
                                    const uint16_t *norm);

} // namespace kiln

#endif // KILN_RUNTIME_QUANTLAYOUT_H

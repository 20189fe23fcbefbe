//===- QuantLayout.cpp ----------------------------------------------------===//
#include "runtime/QuantLayout.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace kiln {
namespace {
int64_t align16(int64_t n) { return (n + 15) / 16 * 16; }

/// Row and column (within the tile and k-step) of lane L's element a_i.
void fragmentElement(int lane, int i, int &row, int &col) {
  int g = lane / 4, t = lane % 4;
  row = g + 8 * ((i / 2) % 2);
  col = 2 * t + (i % 2) + 8 * (i / 4);
}
} // namespace

QuantLayout quantLayout(const QuantFormat &format, int64_t rows, int64_t cols,
                        bool norm) {
  QuantLayout l;
  l.tiles = (rows + 15) / 16;
  l.groups = format.groups(cols);
  l.codes = 0;
  l.scales = align16(l.tiles * 16 * cols * format.bits() / 8);
  const int64_t entries = l.tiles * l.groups * 16; // a tile's 16 rows
  int64_t end = align16(l.scales + entries * format.scaleBytes());
  if (format.zeroPoints) {
    l.hasZeros = true;
    l.zeros = end;
    end = align16(end + entries);
  }
  if (format.mins) {
    l.hasMins = true;
    l.mins = end;
    end = align16(end + entries * 4);
  }
  if (norm) {
    l.hasNorm = true;
    l.norm = end;
    end = align16(end + cols * 2);
  }
  if (format.actOrder) {
    l.hasPerm = true;
    l.perm = end;
    end = align16(end + cols * 2);
  }
  l.bytes = end;
  return l;
}

std::string quantShapeError(const QuantFormat &format, int64_t cols) {
  if (format.group && cols % format.group)
    return "group " + std::to_string(format.group) + " does not divide its " +
           std::to_string(cols) + " columns";
  if (format.group % 16)
    return "its group of " + std::to_string(format.group) +
           " columns is not a multiple of 16 (an mma's k-step)";
  if (format.actOrder && cols > 65535)
    return "act-order's permutation holds column numbers below 65536, not " +
           std::to_string(cols);
  if (cols % kQuantColumnMultiple)
    return "its " + std::to_string(cols) + " columns are not a multiple of " +
           std::to_string(kQuantColumnMultiple) +
           " (what the quantized kernels load at once)";
  return "";
}

std::vector<uint8_t> packForKernels(const QuantizedMatrix &q,
                                    const uint16_t *norm) {
  const QuantFormat &f = q.format;
  // Act-order: buffer column j is W's column perm[j], groups contiguous.
  std::vector<uint16_t> perm;
  if (f.actOrder) {
    perm.resize(q.cols);
    std::iota(perm.begin(), perm.end(), uint16_t(0));
    // By group, then column: a stable order (std::stable_sort's buffer
    // is deprecated in this libstdc++).
    std::sort(perm.begin(), perm.end(), [&](uint16_t a, uint16_t b) {
      return std::make_pair(q.groupOf(a), a) < std::make_pair(q.groupOf(b), b);
    });
  }
  auto column = [&](int64_t j) -> int64_t {
    return perm.empty() ? j : perm[j];
  };
  QuantLayout l = quantLayout(f, q.rows, q.cols, norm != nullptr);
  std::vector<uint8_t> out(l.bytes, 0);
  const int64_t kSteps = q.cols / 16, groups = l.groups;
  const bool int4 = f.kind == QuantKind::Int4;
  // A code of the padded rows: zero's (the scale is 0 there anyway).
  auto code = [&](int64_t r, int64_t c) -> uint8_t {
    if (r < q.rows)
      return q.codes[r * q.cols + column(c)];
    return f.kind == QuantKind::FP8 ? 0 : uint8_t(f.middle());
  };
  // Nibble of a_i in an int4 word: a_0..a_7 in nibbles 0, 4, 1, 5, 2, 6, 3, 7.
  static constexpr int kNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int64_t tile = 0; tile < l.tiles; ++tile)
    for (int64_t s = 0; s < kSteps; ++s)
      for (int lane = 0; lane < 32; ++lane) {
        // int4: 4 k-steps a 16-byte load, 4 bytes each; 8-bit: 2, 8 bytes.
        int64_t perLoad = int4 ? 4 : 2, stepBytes = int4 ? 4 : 8;
        int64_t at =
            ((tile * (kSteps / perLoad) + s / perLoad) * 32 + lane) * 16 +
            (s % perLoad) * stepBytes;
        uint32_t word = 0;
        for (int i = 0; i < 8; ++i) {
          int row, col;
          fragmentElement(lane, i, row, col);
          uint8_t c = code(tile * 16 + row, s * 16 + col);
          if (int4)
            word |= uint32_t(c & 15) << (4 * kNibble[i]);
          else
            out[at + i] = c;
        }
        if (int4)
          std::memcpy(&out[at], &word, 4);
      }
  for (int64_t tile = 0; tile < l.tiles; ++tile)
    for (int64_t g = 0; g < groups; ++g)
      for (int r = 0; r < 16; ++r) {
        int64_t row = tile * 16 + r;
        // Entry [tile][g][r % 8][r / 8].
        int64_t entry = (tile * groups + g) * 16 + (r % 8) * 2 + r / 8;
        if (f.mins) {
          float scale = row < q.rows ? q.wideScales[row * groups + g] : 0.0f,
                min = row < q.rows ? q.mins[row * groups + g] : 0.0f;
          std::memcpy(&out[l.scales + entry * 4], &scale, 4);
          std::memcpy(&out[l.mins + entry * 4], &min, 4);
        } else {
          uint16_t scale = row < q.rows ? q.scales[row * groups + g] : 0;
          std::memcpy(&out[l.scales + entry * 2], &scale, 2);
        }
        if (l.hasZeros)
          out[l.zeros + entry] =
              row < q.rows ? q.zeros[row * groups + g] : uint8_t(f.middle());
      }
  if (norm)
    for (int64_t j = 0; j < q.cols; ++j)
      std::memcpy(&out[l.norm + 2 * j], &norm[column(j)], 2);
  if (l.hasPerm)
    std::memcpy(&out[l.perm], perm.data(), q.cols * 2);
  return out;
}

} // namespace kiln

// The kernels' layout of a quantized weight (runtime/QuantLayout.h), read
// back as its comment draws it: every code at its lane, k-step and nibble
// or byte, every scale, zero and min at its tile entry, the norm and, with
// act-order, the permutation that makes each g_idx group contiguous.
#include "runtime/QuantLayout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

using namespace kiln;

namespace {

/// A random matrix of `format` with random codes, scales and zeros; with
/// act-order a random g_idx whose groups hold `group` columns each.
QuantizedMatrix randomMatrix(QuantFormat format, int64_t rows, int64_t cols,
                             uint32_t seed) {
  std::mt19937 rng(seed);
  QuantizedMatrix q;
  q.format = format;
  q.rows = rows;
  q.cols = cols;
  int maxCode = (1 << format.bits()) - 1;
  for (int64_t i = 0; i < rows * cols; ++i)
    q.codes.push_back(uint8_t(rng() % (maxCode + 1)));
  for (int64_t i = 0; i < rows * q.groups(); ++i) {
    if (format.mins) {
      q.wideScales.push_back(float(rng() % 1000 + 1) * 1e-5f);
      q.mins.push_back(float(int(rng() % 1000) - 500) * 1e-4f);
      continue;
    }
    q.scales.push_back(uint16_t(0x2000 + rng() % 0x1000)); // small, positive
    if (format.zeroPoints)
      q.zeros.push_back(uint8_t(rng() % (maxCode + 1)));
  }
  if (format.actOrder) {
    for (int64_t c = 0; c < cols; ++c)
      q.gIdx.push_back(int32_t(c / format.group));
    std::shuffle(q.gIdx.begin(), q.gIdx.end(), rng);
  }
  return q;
}

/// Row and column of lane L's element a_i in a 16 x 16 piece (PTX's
/// mma.m16n8k16 A fragment, row-major).
void element(int lane, int i, int &row, int &col) {
  int g = lane / 4, t = lane % 4;
  row = g + (i == 2 || i == 3 || i == 6 || i == 7 ? 8 : 0);
  col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
}

void expectLayout(const QuantizedMatrix &q, bool withNorm) {
  const QuantFormat &f = q.format;
  std::vector<uint16_t> norm(q.cols);
  std::iota(norm.begin(), norm.end(), uint16_t(0x3c00));
  std::vector<uint8_t> buf =
      packForKernels(q, withNorm ? norm.data() : nullptr);
  QuantLayout l = quantLayout(f, q.rows, q.cols, withNorm);
  ASSERT_EQ(int64_t(buf.size()), l.bytes);
  for (int64_t at : {l.scales, l.zeros, l.mins, l.norm, l.perm})
    EXPECT_EQ(at % 16, 0);

  // The buffer's column j is W's column perm[j].
  std::vector<uint16_t> perm(q.cols);
  std::iota(perm.begin(), perm.end(), uint16_t(0));
  if (f.actOrder) {
    ASSERT_TRUE(l.hasPerm);
    std::memcpy(perm.data(), &buf[l.perm], q.cols * 2);
    std::vector<uint16_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t c = 0; c < q.cols; ++c)
      ASSERT_EQ(sorted[c], c) << "the permutation repeats a column";
    for (int64_t j = 0; j < q.cols; ++j)
      ASSERT_EQ(q.groupOf(perm[j]), j / f.group)
          << "buffer column " << j << " is not in group " << j / f.group;
  }

  const bool int4 = f.kind == QuantKind::Int4;
  const int64_t kSteps = q.cols / 16, perLoad = int4 ? 4 : 2;
  for (int64_t tile = 0; tile < l.tiles; ++tile)
    for (int64_t s = 0; s < kSteps; ++s)
      for (int lane = 0; lane < 32; ++lane) {
        const uint8_t *load =
            &buf[((tile * (kSteps / perLoad) + s / perLoad) * 32 + lane) * 16];
        static const int nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
        for (int i = 0; i < 8; ++i) {
          int row, col;
          element(lane, i, row, col);
          int64_t r = tile * 16 + row, c = s * 16 + col;
          int code;
          if (int4) {
            uint32_t word;
            std::memcpy(&word, load + (s % perLoad) * 4, 4);
            code = (word >> (4 * nibble[i])) & 15;
          } else {
            code = load[(s % perLoad) * 8 + i];
          }
          int want = r < q.rows                 ? q.codes[r * q.cols + perm[c]]
                     : f.kind == QuantKind::FP8 ? 0
                                                : f.middle();
          ASSERT_EQ(code, want) << "tile " << tile << " k-step " << s
                                << " lane " << lane << " a" << i;
        }
      }
  for (int64_t tile = 0; tile < l.tiles; ++tile)
    for (int64_t g = 0; g < l.groups; ++g)
      for (int row = 0; row < 16; ++row) {
        int64_t r = tile * 16 + row;
        // Lane g's pair: rows g and g + 8.
        int64_t entry = (tile * l.groups + g) * 16 + (row % 8) * 2 + row / 8;
        if (f.mins) { // f32 scales and mins, 0 on padding rows
          ASSERT_TRUE(l.hasMins);
          float scale, min;
          std::memcpy(&scale, &buf[l.scales + 4 * entry], 4);
          std::memcpy(&min, &buf[l.mins + 4 * entry], 4);
          EXPECT_EQ(scale, r < q.rows ? q.wideScales[r * l.groups + g] : 0);
          EXPECT_EQ(min, r < q.rows ? q.mins[r * l.groups + g] : 0);
          continue;
        }
        uint16_t scale;
        std::memcpy(&scale, &buf[l.scales + 2 * entry], 2);
        EXPECT_EQ(scale, r < q.rows ? q.scales[r * l.groups + g] : 0);
        if (f.zeroPoints)
          EXPECT_EQ(buf[l.zeros + entry],
                    r < q.rows ? q.zeros[r * l.groups + g] : f.middle());
      }
  if (withNorm)
    for (int64_t j = 0; j < q.cols; ++j) {
      uint16_t h;
      std::memcpy(&h, &buf[l.norm + 2 * j], 2);
      EXPECT_EQ(h, norm[perm[j]]) << "norm column " << j;
    }
}

} // namespace

TEST(QuantLayout, EveryFormatReadsBackAsDrawn) {
  uint32_t seed = 1;
  for (const char *name :
       {"int4-g32", "int4-g64-zp", "int4", "int8", "int8-g32-zp", "fp8",
        "int4-g32-zp-act", "int8-g64-act", "int4-g32-min", "int8-g16-min"}) {
    SCOPED_TRACE(name);
    auto f = QuantFormat::parse(name);
    ASSERT_TRUE(f);
    // 20 rows: a tile and a padded one.
    expectLayout(randomMatrix(*f, 20, 128, seed++), /*withNorm=*/true);
    expectLayout(randomMatrix(*f, 32, 192, seed++), /*withNorm=*/false);
  }
}

TEST(QuantLayout, ShapesItCannotHold) {
  EXPECT_EQ(quantShapeError(*QuantFormat::parse("int4-g128"), 64),
            "group 128 does not divide its 64 columns");
  EXPECT_EQ(quantShapeError(*QuantFormat::parse("int8"), 96),
            "its 96 columns are not a multiple of 64 (what the quantized "
            "kernels load at once)");
  EXPECT_EQ(quantShapeError(*QuantFormat::parse("int4-g24"), 96),
            "its group of 24 columns is not a multiple of 16 (an mma's "
            "k-step)");
  EXPECT_EQ(quantShapeError(*QuantFormat::parse("int4-g128"), 4096), "");
}

TEST(QuantLayout, ActOrderSpellings) {
  auto f = QuantFormat::parse("int4-g128-zp-act");
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->actOrder && f->zeroPoints);
  EXPECT_EQ(f->name(), "int4-g128-zp-act");
  EXPECT_FALSE(QuantFormat::parse("int4-act")); // act-order needs a group
}

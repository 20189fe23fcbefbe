//===- DequantizeWeightTest.cpp - the dequantize kernel against the host --===//
//
// The generated dequantize kernel (codegen/DequantizeWeightKernel.cpp),
// built for the emu device, reading the kernels' buffer of a quantized
// matrix (runtime/QuantLayout.h) and writing W[rows, cols] f16: every
// element must be the canonical form's value (QuantizedMatrix::value) times
// the norm weight, rounded once to f16, at W's own column, bit for bit,
// as the f16 path folds a norm weight (runtime/PlanDevice.cpp); padding
// rows past `rows` untouched. int4 per row and in groups of 64 and 128,
// with zero points, act-order; int8 per row and in groups; with f32
// scales and mins (int4-g32-min, int8-g16-min); fp8; with and
// without the norm section; a tile's loads split over blocks, and several
// passes of a warp's loads; fp8 by bit moves and by sm_89's conversion.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "runtime/DType.h"
#include "runtime/QuantLayout.h"
#include "runtime/emu/EmuCompiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

namespace kiln {
namespace {

/// A [rows, cols] matrix of `format` from random floats, rounded to
/// nearest as --quantize does; with act-order, a random g_idx of `group`
/// columns a group.
QuantizedMatrix quantizedRandom(QuantFormat format, int64_t rows, int64_t cols,
                                uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(rows * cols); // [rows, cols]
  for (float &v : w)
    v = normal(rng);
  QuantFormat plain = format;
  plain.actOrder = false;
  QuantizedMatrix q = quantizeRoundToNearest(w.data(), rows, cols, plain);
  q.format = format;
  if (format.actOrder) {
    for (int64_t c = 0; c < cols; ++c)
      q.gIdx.push_back(int32_t(c / format.group));
    std::shuffle(q.gIdx.begin(), q.gIdx.end(), rng);
  }
  return q;
}

struct Case {
  const char *format;
  int64_t rows, cols;
  bool norm;
  // 1: a block or three a tile, each warp two passes of loads at 2048
  // columns (136 rows of int4, 40 of int8); 64: a tile's loads split.
  int smCount;
  // fp8 by cvt.rn.f16x2.e4m3x2 (sm_89 on; emulated) instead of bit moves.
  bool fp8Cvt = false;
};

class DequantizeWeight : public ::testing::TestWithParam<Case> {};

TEST_P(DequantizeWeight, IsTheCanonicalValueTimesTheNormRoundedOnce) {
  const Case &c = GetParam();
  std::optional<QuantFormat> format = QuantFormat::parse(c.format);
  ASSERT_TRUE(format) << c.format;
  QuantizedMatrix q = quantizedRandom(*format, c.rows, c.cols, 17);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> gain(-2.0f, 2.0f);
  std::vector<uint16_t> norm(c.cols); // [cols] f16, in W's column order
  for (uint16_t &g : norm)
    g = floatToHalf(gain(rng));
  std::vector<uint8_t> buf = packForKernels(q, c.norm ? norm.data() : nullptr);

  CudaKernel k = emitDequantizeWeight(*format, c.rows, c.cols, c.norm,
                                      "test.dequant", c.smCount);
  if (c.smCount > 1)
    EXPECT_GT(k.grid[1], 1) << "the tile's loads are not split";
  std::string source = (c.fp8Cvt ? "#define KILN_FP8_CVT 1\n" : "") + k.source;
  auto fns = compileEmuKernels(
      {{k.kernel, k.entry, source, k.provenance, int(k.params.size())}});
  ASSERT_TRUE(fns.ok()) << fns.status();
  // [tiles * 16, cols] f16: rows past `rows` keep their marker.
  const uint16_t marker = 0x7e00;
  std::vector<uint16_t> out(((c.rows + 15) / 16 * 16) * c.cols, marker);
  void *args[] = {buf.data(), out.data()};
  (*fns)[0](unsigned(k.grid[0]), unsigned(k.grid[1]), unsigned(k.grid[2]),
            unsigned(k.blockThreads), args);

  int64_t wrong = 0;
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t col = 0; col < c.cols; ++col) {
      float g = c.norm ? halfToFloat(norm[col]) : 1.0f;
      uint16_t want = floatToHalf(q.value(r, col) * g);
      uint16_t got = out[r * c.cols + col];
      if (got != want && wrong++ < 8)
        ADD_FAILURE() << c.format << " W[" << r << ", " << col << "]: 0x"
                      << std::hex << got << ", want 0x" << want;
    }
  EXPECT_EQ(wrong, 0);
  EXPECT_TRUE(std::all_of(out.begin() + c.rows * c.cols, out.end(),
                          [&](uint16_t h) { return h == marker; }))
      << "a padding row was written";
}

INSTANTIATE_TEST_SUITE_P(
    Formats, DequantizeWeight,
    ::testing::Values(
        Case{"int4", 40, 256, true, 1}, Case{"int4-g64", 40, 256, true, 1},
        Case{"int4-g128", 16, 256, false, 1},
        Case{"int4-g128-zp", 40, 256, true, 1},
        Case{"int4-g64-zp-act", 40, 256, true, 1},
        Case{"int4-g128-act", 136, 2048, false, 1},
        Case{"int4-g128", 24, 2048, true, 64}, Case{"int8", 40, 256, true, 1},
        Case{"int8-g32-zp", 40, 2048, true, 1},
        Case{"int8-g64-act", 40, 256, true, 1}, Case{"fp8", 40, 256, true, 1},
        Case{"fp8", 24, 2048, false, 64}, Case{"fp8", 40, 256, true, 1, true},
        Case{"int4-g32-min", 40, 256, true, 1},
        Case{"int8-g16-min", 40, 2048, true, 1},
        Case{"int8-g16-min", 24, 2048, false, 64}),
    [](const ::testing::TestParamInfo<Case> &info) {
      std::string name = info.param.format;
      std::replace(name.begin(), name.end(), '-', '_');
      return name + "_" + std::to_string(info.param.cols) +
             (info.param.norm ? "_norm" : "") +
             (info.param.fp8Cvt ? "_cvt" : "");
    });

// The FP8 GEMM's form of an fp8 buffer (quant-gemm=2): codes[rows, cols]
// row-major, each the canonical form's byte unchanged, and the rows'
// scales as f32, exactly; the norm section (when the buffer has one) is
// not multiplied in (the activation quantizer takes it), and nothing is
// written past `rows`.
TEST(DequantizeWeightE4m3, IsTheCodesRowMajorAndTheScalesAsFloat) {
  for (auto [rows, cols, norm, smCount] :
       {std::tuple{40, 256, true, 1}, std::tuple{24, 2048, false, 64},
        std::tuple{136, 2048, true, 1}}) {
    QuantFormat fp8 = *QuantFormat::parse("fp8");
    QuantizedMatrix q = quantizedRandom(fp8, rows, cols, 23);
    std::vector<uint16_t> g(cols, floatToHalf(1.5f)); // [cols] f16
    std::vector<uint8_t> buf = packForKernels(q, norm ? g.data() : nullptr);
    CudaKernel k = emitDequantizeWeight(fp8, rows, cols, norm, "test.fp8w",
                                        smCount, /*e4m3=*/true);
    auto fns = compileEmuKernels({kernelCode(k)});
    ASSERT_TRUE(fns.ok()) << fns.status();
    const int64_t padded = (rows + 15) / 16 * 16;
    std::vector<uint8_t> codes(padded * cols, 0xa5); // [padded, cols]
    std::vector<float> scales(padded, -7.0f);        // [padded]
    void *args[] = {buf.data(), codes.data(), scales.data()};
    (*fns)[0](unsigned(k.grid[0]), unsigned(k.grid[1]), unsigned(k.grid[2]),
              unsigned(k.blockThreads), args);
    EXPECT_TRUE(std::equal(q.codes.begin(), q.codes.end(), codes.begin()))
        << rows << " x " << cols << ": the codes differ";
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_EQ(scales[r], halfToFloat(q.scales[r])) << "row " << r;
    EXPECT_TRUE(std::all_of(codes.begin() + rows * cols, codes.end(),
                            [](uint8_t b) { return b == 0xa5; }))
        << "a padding row's codes were written";
    EXPECT_TRUE(std::all_of(scales.begin() + rows, scales.end(), [](float s) {
      return s == -7.0f;
    })) << "a padding row's scale was written";
  }
}

} // namespace
} // namespace kiln

//===- QuantizeActivationTest.cpp - the W8A8 quantizer against the host ---===//
//
// The generated activation quantizer (codegen/QuantizeActivationKernel.cpp)
// built for the emu device: each row of x[rows, K] f16 (times the norm
// weight g[K] f16 at its byte of the weight buffer, when it has one) must
// give the codes and the f32 scale of the host rule
// (runtime/ActivationQuant.h, itself held to torch in ActivationQuantTest)
// on float(x) * float(g), bit for bit; rows at and past the step's count
// get codes 0 and scale 0. Rows: random, a zero row, an outlier that puts
// the rest in e4m3's subnormals, exact round-half-to-even ties, negative
// maxima; K of 256 (one pass of the block) and 4104 (two passes, a
// partial chunk row).
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "runtime/ActivationQuant.h"
#include "runtime/DType.h"
#include "runtime/emu/EmuCompiler.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace kiln {
namespace {

struct Case {
  int64_t k;
  bool norm;
};

class QuantizeActivation : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeActivation, IsTheHostRuleOfXTimesG) {
  const Case &c = GetParam();
  const int64_t rows = 12, count = 10, normAt = 64; // g after 64 bytes
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> x(rows * c.k); // [rows, K] f16
  for (uint16_t &h : x)
    h = floatToHalf(normal(rng));
  auto row = [&](int64_t r) { return x.data() + r * c.k; };
  std::fill_n(row(1), c.k, floatToHalf(0.0f)); // a zero row
  row(2)[5] = floatToHalf(3000.0f);            // the rest subnormal codes
  for (int64_t i = 0; i < c.k; ++i) {
    // amax 448 makes inv 1, so x lands on its own value. Ties: 336 is
    // halfway from 320 to 352 (to even: 320), 17 * 2^-9 from 16 * 2^-9 to
    // 18 * 2^-9 (to 16 * 2^-9, code 0x10), 0.5 * 2^-9 from 0 to the
    // smallest subnormal (to 0); 0.75 * 2^-9 rounds up to that one.
    const float ties[] = {336.0f, 17.0f / 512.0f, 0.75f / 512.0f, -304.0f,
                          0.5f / 512.0f};
    row(3)[i] = floatToHalf(i == 0 ? 448.0f : ties[i % 5]);
  }
  for (int64_t i = 0; i < c.k; ++i) // a negative maximum
    row(4)[i] = floatToHalf(i == 7 ? -9.5f : 0.25f * normal(rng));
  std::vector<uint8_t> w(normAt + 2 * c.k, 0); // the buffer's norm section
  std::vector<float> g(c.k, 1.0f);             // [K]
  if (c.norm)
    for (int64_t i = 0; i < c.k; ++i) {
      uint16_t h = floatToHalf(i % 3 ? 0.5f + 0.01f * float(i % 50) : 1.0f);
      std::memcpy(w.data() + normAt + 2 * i, &h, 2);
      g[i] = halfToFloat(h);
    }

  CudaKernel k = emitQuantizeActivation(c.k, normAt, c.norm, "test.fp8a");
  auto fns = compileEmuKernels({kernelCode(k)});
  ASSERT_TRUE(fns.ok()) << fns.status();
  std::vector<uint8_t> codes(rows * c.k, 0xa5); // [rows, K]
  std::vector<float> scales(rows, -7.0f);       // [rows]
  int n = int(count);
  void *args[] = {x.data(), w.data(), &n, codes.data(), scales.data()};
  auto grid = k.gridFor(rows);
  (*fns)[0](unsigned(grid[0]), unsigned(grid[1]), unsigned(grid[2]),
            unsigned(k.blockThreads), args);

  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> a(c.k); // [K]: what the row's GEMM multiplies
    for (int64_t i = 0; i < c.k; ++i)
      a[i] = r < count ? halfToFloat(row(r)[i]) * g[i] : 0.0f;
    std::vector<uint8_t> want(c.k); // [K]
    float scale = quantizeActivationRow(a.data(), c.k, want.data());
    EXPECT_EQ(scales[r], scale) << "row " << r;
    int wrong = 0;
    for (int64_t i = 0; i < c.k; ++i)
      if (codes[r * c.k + i] != want[i] && wrong++ < 4)
        ADD_FAILURE() << "row " << r << " column " << i << ": code 0x"
                      << std::hex << int(codes[r * c.k + i]) << ", want 0x"
                      << int(want[i]);
  }
  // The ties rounded to even, as the host rule (and torch) do.
  if (!c.norm) {
    EXPECT_EQ(codes[3 * c.k + 5], floatToE4m3(320.0f)); // 336
    EXPECT_EQ(codes[3 * c.k + 1], 0x10);                // 17 * 2^-9
    EXPECT_EQ(codes[3 * c.k + 2], 1);                   // 0.75 * 2^-9
    EXPECT_EQ(codes[3 * c.k + 4], 0);                   // 0.5 * 2^-9
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, QuantizeActivation,
                         ::testing::Values(Case{256, false}, Case{256, true},
                                           Case{4104, true}),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return "k" + std::to_string(info.param.k) +
                                  (info.param.norm ? "_norm" : "");
                         });

} // namespace
} // namespace kiln

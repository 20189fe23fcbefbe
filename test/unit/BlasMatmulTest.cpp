// The emu device's cuBLAS stand-in, held to scalar references: every GEMM
// kiln makes (f32 into the workspace, f16 straight into an activation, the
// residual accumulated with beta 1, in place or not; all rows, the real
// rows, the last real row) in kiln's row-major terms, and the column-major
// call in general (transposes, leading dimensions, batch strides, alpha and
// beta), to the bit; the FP8 GEMM (e4m3 A and W, an f32 scale a row of
// each) likewise. What the stand-in does not implement is refused.
#include "runtime/BlasMatmul.h"
#include "runtime/DType.h"
#include "runtime/QuantFormat.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace kiln {
namespace {

std::vector<uint16_t> randomHalves(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> out(n);
  for (uint16_t &h : out)
    h = floatToHalf(u(rng));
  return out;
}

constexpr uint16_t kUntouched = 0x7e00; // a NaN no GEMM writes
constexpr float kUntouchedF = -12345.0f;

struct KilnCase {
  GemmRows rows;
  int beta;
  bool f16Out, inPlace;
  int64_t count;
};

std::string name(const KilnCase &c) {
  return std::string(c.rows == GemmRows::All     ? "all"
                     : c.rows == GemmRows::Count ? "count"
                                                 : "last") +
         (c.beta ? " +C" : "") + (c.f16Out ? " f16" : " f32") +
         (c.inPlace ? " in place" : "") + " count " + std::to_string(c.count);
}

// Row-major D[r, j] = round(sum_p A[r, p] W[j, p] (+ C[r, j])) for the rows
// the shape multiplies; every other row untouched.
TEST(BlasMatmul, EveryGemmKilnMakesMatchesTheRowMajorReference) {
  const int64_t m = 12, n = 40, k = 24;
  const KilnCase cases[] = {
      {GemmRows::All, 0, false, false, 12}, // f32 into the workspace
      {GemmRows::Count, 0, false, false, 5},
      {GemmRows::Last, 0, false, false, 5}, // the LM head's last row
      {GemmRows::Count, 1, true, false, 7}, // o_proj / down_proj residual
      {GemmRows::All, 1, true, false, 12},  // the same in a batch plan
      {GemmRows::Count, 1, true, true, 3},  // the residual updated in place
      {GemmRows::Last, 1, true, false, 9},
      {GemmRows::Count, 0, true, false, 4},  // a plain linear, f16
      {GemmRows::Count, 1, false, false, 6}, // f32 result and residual
      {GemmRows::Last, 0, true, false, 1},
  };
  std::vector<uint16_t> a = randomHalves(m * k, 1), w = randomHalves(n * k, 2),
                        c16 = randomHalves(m * n, 3);
  std::vector<float> c32(m * n);
  for (int64_t i = 0; i < m * n; ++i)
    c32[i] = halfToFloat(c16[i]) * 3.0f;
  for (const KilnCase &t : cases) {
    SCOPED_TRACE(name(t));
    GemmShape g{m, n, k, -1};
    g.rows = t.rows;
    g.beta = t.beta;
    g.f16Out = t.f16Out;
    std::vector<uint16_t> d16(m * n, kUntouched);
    std::vector<float> d32(m * n, kUntouchedF);
    std::vector<uint16_t> c16Copy = c16;
    std::vector<float> c32Copy = c32;
    if (t.inPlace) {
      d16 = c16;
      d32 = c32;
    }
    void *d = t.f16Out ? static_cast<void *>(d16.data()) : d32.data();
    void *c = !t.beta     ? nullptr
              : t.inPlace ? d
              : t.f16Out  ? static_cast<void *>(c16Copy.data())
                          : c32Copy.data();
    BlasMatmul mm = blasMatmulOf(g, t.count, a.data(), w.data(), d, c);
    ASSERT_TRUE(emuBlasMatmul(mm).ok()) << emuBlasMatmul(mm);
    int64_t first = t.rows == GemmRows::Last ? t.count - 1 : 0;
    int64_t last = t.rows == GemmRows::All ? m : t.count;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) {
        int64_t at = r * n + j;
        bool done = r >= first && r < last;
        float acc = 0.0f;
        for (int64_t p = 0; p < k; ++p)
          acc += halfToFloat(a[r * k + p]) * halfToFloat(w[j * k + p]);
        float y = acc;
        if (t.beta)
          y += t.f16Out ? halfToFloat(c16[at]) : c32[at];
        if (t.f16Out) {
          uint16_t want = done        ? floatToHalf(y)
                          : t.inPlace ? c16[at]
                                      : kUntouched;
          ASSERT_EQ(d16[at], want) << "row " << r << " column " << j;
        } else {
          float want = done ? y : t.inPlace ? c32[at] : kUntouchedF;
          ASSERT_EQ(d32[at], want) << "row " << r << " column " << j;
        }
      }
    // C is read, never written, when it is not D.
    EXPECT_EQ(c16Copy, c16);
    EXPECT_EQ(c32Copy, c32);
  }
}

// The FP8 GEMM (quant-gemm=2): row-major D[r, j] = round(sW[j] sA[r]
// sum_p e4m3(A[r, p]) e4m3(W[j, p]) (+ C[r, j])) over the rows the shape
// multiplies, A's scale pointer moved down with A; every other row
// untouched.
TEST(BlasMatmul, Fp8GemmIsTheScaledSumOfTheDecodedCodes) {
  const int64_t m = 12, n = 40, k = 32;
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> byte(0, 255);
  auto codes = [&](int64_t count) {
    std::vector<uint8_t> out(count);
    for (uint8_t &b : out) {
      b = uint8_t(byte(rng));
      if ((b & 0x7f) == 0x7f) // e4m3's NaN codes: no quantizer writes them
        b ^= 1;
    }
    return out;
  };
  std::vector<uint8_t> a = codes(m * k), w = codes(n * k);
  std::vector<float> sa(m), sw(n);
  for (int64_t i = 0; i < m; ++i)
    sa[i] = 0.01f * float(i + 1);
  for (int64_t j = 0; j < n; ++j)
    sw[j] = 0.003f * float(j + 2);
  std::vector<uint16_t> c16 = randomHalves(m * n, 4);
  for (const KilnCase &t : {KilnCase{GemmRows::Count, 0, false, false, 7},
                            KilnCase{GemmRows::All, 1, true, false, 12},
                            KilnCase{GemmRows::Last, 1, true, false, 5}}) {
    SCOPED_TRACE(name(t));
    GemmShape g{m, n, k, -1};
    g.rows = t.rows;
    g.beta = t.beta;
    g.f16Out = t.f16Out;
    g.fp8 = true;
    std::vector<uint16_t> d16(m * n, kUntouched);
    std::vector<float> d32(m * n, kUntouchedF);
    void *d = t.f16Out ? static_cast<void *>(d16.data()) : d32.data();
    BlasMatmul mm =
        blasMatmulOf(g, t.count, a.data(), w.data(), d,
                     t.beta ? c16.data() : nullptr, sa.data(), sw.data());
    ASSERT_TRUE(emuBlasMatmul(mm).ok()) << emuBlasMatmul(mm);
    int64_t first = t.rows == GemmRows::Last ? t.count - 1 : 0;
    int64_t last = t.rows == GemmRows::All ? m : t.count;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) {
        int64_t at = r * n + j;
        float acc = 0.0f;
        for (int64_t p = 0; p < k; ++p)
          acc += e4m3ToFloat(a[r * k + p]) * e4m3ToFloat(w[j * k + p]);
        float y = sw[j] * sa[r] * acc;
        if (t.beta)
          y += halfToFloat(c16[at]);
        bool done = r >= first && r < last;
        if (t.f16Out)
          ASSERT_EQ(d16[at], done ? floatToHalf(y) : kUntouched)
              << "row " << r << " column " << j;
        else
          ASSERT_EQ(d32[at], done ? y : kUntouchedF)
              << "row " << r << " column " << j;
      }
  }
}

// The column-major call as cuBLAS defines it, from the logical matrices
// op(A) [m, k] and op(B) [k, n] stored with a transpose, a leading
// dimension past the rows and a batch stride past the matrix.
TEST(BlasMatmul, ColumnMajorCallHonoursTransposesLeadingDimsAndBatches) {
  const int64_t m = 7, n = 5, k = 9, batches = 3;
  for (BlasOp ta : {BlasOp::N, BlasOp::T})
    for (BlasOp tb : {BlasOp::N, BlasOp::T})
      for (BlasType out : {BlasType::F16, BlasType::F32})
        for (float beta : {0.0f, 1.0f, -0.5f}) {
          SCOPED_TRACE(testing::Message()
                       << "transA " << int(ta) << " transB " << int(tb)
                       << " out " << int(out) << " beta " << beta);
          // Logical op(A)[b][i][p], op(B)[b][p][j], C[b][i][j].
          std::vector<uint16_t> la = randomHalves(batches * m * k, 4),
                                lb = randomHalves(batches * k * n, 5),
                                lc = randomHalves(batches * m * n, 6);
          // Stored column-major: A as [m, k] (N) or [k, m] (T), ld + 3.
          auto store = [&](const std::vector<uint16_t> &logical, int64_t r,
                           int64_t cols, BlasOp op, BlasMatrix &x,
                           std::vector<uint16_t> &bytes) {
            int64_t sr = op == BlasOp::N ? r : cols,
                    sc = op == BlasOp::N ? cols : r;
            x = {nullptr, BlasType::F16, sr, sc, sr + 3, (sr + 3) * sc + 11};
            bytes.assign(x.batchStride * batches, kUntouched);
            for (int64_t b = 0; b < batches; ++b)
              for (int64_t i = 0; i < r; ++i)
                for (int64_t j = 0; j < cols; ++j) {
                  int64_t si = op == BlasOp::N ? i : j,
                          sj = op == BlasOp::N ? j : i;
                  bytes[b * x.batchStride + sj * x.ld + si] =
                      logical[(b * r + i) * cols + j];
                }
            x.data = bytes.data();
          };
          BlasMatmul mm;
          mm.transA = ta;
          mm.transB = tb;
          mm.m = m;
          mm.n = n;
          mm.k = k;
          mm.batchCount = batches;
          mm.alpha = 0.75f;
          mm.beta = beta;
          std::vector<uint16_t> sa, sb, sc16;
          store(la, m, k, ta, mm.a, sa);
          store(lb, k, n, tb, mm.b, sb);
          store(lc, m, n, BlasOp::N, mm.c, sc16);
          std::vector<float> sc32(sc16.size());
          for (size_t i = 0; i < sc16.size(); ++i)
            sc32[i] = halfToFloat(sc16[i]);
          mm.c.type = out;
          if (out == BlasType::F32)
            mm.c.data = sc32.data();
          mm.d = mm.c;
          std::vector<uint16_t> d16(sc16.size(), kUntouched);
          std::vector<float> d32(sc16.size(), kUntouchedF);
          mm.d.data = out == BlasType::F16 ? static_cast<void *>(d16.data())
                                           : d32.data();
          absl::Status s = emuBlasMatmul(mm);
          ASSERT_TRUE(s.ok()) << s;
          for (int64_t b = 0; b < batches; ++b)
            for (int64_t i = 0; i < m + 3; ++i)
              for (int64_t j = 0; j < n; ++j) {
                int64_t at = b * mm.d.batchStride + j * mm.d.ld + i;
                if (i >= m) { // the padding of the leading dimension
                  if (out == BlasType::F16)
                    ASSERT_EQ(d16[at], kUntouched);
                  else
                    ASSERT_EQ(d32[at], kUntouchedF);
                  continue;
                }
                float acc = 0.0f;
                for (int64_t p = 0; p < k; ++p)
                  acc += halfToFloat(la[(b * m + i) * k + p]) *
                         halfToFloat(lb[(b * k + p) * n + j]);
                float y = mm.alpha * acc;
                if (beta != 0.0f)
                  y += beta * halfToFloat(lc[(b * m + i) * n + j]);
                if (out == BlasType::F16)
                  ASSERT_EQ(d16[at], floatToHalf(y))
                      << b << " " << i << " " << j;
                else
                  ASSERT_EQ(d32[at], y) << b << " " << i << " " << j;
              }
        }
}

// kiln's GEMM in cuBLAS's terms: W^T . A^T with W [k, n] and A [k, rows].
TEST(BlasMatmul, KilnsGemmIsTheTransposedColumnMajorCall) {
  GemmShape g{16, 40, 24, 3};
  g.rows = GemmRows::Last;
  g.beta = 1;
  g.f16Out = true;
  // Buffers that hold row 8 (the pointers moved down must stay inside).
  static char a[9 * 24 * 2], w[1], d[9 * 40 * 2], c[9 * 40 * 2];
  BlasMatmul mm = blasMatmulOf(g, 9, a, w, d, c);
  EXPECT_EQ(mm.transA, BlasOp::T);
  EXPECT_EQ(mm.transB, BlasOp::N);
  EXPECT_EQ(mm.m, 40);
  EXPECT_EQ(mm.n, 1);
  EXPECT_EQ(mm.k, 24);
  EXPECT_EQ(mm.a.data, static_cast<void *>(w));
  EXPECT_EQ(mm.a.rows, 24);
  EXPECT_EQ(mm.a.cols, 40);
  EXPECT_EQ(mm.a.ld, 24);
  // Row 8 of A (f16) and of C and D (f16).
  EXPECT_EQ(mm.b.data, static_cast<void *>(a + 8 * 24 * 2));
  EXPECT_EQ(mm.b.ld, 24);
  EXPECT_EQ(mm.c.data, static_cast<void *>(c + 8 * 40 * 2));
  EXPECT_EQ(mm.d.data, static_cast<void *>(d + 8 * 40 * 2));
  EXPECT_EQ(mm.d.ld, 40);
  EXPECT_EQ(mm.d.type, BlasType::F16);
  EXPECT_EQ(mm.c.type, BlasType::F16);
  EXPECT_EQ(mm.compute, BlasCompute::F32);
  EXPECT_EQ(mm.epilogue, BlasEpilogue::Default);
  EXPECT_EQ(mm.beta, 1.0f);
  EXPECT_EQ(mm.algo, 3);
  EXPECT_TRUE(mm.usesLt());
  // cublasGemmEx serves an f32 D of its own (C is D); a D apart from C
  // needs cuBLASLt even without an algorithm.
  GemmShape plain{16, 40, 24, -1};
  EXPECT_FALSE(blasMatmulOf(plain, 16, a, w, d, nullptr).usesLt());
  g.algo = -1;
  EXPECT_TRUE(blasMatmulOf(g, 9, a, w, d, c).usesLt());
  EXPECT_EQ(describeGemm(g), "[16, 24] . [40, 24]^T + C -> f16, row count - 1");
  EXPECT_EQ(describeGemm(plain), "[16, 24] . [40, 24]^T");
}

TEST(BlasMatmul, WhatTheStandInDoesNotImplementIsRefused) {
  std::vector<uint16_t> a = randomHalves(8 * 4, 7), w = randomHalves(6 * 4, 8);
  std::vector<float> d(8 * 6);
  GemmShape g{8, 6, 4, -1};
  auto good = [&] {
    return blasMatmulOf(g, 8, a.data(), w.data(), d.data(), nullptr);
  };
  ASSERT_TRUE(emuBlasMatmul(good()).ok());
  auto refused = [&](BlasMatmul mm, const std::string &why) {
    absl::Status s = emuBlasMatmul(mm);
    EXPECT_FALSE(s.ok()) << why;
    EXPECT_NE(std::string(s.message()).find(why), std::string::npos)
        << s.message();
  };
  BlasMatmul mm = good();
  mm.compute = BlasCompute::F16;
  refused(mm, "CUBLAS_COMPUTE_32F");
  mm = good();
  mm.epilogue = BlasEpilogue::Relu;
  refused(mm, "CUBLASLT_EPILOGUE_DEFAULT");
  mm = good();
  mm.a.type = BlasType::F32;
  refused(mm, "A and B must both be f16 or both e4m3");
  // The FP8 GEMM: both inputs e4m3 and both scales, TN, k a multiple of 16.
  std::vector<uint8_t> a8(16 * 16), w8(6 * 16);
  std::vector<float> s8(16, 1.0f), d8(16 * 6);
  GemmShape g8{16, 6, 16, -1};
  g8.fp8 = true;
  auto fp8 = [&] {
    return blasMatmulOf(g8, 16, a8.data(), w8.data(), d8.data(), nullptr,
                        s8.data(), s8.data());
  };
  ASSERT_TRUE(emuBlasMatmul(fp8()).ok()) << emuBlasMatmul(fp8());
  mm = fp8();
  mm.scaleB = nullptr;
  refused(mm, "e4m3 inputs take both outer-vector scales");
  mm = good();
  mm.scaleA = s8.data();
  refused(mm, "f16 inputs none");
  mm = fp8();
  mm.b.type = BlasType::F16;
  refused(mm, "A and B must both be f16 or both e4m3");
  mm = fp8();
  mm.k = 8;
  mm.a.rows = mm.b.rows = 8;
  refused(mm, "multiples of 16");
  mm = good();
  mm.beta = 1.0f;
  mm.c.type = BlasType::F16; // C of another type than D
  refused(mm, "C and D");
  mm = good();
  mm.b.ld = 3; // below its 4 rows
  refused(mm, "B's layout");
  mm = good();
  mm.transA = BlasOp::N; // W stored [k, n] is not op(A) [n, k] untransposed
  refused(mm, "A's layout");
  mm = good();
  mm.d.rows = 5;
  refused(mm, "C or D");
  mm = good();
  mm.n = 0;
  refused(mm, "empty");
  mm = good();
  mm.alpha = std::numeric_limits<float>::infinity();
  refused(mm, "finite");
}

} // namespace
} // namespace kiln

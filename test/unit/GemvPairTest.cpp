//===- GemvPairTest.cpp - the decode GEMVs' loop against a scalar sum -----===//
//
// kiln_gemv_pair (codegen/Prelude.cpp), built for the emu device with a
// small staging window so that x is staged in several windows, against
// the dot products in double: every vector width, steps that run past the
// row's end (loads guarded), split-K spans that end inside a step or hold
// nothing, warps without rows in the last block, the RMSNorm scale.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "runtime/emu/EmuCompiler.h"

#include <gtest/gtest.h>

#include <cuda_fp16.h>

#include <cmath>
#include <random>

namespace kiln {
namespace {

struct Case {
  int k, vec, unroll, splitK, rows;
  bool norm;
};

// K, VEC, UNROLL, SPLIT_K, ROWS (pairs a block), NORM.
const Case kCases[] = {
    {1000, 8, 2, 1, 2, true},  // 2 steps, the second past the row's end
    {3000, 4, 3, 3, 2, false}, // split-K spans of 3 steps, 8 windows
    {998, 2, 1, 2, 3, true},   // 4-byte loads, 4 windows
    {333, 1, 4, 1, 1, true},   // 2-byte loads, 1 step
    {4096, 8, 4, 4, 2, false}, // llama2-7b's K, split 4 ways
};
constexpr int kPairs = 5; // the last block of each case has idle warps
constexpr float kEps = 1e-5f;

std::string source() {
  // 512 bytes a window: even the shortest x is staged in several.
  std::string s = "#define KILN_STAGE_BYTES 512\n" + cudaPrelude() + R"cuda(
// x [1, K] f16, w [2 PAIRS, K] f16, out [2 PAIRS] f32.
template <int K, int VEC, int UNROLL, int SPLIT_K, int ROWS, bool NORM>
__device__ void kiln_test_pairs(const __half *x, const __half *w, float *out) {
  constexpr int THREADS = 32 * ROWS * SPLIT_K;
  const int pair = blockIdx.x * ROWS + (threadIdx.x >> 5) / SPLIT_K;
  const bool active = pair < )cuda" +
                  std::to_string(kPairs) + R"cuda(;
  const float2 d = kiln_gemv_pair<K, VEC, UNROLL, SPLIT_K, THREADS, NORM>(
      x, w + (long long)(active ? 2 * pair : 0) * K,
      w + (long long)(active ? 2 * pair + 1 : 0) * K, active, )cuda" +
                  floatLiteral(kEps) + R"cuda();
  if (active && (threadIdx.x >> 5) % SPLIT_K == 0 && (threadIdx.x & 31) == 0) {
    out[2 * pair] = d.x;
    out[2 * pair + 1] = d.y;
  }
}
)cuda";
  for (size_t i = 0; i < std::size(kCases); ++i) {
    const Case &c = kCases[i];
    s += "extern \"C\" __global__ void case" + std::to_string(i) +
         "(const __half *x, const __half *w, float *out) {\n"
         "  kiln_test_pairs<" +
         std::to_string(c.k) + ", " + std::to_string(c.vec) + ", " +
         std::to_string(c.unroll) + ", " + std::to_string(c.splitK) + ", " +
         std::to_string(c.rows) + ", " + (c.norm ? "true" : "false") +
         ">(x, w, out);\n}\n";
  }
  return s;
}

TEST(GemvPair, MatchesTheDotProductsInDouble) {
  std::vector<KernelCode> code;
  const std::string src = source();
  for (size_t i = 0; i < std::size(kCases); ++i)
    code.push_back({"case" + std::to_string(i), "case" + std::to_string(i), src,
                    "test", 3});
  auto fns = compileEmuKernels(code);
  ASSERT_TRUE(fns.ok()) << fns.status();

  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < std::size(kCases); ++i) {
    const Case &c = kCases[i];
    SCOPED_TRACE("case " + std::to_string(i) + ": K " + std::to_string(c.k) +
                 ", VEC " + std::to_string(c.vec) + ", UNROLL " +
                 std::to_string(c.unroll) + ", SPLIT_K " +
                 std::to_string(c.splitK));
    std::vector<__half> x(c.k), w(2 * kPairs * c.k); // [1, K], [2 PAIRS, K]
    for (__half &v : x)
      v = __float2half(normal(rng));
    for (__half &v : w)
      v = __float2half(normal(rng));
    std::vector<float> out(2 * kPairs, std::nanf("")); // [2 PAIRS]
    void *args[] = {x.data(), w.data(), out.data()};
    unsigned blocks = (kPairs + c.rows - 1) / c.rows;
    (*fns)[i](blocks, 1, 1, 32 * c.rows * c.splitK, args);

    double ss = 0;
    for (__half v : x)
      ss += double(__half2float(v)) * __half2float(v);
    double scale = c.norm ? 1.0 / std::sqrt(ss / c.k + kEps) : 1.0;
    for (int r = 0; r < 2 * kPairs; ++r) {
      double dot = 0, magnitude = 0;
      for (int j = 0; j < c.k; ++j) {
        double t = double(__half2float(w[r * c.k + j])) * __half2float(x[j]);
        dot += t;
        magnitude += std::fabs(t);
      }
      EXPECT_NEAR(out[r], scale * dot, 1e-5 * scale * magnitude) << "row " << r;
    }
  }
}

} // namespace
} // namespace kiln

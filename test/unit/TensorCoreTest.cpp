//===- TensorCoreTest.cpp - mma.sync, ldmatrix, cp.async on emu and in SASS
//===//
//
// The tensor-core wrappers of codegen/TensorCorePrelude.cpp, built for the
// emu device, against a scalar reference written here from the PTX ISA's
// fragment tables (lane -> element, the other way round from the emu's
// implementation): every lane's every register, for mma.sync m16n8k16 with
// f16 and bf16 inputs, for ldmatrix x1/x2/x4 with and without .trans, and
// for cp.async's groups and zero fill. Then the same wrappers through
// NVRTC for sm_80 and sm_90: their SASS holds HMMA, LDSM and LDGSTS.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "codegen/Nvrtc.h"
#include "inspect/SassAudit.h"
#include "runtime/emu/EmuCompiler.h"

#include <gtest/gtest.h>

#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <random>

namespace kiln {
namespace {

const char *kKernels = R"cuda(
// Per lane of each warp: a [4] and b [2] registers, c and d [4] floats.
template <bool BF16>
__device__ void kiln_test_mma(const unsigned *a, const unsigned *b,
                              const float *c, float *d) {
  const int t = threadIdx.x;
  unsigned ra[4], rb[2];
  float acc[4];
  for (int i = 0; i < 4; ++i) {
    ra[i] = a[4 * t + i];
    acc[i] = c[4 * t + i];
  }
  rb[0] = b[2 * t];
  rb[1] = b[2 * t + 1];
  kiln_mma<BF16>(acc, ra, rb);
  for (int i = 0; i < 4; ++i)
    d[4 * t + i] = acc[i];
}
extern "C" __global__ void mma_f16(const unsigned *a, const unsigned *b,
                                   const float *c, float *d) {
  kiln_test_mma<false>(a, b, c, d);
}
extern "C" __global__ void mma_bf16(const unsigned *a, const unsigned *b,
                                    const float *c, float *d) {
  kiln_test_mma<true>(a, b, c, d);
}
// Lane 5 leaves before the warp's mma: undefined on a GPU.
extern "C" __global__ void mma_partial(const unsigned *a, const unsigned *b,
                                       const float *c, float *d) {
  if (threadIdx.x == 5)
    return;
  kiln_test_mma<false>(a, b, c, d);
}

// tile [32 rows, 8] halves staged in shared memory; lane l gives the
// address of row order[l]; out [32 lanes, 4] the registers it receives.
template <int N, bool TRANS>
__device__ void kiln_test_ldmatrix(const unsigned short *tile,
                                   const int *order, unsigned *out) {
  alignas(16) __shared__ unsigned short rows[32][8];
  const int lane = threadIdx.x;
  for (int i = 0; i < 8; ++i)
    rows[lane][i] = tile[8 * lane + i];
  __syncthreads();
  unsigned r[N];
  kiln_ldmatrix<N, TRANS>(r, rows[order[lane]]);
  for (int m = 0; m < N; ++m)
    out[4 * lane + m] = r[m];
}
)cuda";

std::string ldmatrixEntry(int n, bool trans) {
  return "ldmatrix_x" + std::to_string(n) + (trans ? "_trans" : "");
}

std::string source() {
  std::string s = cudaPrelude() + tensorCorePrelude() + kKernels;
  for (int n : {1, 2, 4})
    for (bool trans : {false, true})
      s += "extern \"C\" __global__ void " + ldmatrixEntry(n, trans) +
           "(const unsigned short *tile, const int *order, unsigned *out) "
           "{\n  kiln_test_ldmatrix<" +
           std::to_string(n) + ", " + (trans ? "true" : "false") +
           ">(tile, order, out);\n}\n";
  s += R"cuda(
// 32 threads, each copying 16 bytes at a time into its own three slots of
// shared memory: slot 0 in group 0, slots 1 (from src) and 2 (zero fill)
// in group 1. seen [32, 3 slots, 8 halves] after wait_group 1, then after
// wait_group 0. src [32, 2, 8] halves.
extern "C" __global__ void cp_async(const unsigned short *src,
                                    unsigned short *seen) {
  alignas(16) __shared__ unsigned short slots[32][3][8];
  const int t = threadIdx.x;
  kiln_cp_async16(slots[t][0], src + 16 * t, true);
  kiln_cp_async_commit();
  kiln_cp_async16(slots[t][1], src + 16 * t + 8, true);
  kiln_cp_async16(slots[t][2], src, false);
  kiln_cp_async_commit();
  kiln_cp_async_wait<1>();
  for (int i = 0; i < 24; ++i)
    seen[48 * t + i] = slots[t][i / 8][i % 8];
  kiln_cp_async_wait<0>();
  for (int i = 0; i < 24; ++i)
    seen[48 * t + 24 + i] = slots[t][i / 8][i % 8];
}
)cuda";
  return s;
}

const std::vector<std::string> &entries() {
  static const std::vector<std::string> e = [] {
    std::vector<std::string> v = {"mma_f16", "mma_bf16", "mma_partial",
                                  "cp_async"};
    for (int n : {1, 2, 4})
      for (bool trans : {false, true})
        v.push_back(ldmatrixEntry(n, trans));
    return v;
  }();
  return e;
}

const std::vector<EmuLaunchFn> &emuKernels() {
  static const std::vector<EmuLaunchFn> fns = [] {
    std::vector<KernelCode> code;
    const std::string src = source();
    for (const std::string &e : entries())
      code.push_back({e, e, src, "test", 0});
    auto made = compileEmuKernels(code);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *made : std::vector<EmuLaunchFn>();
  }();
  return fns;
}

EmuLaunchFn emuKernel(const std::string &entry) {
  const auto &fns = emuKernels();
  for (size_t i = 0; i < entries().size() && i < fns.size(); ++i)
    if (entries()[i] == entry)
      return fns[i];
  return nullptr;
}

float fromBits(uint16_t bits, bool bf16) {
  if (bf16) {
    uint32_t w = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &w, sizeof f);
    return f;
  }
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

uint16_t toBits(float v, bool bf16) {
  if (bf16) { // round to nearest even, as __float2bfloat16 does
    uint32_t w;
    std::memcpy(&w, &v, sizeof w);
    return uint16_t((w + 0x7fffu + ((w >> 16) & 1)) >> 16);
  }
  __half_raw raw = __half(__float2half(v));
  return raw.x;
}

// The PTX ISA's tables, lane and register to element (g = lane / 4,
// q = lane % 4, h: the lower (0) or upper (1) half of the register).
int aRow(int lane, int r) { return lane / 4 + 8 * (r & 1); }
int aCol(int lane, int r, int h) { return 2 * (lane % 4) + h + 8 * (r >> 1); }
int bRow(int lane, int r, int h) { return 2 * (lane % 4) + h + 8 * r; }
int bCol(int lane) { return lane / 4; }
int cRow(int lane, int i) { return lane / 4 + 8 * (i >> 1); }
int cCol(int lane, int i) { return 2 * (lane % 4) + (i & 1); }

void checkMma(bool bf16) {
  EmuLaunchFn mma = emuKernel(bf16 ? "mma_bf16" : "mma_f16");
  ASSERT_NE(mma, nullptr);
  constexpr int kWarps = 2; // each its own tiles: the warps must not mix
  std::mt19937 rng(bf16 ? 11 : 5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<unsigned> a(kWarps * 32 * 4), b(kWarps * 32 * 2); // per lane
  std::vector<float> c(kWarps * 32 * 4), d(kWarps * 32 * 4, std::nanf(""));
  for (unsigned &v : a)
    v = toBits(normal(rng), bf16) | unsigned(toBits(normal(rng), bf16)) << 16;
  for (unsigned &v : b)
    v = toBits(normal(rng), bf16) | unsigned(toBits(normal(rng), bf16)) << 16;
  for (float &v : c)
    v = normal(rng);
  void *args[] = {a.data(), b.data(), c.data(), d.data()};
  mma(1, 1, 1, 32 * kWarps, args);

  for (int w = 0; w < kWarps; ++w) {
    double A[16][16], B[16][8], C[16][8];
    for (int lane = 0; lane < 32; ++lane) {
      const int t = 32 * w + lane;
      for (int r = 0; r < 4; ++r)
        for (int h = 0; h < 2; ++h)
          A[aRow(lane, r)][aCol(lane, r, h)] =
              fromBits(uint16_t(a[4 * t + r] >> (16 * h)), bf16);
      for (int r = 0; r < 2; ++r)
        for (int h = 0; h < 2; ++h)
          B[bRow(lane, r, h)][bCol(lane)] =
              fromBits(uint16_t(b[2 * t + r] >> (16 * h)), bf16);
      for (int i = 0; i < 4; ++i)
        C[cRow(lane, i)][cCol(lane, i)] = c[4 * t + i];
    }
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const int row = cRow(lane, i), col = cCol(lane, i);
        double sum = C[row][col], magnitude = std::fabs(C[row][col]);
        for (int k = 0; k < 16; ++k) {
          sum += A[row][k] * B[k][col];
          magnitude += std::fabs(A[row][k] * B[k][col]);
        }
        EXPECT_NEAR(d[4 * (32 * w + lane) + i], sum, 1e-6 * magnitude)
            << "warp " << w << ", lane " << lane << ", element " << i
            << " (row " << row << ", column " << col << ")";
      }
  }
}

TEST(TensorCore, MmaF16MatchesTheScalarProductInEveryLane) { checkMma(false); }

TEST(TensorCore, MmaBf16MatchesTheScalarProductInEveryLane) { checkMma(true); }

TEST(TensorCore, AWarpWithALaneMissingStopsTheEmulator) {
  EmuLaunchFn mma = emuKernel("mma_partial");
  ASSERT_NE(mma, nullptr);
  std::vector<unsigned> a(32 * 4), b(32 * 2);
  std::vector<float> c(32 * 4), d(32 * 4);
  void *args[] = {a.data(), b.data(), c.data(), d.data()};
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(mma(1, 1, 1, 32, args),
               "mma.sync.aligned.m16n8k16 in block \\(0, 0, 0\\), warp 0, "
               "without lane 5");
}

TEST(TensorCore, LdmatrixGivesEveryLaneItsRowsAndColumns) {
  std::vector<unsigned short> tile(32 * 8); // [32 rows, 8]: distinct bits
  for (size_t i = 0; i < tile.size(); ++i)
    tile[i] = uint16_t(0x1000 + i);
  std::vector<int> order(32); // lane l gives row order[l]: a shuffle
  for (int l = 0; l < 32; ++l)
    order[l] = (l * 13 + 5) % 32;
  for (int n : {1, 2, 4})
    for (bool trans : {false, true}) {
      SCOPED_TRACE(ldmatrixEntry(n, trans));
      EmuLaunchFn ld = emuKernel(ldmatrixEntry(n, trans));
      ASSERT_NE(ld, nullptr);
      std::vector<unsigned> out(32 * 4, 0xdeadbeefu);
      void *args[] = {tile.data(), order.data(), out.data()};
      ld(1, 1, 1, 32, args);
      // Row i of matrix m is the one lane 8m + i points at.
      auto element = [&](int m, int row, int col) {
        return unsigned(tile[8 * order[8 * m + row] + col]);
      };
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, q = lane % 4;
        for (int m = 0; m < n; ++m) {
          const unsigned want =
              trans ? element(m, 2 * q, g) | element(m, 2 * q + 1, g) << 16
                    : element(m, g, 2 * q) | element(m, g, 2 * q + 1) << 16;
          EXPECT_EQ(out[4 * lane + m], want)
              << "lane " << lane << ", matrix " << m;
        }
        for (int m = n; m < 4; ++m)
          EXPECT_EQ(out[4 * lane + m], 0xdeadbeefu);
      }
    }
}

TEST(TensorCore, CpAsyncLandsAtTheWaitThatCoversItsGroup) {
  EmuLaunchFn copy = emuKernel("cp_async");
  ASSERT_NE(copy, nullptr);
  std::vector<unsigned short> src(32 * 16), seen(32 * 48, 0);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = uint16_t(i + 1);
  void *args[] = {src.data(), seen.data()};
  copy(1, 1, 1, 32, args);
  for (int t = 0; t < 32; ++t)
    for (int i = 0; i < 8; ++i) {
      SCOPED_TRACE("thread " + std::to_string(t) + ", half " +
                   std::to_string(i));
      const unsigned short *early = &seen[48 * t], *late = early + 24;
      EXPECT_EQ(early[i], src[16 * t + i]); // group 0 has landed
      // Group 1 has not: its slots still hold the block's poison.
      EXPECT_EQ(early[8 + i], 0xffff);
      EXPECT_EQ(early[16 + i], 0xffff);
      EXPECT_EQ(late[i], src[16 * t + i]);
      EXPECT_EQ(late[8 + i], src[16 * t + 8 + i]);
      EXPECT_EQ(late[16 + i], 0); // zero fill
    }
}

// Through NVRTC: each wrapper is the tensor-core or async-copy instruction
// on both architectures that have them.
TEST(TensorCore, NvrtcCompilesThemToHmmaLdsmAndLdgsts) {
  auto tools = sass::findTools();
  ASSERT_TRUE(tools.ok()) << tools.status();
  const std::string src = source();
  for (const char *target : {"sm_80", "sm_90"}) {
    SCOPED_TRACE(target);
    // One CUBIN holds every entry of the source.
    auto compiled =
        compileKernel({"mma_f16", "mma_f16", src, "test", 0}, target);
    ASSERT_TRUE(bool(compiled)) << toString(compiled.takeError());
    auto listing = sass::disassemble(*tools, compiled->cubin);
    ASSERT_TRUE(listing.ok()) << listing.status();
    auto functions = sass::parseSass(*listing);
    ASSERT_TRUE(functions.ok()) << functions.status();
    EXPECT_EQ(functions->size(), entries().size());
    std::map<std::string, int> mix = sass::instructionMix(*functions);
    EXPECT_EQ(mix["HMMA"], 3); // f16, bf16, and f16 in mma_partial
    EXPECT_GE(mix["LDSM"], 6); // x1, x2, x4, each plain and .trans
    EXPECT_EQ(mix["LDGSTS"], 3);
    for (const char *want :
         {"HMMA.16816.F32 ", "HMMA.16816.F32.BF16", "LDSM.16.M88 ",
          "LDSM.16.M88.2", "LDSM.16.M88.4", "LDSM.16.MT88 ", "LDSM.16.MT88.2",
          "LDSM.16.MT88.4", "LDGSTS.E.BYPASS.128", "DEPBAR"})
      EXPECT_NE(listing->find(want), std::string::npos) << want;
  }
}

} // namespace
} // namespace kiln

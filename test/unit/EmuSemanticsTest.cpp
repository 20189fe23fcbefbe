//===- EmuSemanticsTest.cpp - CUDA's meaning on the emu device ------------===//
//
// A hand-written kernel that leans on what the emu device promises: shared
// memory and __syncthreads across a block, warp shuffles (xor, broadcast,
// down), votes (ballot, any, all) in a full and in a partial warp, atomics
// across blocks that run on several OS threads, and a shuffle from a lane
// that is not running (past the block, or returned), which CUDA leaves
// undefined and the emu device answers with a NaN.
//
//===----------------------------------------------------------------------===//
#include "runtime/emu/EmuCompiler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace kiln {
namespace {

// 48 threads: one full warp and one of 16 lanes. Each block writes
// out[block * 48 + t] per check below (float results as their bits, since
// casting a NaN to int is undefined); every thread adds 1 to total.
const char *kSource = R"cuda(
#include <cuda_fp16.h>
extern "C" __global__ void probe(int *out, int *total, float *sum) {
  __shared__ int staged[48];
  const int t = threadIdx.x, lane = t & 31;
  int *mine = out + (blockIdx.x * 48 + t) * 9;
  staged[t] = t * t;
  __syncthreads();
  mine[0] = staged[47 - t]; // another thread's write, after the barrier
  float v = (float)lane;
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  mine[1] = (int)__float_as_uint(v); // 0 + ... + 31 in the full warp
  mine[2] = (int)__shfl_sync(0xffffffffu, (float)(lane * 10), 3);
  mine[3] = (int)__float_as_uint(__shfl_down_sync(0xffffffffu, (float)lane, 4));
  mine[4] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
  mine[5] = __any_sync(0xffffffffu, lane == 7);
  mine[6] = __all_sync(0xffffffffu, lane < 40);
  mine[7] = __all_sync(0xffffffffu, lane < 20);
  atomicAdd(total, 1);
  atomicAdd(sum, 0.5f);
  if (lane == 1)
    return;
  mine[8] = (int)__float_as_uint(__shfl_sync(0xffffffffu, (float)lane, 1));
}
)cuda";

TEST(EmuSemantics, BarriersShufflesVotesAndAtomicsKeepTheirCudaMeaning) {
  auto fns = compileEmuKernels({{"probe", "probe", kSource, "test", 3}});
  ASSERT_TRUE(fns.ok()) << fns.status();
  constexpr int blocks = 6;
  std::vector<int> out(blocks * 48 * 9, -1); // [block, thread, check]
  int total = 0;
  float sum = 0.0f;
  void *args[] = {out.data(), &total, &sum};
  (*fns)[0](blocks, 1, 1, 48, args);

  unsigned thirds = 0; // lanes 0, 3, 6, ... of a full warp
  for (int l = 0; l < 32; l += 3)
    thirds |= 1u << l;
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < 48; ++t) {
      const int *c = &out[(b * 48 + t) * 9];
      auto asFloat = [](int bits) {
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
      };
      const int lane = t & 31;
      const bool full = t < 32; // the second warp has 16 lanes
      SCOPED_TRACE("block " + std::to_string(b) + ", thread " +
                   std::to_string(t));
      EXPECT_EQ(c[0], (47 - t) * (47 - t));
      if (full) // the partial warp's sum takes in lanes past the block
        EXPECT_EQ(asFloat(c[1]), 31 * 32 / 2);
      else
        EXPECT_TRUE(std::isnan(asFloat(c[1])));
      EXPECT_EQ(c[2], 30);
      // Lanes whose source is past the warp keep their own; a source past
      // the block (the second warp's lanes 16-31) is undefined: NaN.
      if (full)
        EXPECT_EQ(asFloat(c[3]), lane + 4 < 32 ? lane + 4 : lane);
      else if (lane + 4 < 16)
        EXPECT_EQ(asFloat(c[3]), lane + 4);
      else
        EXPECT_TRUE(std::isnan(asFloat(c[3])));
      EXPECT_EQ(unsigned(c[4]), full ? thirds : thirds & 0xffffu);
      EXPECT_EQ(c[5], 1);
      EXPECT_EQ(c[6], 1);
      EXPECT_EQ(c[7], full ? 0 : 1); // lanes 20-31 exist only in warp 0
      // Lane 1 has returned: what the others read from it is undefined.
      if (lane == 1)
        EXPECT_EQ(c[8], -1);
      else
        EXPECT_TRUE(std::isnan(asFloat(c[8])));
    }
  EXPECT_EQ(total, blocks * 48);
  EXPECT_FLOAT_EQ(sum, blocks * 48 * 0.5f);
}

// Each block reads its shared memory before writing it, then writes it:
// every block must find the emu device's garbage (all bits set), not what
// an earlier block on the same OS thread left.
const char *kUnwritten = R"cuda(
#include <cuda_fp16.h>
extern "C" __global__ void unwritten(unsigned *out) {
  __shared__ float tile[64];
  __shared__ __half halves[64];
  const int t = threadIdx.x;
  out[(blockIdx.x * 64 + t) * 2] = __float_as_uint(tile[t]);
  out[(blockIdx.x * 64 + t) * 2 + 1] = __half_as_ushort(halves[t]);
  __syncthreads();
  tile[t] = 1.0f;
  halves[t] = __float2half(2.0f);
}
)cuda";

TEST(EmuSemantics, SharedMemoryStartsAsGarbageInEveryBlock) {
  auto fns =
      compileEmuKernels({{"unwritten", "unwritten", kUnwritten, "test", 1}});
  ASSERT_TRUE(fns.ok()) << fns.status();
  constexpr int blocks = 16;
  std::vector<unsigned> out(blocks * 64 * 2, 0); // [block, thread, f32|f16]
  void *args[] = {out.data()};
  (*fns)[0](blocks, 1, 1, 64, args);
  for (int i = 0; i < blocks * 64; ++i) {
    EXPECT_EQ(out[i * 2], 0xffffffffu) << "thread " << i;
    EXPECT_EQ(out[i * 2 + 1], 0xffffu) << "thread " << i;
  }
}

} // namespace
} // namespace kiln

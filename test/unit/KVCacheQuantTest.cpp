//===- KVCacheQuantTest.cpp - the kernels' KV codes against the host's ----===//
//
// codegen/KVCacheQuant.cpp's device functions, built for the emu device,
// against runtime/KVCacheQuant.h, which the ref device rounds by: a warp's
// kiln_kv_store_head gives the codes and scale whose values are exactly the
// host's round trip of the same head (heads of every magnitude, zeros,
// values on rounding ties, e4m3's subnormals and saturation), and
// kiln_kv_decode4 gives every code's value exactly.
//
//===----------------------------------------------------------------------===//
#include "runtime/KVCacheQuant.h"
#include "codegen/CudaKernel.h"
#include "ir/KilnDialect.h"
#include "runtime/QuantFormat.h"
#include "runtime/emu/EmuCompiler.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cuda_fp16.h>

#include <cmath>
#include <random>

namespace kiln {
namespace {

constexpr int kDh = 96; // three elements a lane: lanes past DH idle in one

/// fp8Cvt: e4m3 codes decoded by cvt.rn.f16x2.e4m3x2 (sm_89 on; emulated)
/// instead of bit moves.
std::string source(mlir::Type element, bool fp8Cvt = false) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<KilnDialect>();
  auto cache = KVCacheType::get(&ctx, 1, 16, 1, kDh, element);
  return (fp8Cvt ? "#define KILN_FP8_CVT 1\n" : "") + cudaPrelude() +
         kvCachePrelude(cache) + R"cuda(
constexpr int DH = )cuda" +
         std::to_string(kDh) +
         R"cuda(;
// x [heads, DH] f32 -> codes [heads, DH], scales [heads] f16; a block a head.
extern "C" __global__ void store(const float *x, kiln_kv_t *codes,
                                 __half *scales) {
  float v[(DH + 31) / 32];
  for (int i = 0; i < (DH + 31) / 32; ++i)
    v[i] = x[blockIdx.x * DH + min(int(threadIdx.x) + 32 * i, DH - 1)];
  kiln_kv_store_head<DH>(v, codes + blockIdx.x * DH, scales + blockIdx.x);
}
// codes [256] (every byte) -> f [256]: kiln_kv_decode4 and decode1.
extern "C" __global__ void decode(const unsigned *codes, float *f,
                                  float *one) {
  kiln_kv_decode4(codes[threadIdx.x], f + 4 * threadIdx.x);
  for (int i = 0; i < 4; ++i)
    one[4 * threadIdx.x + i] = kiln_kv_decode1((codes[threadIdx.x] >> 8 * i) & 0xff);
}
)cuda";
}

/// Heads that reach the rounding rules' corners.
std::vector<float> heads(int count) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(count * kDh);
  for (int h = 0; h < count; ++h) {
    float magnitude = std::ldexp(1.0f, h % 24 - 12); // 2^-12 .. 2^11
    for (int d = 0; d < kDh; ++d)
      x[h * kDh + d] = magnitude * normal(rng);
  }
  for (int d = 0; d < kDh; ++d) {
    x[d] = 0.0f;                         // a head of zeros
    x[kDh + d] = float(d - kDh / 2) / 2; // int8 ties: amax 24 -> k/2 codes
  }
  return x;
}

void expectStoreMatchesHost(mlir::Type element, KVCodes codes) {
  std::string src = source(element);
  auto fns = compileEmuKernels({{"store", "store", src, "test", 3}});
  ASSERT_TRUE(fns.ok()) << fns.status();
  const int count = 64;
  std::vector<float> x = heads(count);         // [count, DH]
  std::vector<uint8_t> out(count * kDh, 0xee); // [count, DH]
  std::vector<__half> scales(count);           // [count]
  void *args[] = {x.data(), out.data(), scales.data()};
  (*fns)[0](count, 1, 1, 32, args);
  for (int h = 0; h < count; ++h) {
    std::vector<float> want(x.begin() + h * kDh, x.begin() + (h + 1) * kDh);
    roundTripKVHead(want.data(), kDh, codes);
    float scale = __half2float(scales[h]);
    for (int d = 0; d < kDh; ++d) {
      uint8_t c = out[h * kDh + d];
      float value =
          (codes == KVCodes::E4M3 ? e4m3ToFloat(c) : float(int8_t(c))) * scale;
      ASSERT_EQ(value, want[d])
          << "head " << h << " element " << d << " of " << x[h * kDh + d]
          << ", code " << int(c) << ", scale " << scale;
    }
  }
}

TEST(KVCacheQuant, Int8HeadsRoundAsTheHostDoes) {
  mlir::MLIRContext ctx;
  expectStoreMatchesHost(mlir::IntegerType::get(&ctx, 8), KVCodes::Int8);
}

TEST(KVCacheQuant, E4m3HeadsRoundAsTheHostDoes) {
  mlir::MLIRContext ctx;
  expectStoreMatchesHost(mlir::Float8E4M3FNType::get(&ctx), KVCodes::E4M3);
}

void expectDecodeExact(mlir::Type element, KVCodes codes, bool fp8Cvt = false) {
  auto fns = compileEmuKernels(
      {{"decode", "decode", source(element, fp8Cvt), "test", 3}});
  ASSERT_TRUE(fns.ok()) << fns.status();
  std::vector<unsigned> words(64); // [64] four codes each: 0 .. 255
  for (unsigned i = 0; i < 64; ++i)
    words[i] =
        (4 * i) | (4 * i + 1) << 8 | (4 * i + 2) << 16 | (4 * i + 3) << 24;
  std::vector<float> f(256), one(256); // [256]
  void *args[] = {words.data(), f.data(), one.data()};
  (*fns)[0](1, 1, 1, 64, args);
  for (int c = 0; c < 256; ++c) {
    if (codes == KVCodes::E4M3 && (c & 0x7f) == 0x7f)
      continue; // NaN: never stored
    // KV_UNIT: e4m3's bits moved into f16's are 2^-8 of its value.
    float unit = codes == KVCodes::E4M3 && !fp8Cvt ? 256.0f : 1.0f;
    float want = codes == KVCodes::E4M3 ? e4m3ToFloat(uint8_t(c)) / unit
                                        : float(int8_t(c));
    EXPECT_EQ(f[c], want) << "code " << c;
    EXPECT_EQ(one[c], want) << "code " << c;
  }
}

TEST(KVCacheQuant, Int8CodesDecodeExactly) {
  mlir::MLIRContext ctx;
  expectDecodeExact(mlir::IntegerType::get(&ctx, 8), KVCodes::Int8);
}

TEST(KVCacheQuant, E4m3CodesDecodeExactly) {
  mlir::MLIRContext ctx;
  expectDecodeExact(mlir::Float8E4M3FNType::get(&ctx), KVCodes::E4M3);
}

TEST(KVCacheQuant, E4m3CodesDecodeExactlyByConversion) {
  mlir::MLIRContext ctx;
  expectDecodeExact(mlir::Float8E4M3FNType::get(&ctx), KVCodes::E4M3, true);
}

} // namespace
} // namespace kiln

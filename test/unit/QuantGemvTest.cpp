//===- QuantGemvTest.cpp - decode's quantized GEMV against a sum in double ===//
//
// The decode GEMV of codegen/QuantGemmKernel.cpp (one token, x staged in
// shared memory), built for the emu device at llama2-7b's row lengths,
// against the dot products of the canonical values (QuantizedMatrix::value)
// with x in double. Grouped int4 and int8 codes go into the mmas raw
// (1024 + code) and each group's zero and min come off its sum at the
// flush, from the group's sum of x: 1024 x summed over a group cancels
// digits, so the error is held to a bound on the products' absolute sum
// that a zero off by one (about 4e-3 of it) would break, with x that has
// a mean and outlier channels (the cancellation's worst). Whole-row formats
// (int4, int8, fp8) keep the exact dequantization and the same bound.
// Also SwiGLU's fused GEMV (gate and up tiles a warp, two buffers of loads
// in turn), over an odd number of passes and warps with no span, and
// kiln tune's quant-warps: few warps a tile, each streaming a long span;
// and llama2-70b's longest row, staged in dynamic shared memory.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnDialect.h"
#include "ir/KilnOps.h"
#include "runtime/DType.h"
#include "runtime/QuantFormat.h"
#include "runtime/QuantLayout.h"
#include "runtime/emu/EmuCompiler.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace kiln {
namespace {

struct Case {
  const char *format;
  int64_t rows, cols;
  bool swiglu = false; // rows: [gate | up], the result silu(gate) * up
  int unroll = 4;      // gemv-unroll: loads a pass
  /// quant-warps on one SM (0: the default split-K): warps a tile =
  /// warps / tiles (a power of two).
  int warps = 0;
  /// An RMSNorm prologue, its weight g folded into W (staged with x: x g
  /// in f16, the sum's 1 / rms after).
  bool norm = false;
};

class QuantGemv : public ::testing::TestWithParam<Case> {};

constexpr double kEps = 1e-5; // the RMSNorm's

/// The decode GEMV of x[?, cols] . W[rows, cols]^T into f32, W of `format`
/// (with SwiGLU, fused: silu(gate) * up of [gate | up], [?, rows / 2]).
CudaKernel emitGemv(QuantFormat format, const Case &c) {
  const int64_t rows = c.rows, cols = c.cols;
  mlir::MLIRContext ctx;
  ctx.loadDialect<KilnDialect, mlir::func::FuncDialect>();
  mlir::OpBuilder b(&ctx);
  auto loc = b.getUnknownLoc();
  auto module = mlir::ModuleOp::create(loc);
  b.setInsertionPointToEnd(module.getBody());
  auto x = mlir::RankedTensorType::get({mlir::ShapedType::kDynamic, cols},
                                       b.getF16Type());
  auto y = mlir::RankedTensorType::get(
      {mlir::ShapedType::kDynamic, c.swiglu ? rows / 2 : rows}, b.getF32Type());
  auto fn =
      b.create<mlir::func::FuncOp>(loc, "decode", b.getFunctionType({x}, {y}));
  b.setInsertionPointToEnd(fn.addEntryBlock());
  auto type = mlir::RankedTensorType::get({rows, cols}, b.getF16Type(),
                                          QuantAttr::get(&ctx, format));
  mlir::Value w =
      c.norm
          ? b.create<PackedWeightOp>(loc, type, "w", b.getStrArrayAttr({"w"}),
                                     b.getDenseI64ArrayAttr({rows}),
                                     b.getStringAttr("g"), nullptr)
                .getResult()
          : b.create<WeightOp>(loc, type, "w", ShardAttr()).getResult();
  auto linear = b.create<FusedLinearOp>(
      loc, mlir::TypeRange{y}, fn.getArgument(0), w, /*residual=*/mlir::Value(),
      c.norm ? b.getF64FloatAttr(kEps) : mlir::FloatAttr(),
      c.swiglu ? b.getUnitAttr() : mlir::UnitAttr());
  b.create<mlir::func::ReturnOp>(loc, linear.getResults());
  CodegenOptions opts;
  opts.gemvUnroll = c.unroll;
  if (c.warps) {
    opts.quantWarps = c.warps;
    opts.smCount = 1;
  }
  auto k = emitQuantGemm(linear, opts, Phase::decode, /*fused=*/c.swiglu);
  module->erase();
  EXPECT_TRUE(bool(k)) << llvm::toString(k.takeError());
  return k ? *k : CudaKernel{};
}

TEST_P(QuantGemv, MatchesTheDotProductsInDouble) {
  const Case &c = GetParam();
  std::optional<QuantFormat> format = QuantFormat::parse(c.format);
  ASSERT_TRUE(format) << c.format;
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> wf(c.rows * c.cols); // [rows, cols]
  for (float &v : wf)
    v = normal(rng);
  QuantFormat plain = *format;
  plain.actOrder = false;
  QuantizedMatrix q = quantizeRoundToNearest(wf.data(), c.rows, c.cols, plain);
  q.format = *format;
  if (format->actOrder) {
    for (int64_t col = 0; col < c.cols; ++col)
      q.gIdx.push_back(int32_t(col / format->group));
    std::shuffle(q.gIdx.begin(), q.gIdx.end(), rng);
  }
  // g [cols] f16, the norm's weight: about 1 (its own generator: the
  // other cases' data stay as they were).
  std::mt19937 gen(29);
  std::normal_distribution<float> weight(1.0f, 0.2f);
  std::vector<uint16_t> g(c.cols);
  for (uint16_t &v : g)
    v = floatToHalf(weight(gen));
  std::vector<uint8_t> buf = packForKernels(q, c.norm ? g.data() : nullptr);

  // x [1, cols] f16: a mean of 0.5, and every 97th channel an outlier of
  // +-40 (as LLM activations have), so that a group's sum of x is large.
  std::normal_distribution<float> activation(0.5f, 1.0f);
  std::vector<uint16_t> x(c.cols);
  for (int64_t col = 0; col < c.cols; ++col)
    x[col] = floatToHalf(col % 97 == 5 ? (col % 2 ? 40.0f : -40.0f)
                                       : activation(rng));
  // With the norm, what the mmas take: x g rounded to f16 (its product of
  // two halves, exact in double, rounded once as __hmul2 does), and the
  // fused GEMV's (SwiGLU's here) scale of its sums, 1 / rms(x).
  std::vector<double> xs(c.cols); // [cols]
  double squares = 0;
  for (int64_t col = 0; col < c.cols; ++col) {
    const double v = halfToFloat(x[col]);
    squares += v * v;
    xs[col] =
        c.norm ? halfToFloat(floatToHalf(float(v * halfToFloat(g[col])))) : v;
  }
  // (Unfused, the .qgemm into the workspace, the epilogue after it
  // scales: this kernel applies g, not 1 / rms.)
  const double rms =
      c.norm && c.swiglu ? 1 / std::sqrt(squares / c.cols + kEps) : 1;

  CudaKernel k = emitGemv(*format, c);
  ASSERT_FALSE(k.source.empty());
  if (c.warps) { // the split-K quant-warps asks for
    const int64_t tiles = c.swiglu ? c.rows / 32 : c.rows / 16;
    EXPECT_NE(k.source.find("SPLIT_K = " + std::to_string(c.warps / tiles)),
              std::string::npos);
  }
  // x's row passes 48 KiB of shared memory: a dynamic buffer.
  const bool dynamic = 2 * c.cols > 48 * 1024;
  EXPECT_EQ(k.dynamicSharedBytes > 0, dynamic);
  EXPECT_EQ(k.source.find("KILN_DYNAMIC_SHARED(staged") != std::string::npos,
            dynamic);
  auto fns = compileEmuKernels({kernelCode(k)});
  ASSERT_TRUE(fns.ok()) << fns.status();
  const int64_t outs = c.swiglu ? c.rows / 2 : c.rows;
  std::vector<float> out(outs, NAN); // [1, outs] f32
  int count = 1;
  std::vector<void *> args = {x.data(), buf.data(), out.data()};
  if (!c.swiglu)
    args.push_back(&count);
  ASSERT_EQ(args.size(), k.params.size());
  (*fns)[0](unsigned(k.grid[0]), unsigned(k.grid[1]), unsigned(k.grid[2]),
            unsigned(k.blockThreads), args.data());

  // Row r's dot product and the sum of its products' magnitudes.
  auto dot = [&](int64_t r) {
    double sum = 0, magnitude = 0;
    for (int64_t col = 0; col < c.cols; ++col) {
      double p = double(q.value(r, col)) * xs[col] * rms;
      sum += p;
      magnitude += std::fabs(p);
    }
    return std::pair{sum, magnitude};
  };
  double worst = 0;
  for (int64_t r = 0; r < outs; ++r) {
    auto [want, magnitude] = dot(r);
    if (c.swiglu) { // the error of silu(g) u from g's and u's (silu' < 1.1)
      auto [gate, gateMagnitude] = dot(r);
      auto [up, upMagnitude] = dot(outs + r);
      const double silu = gate / (1 + std::exp(-gate));
      want = silu * up;
      magnitude =
          1.1 * std::fabs(up) * gateMagnitude + std::fabs(silu) * upMagnitude;
    }
    const double error = std::fabs(out[r] - want) / magnitude;
    worst = std::max(worst, error);
    if (!(error <= 1e-4))
      ADD_FAILURE() << c.format << " row " << r << ": " << out[r] << ", want "
                    << want << " (error " << error
                    << " of the products' absolute sum)";
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  std::printf("%s [%lld, %lld]: worst error %.3g of the products' absolute "
              "sum\n",
              c.format, (long long)c.rows, (long long)c.cols, worst);
}

// A launch that passes less dynamic shared memory than the kernel's buffer
// would fail on a GPU: the emu device stops it, naming both sizes.
TEST(QuantGemvDeathTest, ALaunchWithoutItsDynamicSharedMemoryStops) {
  const Case c{"int4-g128", 32, 28672};
  CudaKernel k = emitGemv(*QuantFormat::parse(c.format), c);
  ASSERT_GT(k.dynamicSharedBytes, 48 * 1024);
  KernelCode code = kernelCode(k);
  code.dynamicSharedBytes = 48 * 1024;
  auto fns = compileEmuKernels({code});
  ASSERT_TRUE(fns.ok()) << fns.status();
  std::vector<uint8_t> buf(
      quantLayout(*QuantFormat::parse(c.format), c.rows, c.cols, false).bytes);
  std::vector<uint16_t> x(c.cols);
  std::vector<float> out(c.rows);
  int count = 1;
  std::vector<void *> args = {x.data(), buf.data(), out.data(), &count};
  EXPECT_DEATH((*fns)[0](unsigned(k.grid[0]), unsigned(k.grid[1]),
                         unsigned(k.grid[2]), unsigned(k.blockThreads),
                         args.data()),
               "the kernel's dynamic shared memory is " +
                   std::to_string(k.dynamicSharedBytes) +
                   " bytes, its launch passed 49152");
}

INSTANTIATE_TEST_SUITE_P(
    Formats, QuantGemv,
    ::testing::Values(Case{"int4-g128", 64, 4096}, Case{"int4-g128", 32, 11008},
                      Case{"int4-g32-zp", 32, 4096},
                      Case{"int4-g128-act", 32, 4096},
                      Case{"int8-g128", 32, 4096},
                      Case{"int4-g32-min", 32, 4096},
                      Case{"int8-g16-min", 32, 4096}, Case{"int4", 32, 4096},
                      Case{"int8", 32, 11008}, Case{"fp8", 32, 4096},
                      // 3 passes of 2 loads; 3 of 4, 1, and no span.
                      Case{"int4-g128", 64, 6144, true, 2},
                      Case{"int4-g128", 64, 11008, true},
                      Case{"int8", 64, 4096, true}, Case{"fp8", 64, 4096, true},
                      // quant-warps: 2 warps a tile (spans of 86 loads, 21.5
                      // passes), 2 of a mins format (32 loads), SwiGLU's 2
                      // (86), and 8 on one tile (8 loads, 2 passes).
                      Case{"int4-g128", 64, 11008, false, 4, 8},
                      Case{"int4-g32-min", 32, 4096, false, 4, 4},
                      Case{"int4-g128", 64, 11008, true, 4, 4},
                      Case{"int4-g128", 16, 4096, false, 4, 8},
                      // An RMSNorm prologue, g folded into W: x g staged
                      // (22 pairs a thread in 256 threads, the last
                      // thread's short; 4 in 512).
                      Case{"int4-g128", 64, 11008, false, 4, 8, true},
                      Case{"int4-g32-zp", 64, 11008, true, 4, 4, true},
                      Case{"int4-g128", 64, 4096, false, 4, 0, true},
                      // llama2-70b's down_proj row (28672 columns): x
                      // (56 KiB) and the groups staged in dynamic shared
                      // memory, x in two batches of 14 pairs a thread;
                      // with g; and a mins format, whose groups (112 KiB)
                      // are loaded in the loop.
                      Case{"int4-g128", 32, 28672},
                      Case{"int4-g128", 32, 28672, false, 4, 0, true},
                      Case{"int4-g32-min", 32, 28672}),
    [](const ::testing::TestParamInfo<Case> &info) {
      std::string name = info.param.format;
      std::replace(name.begin(), name.end(), '-', '_');
      return name + "_" + std::to_string(info.param.cols) +
             (info.param.swiglu ? "_swiglu" : "") +
             (info.param.unroll != 4
                  ? "_unroll" + std::to_string(info.param.unroll)
                  : "") +
             (info.param.warps ? "_warps" + std::to_string(info.param.warps)
                               : "") +
             (info.param.norm ? "_norm" : "");
    });

} // namespace
} // namespace kiln

//===- QuantizeActivationKernel.cpp - a GEMM's input to e4m3 per row ------===//
//
// codes[rows, K] e4m3, scales[rows] f32 = x[rows, K] diag(g), row by row:
// the A operand of cuBLASLt's FP8 GEMM (quant-gemm=2, W8A8), whose weight
// the dequantize kernel wrote out as e4m3 (DequantizeWeightKernel.cpp).
// Each row is scaled into e4m3's range by its own largest magnitude
// (dynamic, per token, as vLLM's fp8 does): amax = max |x g|, codes =
// e4m3(x g * ((1 / amax) * 448)) rounded to nearest even, scale = amax /
// 448 (0 and all codes 0 for a row of zeros), all in fp32
// (runtime/ActivationQuant.h); g is the norm weight
// the buffer keeps apart (RMSNorm's 1 / rms is a row's factor, which the
// epilogue applies after the GEMM as it does for the f16 path). Rows at
// and past the step's count get codes 0 and scale 0, so that a batch
// plan's padding multiplies to 0. A block takes a row, its threads 8
// columns at a time (one 16-byte load each), the row kept in registers
// between the reduction and the conversion. It waits for the previous
// kernel (PDL) first: x is an earlier kernel's, and the GEMM before it
// read the codes it overwrites.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"
#include "runtime/QuantLayout.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

namespace {
constexpr int kThreads = 256; // a row's 16-byte chunks split this many ways
} // namespace

CudaKernel emitQuantizeActivation(int64_t kdim, int64_t normAt, bool norm,
                                  const std::string &kernel) {
  CudaKernel k;
  k.kernel = kernel;
  k.entry = entryName(kernel);
  k.params = {{ParamKind::Activation, "x", "const __half *"},
              {ParamKind::Weight, "w", "const unsigned char *"},
              {ParamKind::Count, "count", "const int *"},
              {ParamKind::Dequantized, "codes", "unsigned char *"},
              {ParamKind::Dequantized, "scales", "float *"}};
  k.blockThreads = kThreads;
  k.rowAxis = 0;

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << "\n// kernel " << k.kernel << ": codes[rows, " << kdim
     << "] e4m3, scales[rows] f32 = x" << (norm ? " diag(g)" : "")
     << " per row\n";
  os << "constexpr int K = " << kdim << ", THREADS = " << kThreads
     << ", CHUNKS = K / 8, PER = (CHUNKS + THREADS - 1) / THREADS;\n";
  os << "constexpr bool NORM = " << (norm ? "true" : "false")
     << "; // g [K] f16 at byte NORM_AT of w\n";
  os << "constexpr long long NORM_AT = " << normAt << ";\n";
  os << "\n// x [rows, K] f16, w the weight buffer (its norm section), codes "
        "[rows, K] e4m3, scales [rows] f32.\n"
        "// grid (rows), block (THREADS): a row, 8 columns a thread at a "
        "time\n";
  os << "extern \"C\" __global__ void __launch_bounds__(THREADS) " << k.entry
     << "(" << kernelParameters(k) << ") {\n";
  os << R"cuda(  kiln_launch_dependents();
  kiln_wait_previous_grid(); // x is an earlier kernel's
  const long long row = blockIdx.x;
  uint2 *out = reinterpret_cast<uint2 *>(codes + row * K);
  if (row >= *count) { // padding: codes 0, scale 0
    for (int c = threadIdx.x; c < CHUNKS; c += THREADS)
      out[c] = make_uint2(0u, 0u);
    if (threadIdx.x == 0)
      scales[row] = 0.0f;
    return;
  }
  const uint4 *xr = reinterpret_cast<const uint4 *>(x + row * K);
  const uint4 *gr = reinterpret_cast<const uint4 *>(w + NORM_AT);
  float v[PER][8];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int c = threadIdx.x + i * THREADS;
    if (c < CHUNKS) {
      const uint4 raw = xr[c];
      const __half2 *h = reinterpret_cast<const __half2 *>(&raw);
      uint4 graw = make_uint4(0u, 0u, 0u, 0u);
      if constexpr (NORM)
        graw = gr[c];
      const __half2 *gh = reinterpret_cast<const __half2 *>(&graw);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float2 f = __half22float2(h[j]);
        if constexpr (NORM) {
          const float2 gf = __half22float2(gh[j]);
          f.x *= gf.x;
          f.y *= gf.y;
        }
        v[i][2 * j] = f.x;
        v[i][2 * j + 1] = f.y;
        amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
      }
    }
  }
  // The row's largest magnitude: each warp's, then the block's.
  __shared__ float warp_max[THREADS / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if ((threadIdx.x & 31) == 0)
    warp_max[threadIdx.x >> 5] = amax;
  __syncthreads();
  amax = warp_max[0];
#pragma unroll
  for (int i = 1; i < THREADS / 32; ++i)
    amax = fmaxf(amax, warp_max[i]);
  // As torch evaluates 448 / amax (runtime/ActivationQuant.h).
  const float inv = amax > 0.0f ? (1.0f / amax) * 448.0f : 0.0f;
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int c = threadIdx.x + i * THREADS;
    if (c < CHUNKS) {
      unsigned word[2] = {0u, 0u};
#pragma unroll
      for (int j = 0; j < 8; ++j)
        word[j / 4] |= unsigned(kiln_e4m3_encode(v[i][j] * inv)) << (8 * (j % 4));
      out[c] = make_uint2(word[0], word[1]);
    }
  }
  if (threadIdx.x == 0)
    scales[row] = amax / 448.0f;
}
)cuda";
  k.source = src;
  return k;
}

llvm::Expected<CudaKernel> emitQuantizeActivation(Operation *op,
                                                  const CodegenOptions &) {
  auto w = quantizedWeight(op, "the activation quantizer");
  if (!w)
    return w.takeError();
  if (w->format.kind != QuantKind::FP8)
    return llvm::createStringError(
        "the activation quantizer serves fp8 weights, not " + w->format.name());
  CudaKernel base = kernelFor(op, kQuantizeActivationSuffix);
  QuantLayout layout = quantLayout(w->format, w->n, w->k, w->norm);
  CudaKernel k =
      emitQuantizeActivation(w->k, layout.norm, w->norm, base.kernel);
  k.provenance = base.provenance;
  return k;
}

} // namespace kiln

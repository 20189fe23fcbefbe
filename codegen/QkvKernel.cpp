//===- QkvKernel.cpp - kiln.fused_qkv for decode --------------------------===//
//
// The QKV matmul with the RMSNorm prologue and the cache-write epilogue:
// warps take q rows (stored as the result), then K pairs (the two rows RoPE
// rotates together, rotated and stored in the cache), then v rows (stored in
// the cache). Positions and the block table are read on the device, so the
// launch is the same for every step.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

llvm::Expected<CudaKernel> emitQkvGemv(Operation *op,
                                       const CodegenOptions &opts) {
  auto qkv = cast<FusedQKVOp>(op);
  auto cache = cast<KVCacheType>(qkv.getCache().getType());
  auto w = cast<RankedTensorType>(qkv.getWeight().getType());
  int64_t kdim = w.getDimSize(1), kvw = cache.getSlotWidth();
  int64_t qw = w.getDimSize(0) - 2 * kvw, dh = cache.getHeadDim();
  if (llvm::Error e = requireF16(w.getElementType()))
    return std::move(e);
  bool rope = qkv.getRopeTheta().has_value();
  bool interleaved = rope && *qkv.getRopeLayout() == RopeLayout::interleaved;
  // With RoPE one warp computes both rows of a rotated pair of K.
  int64_t kTasks = rope ? kvw / 2 : kvw;
  int64_t tasks = qw + kTasks + kvw;
  int warps = opts.gemvWarps;
  int64_t blockSize = poolBlockSize(op);

  CudaKernel k = kernelFor(op);
  k.params = {{ParamKind::Activation, "x"},
              {ParamKind::Weight, "w"},
              {ParamKind::KCache, "k_cache"},
              {ParamKind::VCache, "v_cache"},
              {ParamKind::BlockTable, "block_table"},
              {ParamKind::Positions, "positions"},
              {ParamKind::Activation, "q"}};
  k.grid = {(tasks + warps - 1) / warps, 1, 1};
  k.blockThreads = 32 * warps;

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << "\n// kernel " << k.kernel << ": [q | k | v] = x[1, " << kdim
     << "] . W[" << w.getDimSize(0) << ", " << kdim << "]^T"
     << (qkv.getNormEpsilon() ? ", RMSNorm prologue" : "")
     << (rope ? ", RoPE on k" : "") << ", k and v into layer " << qkv.getLayer()
     << "'s cache\n";
  // (Declared without RoPE too: a discarded `if constexpr` branch in a
  // non-template function still names it.)
  os << (rope ? invFreqTable(dh, qkv.getRopeTheta()->convertToDouble())
              : "__constant__ float kiln_inv_freq[1] = {0.0f};\n");
  os << "constexpr int K = " << kdim << ", VEC = " << vectorWidth(kdim)
     << ", WARPS = " << warps << ";\n";
  os << "constexpr int QW = " << qw << ", KVW = " << kvw << ", DH = " << dh
     << ", K_TASKS = " << kTasks << ", TASKS = " << tasks
     << ", BLOCK_SIZE = " << blockSize << ";\n";
  os << "constexpr bool NORM = " << (qkv.getNormEpsilon() ? "true" : "false")
     << ", ROPE = " << (rope ? "true" : "false")
     << ", INTERLEAVED = " << (interleaved ? "true" : "false") << ";\n";
  os << "constexpr float EPS = "
     << floatLiteral(qkv.getNormEpsilon()
                         ? qkv.getNormEpsilon()->convertToDouble()
                         : 0.0)
     << ";\n";
  os << R"cuda(
// x [1, K] f16, w [QW + 2 KVW, K] f16, k_cache/v_cache: this layer's keys
// and values in the pool, slot-major [slot, KVW] f16; q [1, QW] f16.
// grid (ceil(TASKS / WARPS)), block (32 * WARPS)
extern "C" __global__ void __launch_bounds__(32 * WARPS) )cuda"
     << k.entry << R"cuda((
    const __half *__restrict__ x, const __half *__restrict__ w,
    __half *__restrict__ k_cache, __half *__restrict__ v_cache,
    const int *__restrict__ block_table, const int *__restrict__ positions,
    __half *__restrict__ q) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float scale = kiln_prologue_scale<K, VEC, NORM>(x, EPS);
  const int task = blockIdx.x * WARPS + warp;
  if (task >= TASKS)
    return;
  const int pos = positions[0];
  const long long slot = kiln_slot(block_table, pos, BLOCK_SIZE) * KVW;
  if (task < QW) { // a row of q
    const float y = scale * kiln_warp_dot<K, VEC>(w + (long long)task * K, x, lane);
    if (lane == 0)
      q[task] = __float2half(y);
  } else if (task < QW + K_TASKS) { // a row, or a rotated pair, of k
    const int t = task - QW;
    int a = t, b = t;
    if constexpr (ROPE) {
      const int head = t / (DH / 2), i = t % (DH / 2);
      a = head * DH + (INTERLEAVED ? 2 * i : i);
      b = INTERLEAVED ? a + 1 : a + DH / 2;
    }
    const float ka = scale * kiln_warp_dot<K, VEC>(w + (long long)(QW + a) * K, x, lane);
    if constexpr (ROPE) {
      const float kb = scale * kiln_warp_dot<K, VEC>(w + (long long)(QW + b) * K, x, lane);
      if (lane == 0) {
        float s, c;
        sincosf(pos * kiln_inv_freq[t % (DH / 2)], &s, &c);
        k_cache[slot + a] = __float2half(ka * c - kb * s);
        k_cache[slot + b] = __float2half(ka * s + kb * c);
      }
    } else if (lane == 0) {
      k_cache[slot + a] = __float2half(ka);
    }
  } else { // a row of v
    const int r = task - QW - K_TASKS;
    const float v = scale * kiln_warp_dot<K, VEC>(
                                w + (long long)(QW + KVW + r) * K, x, lane);
    if (lane == 0)
      v_cache[slot + r] = __float2half(v);
  }
}
)cuda";
  k.source = src;
  return k;
}

} // namespace kiln

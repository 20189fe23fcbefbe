//===- QkvKernel.cpp - kiln.fused_qkv for decode --------------------------===//
//
// The QKV matmul with the RMSNorm prologue and the cache-write epilogue:
// warps take q rows (stored as the result), then K pairs (the two rows RoPE
// rotates together, rotated and stored in the cache), then v rows (stored in
// the cache). Positions and the block table are read on the device, so the
// launch is the same for every step. qkvShape() writes what decode's kernel
// and prefill's epilogue (QkvEpilogueKernel.cpp) share.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

llvm::Expected<QkvShape> qkvShape(Operation *op, const CodegenOptions &opts) {
  auto qkv = cast<FusedQKVOp>(op);
  auto cache = cast<KVCacheType>(qkv.getCache().getType());
  auto w = cast<RankedTensorType>(qkv.getWeight().getType());
  if (llvm::Error e = requireF16(w.getElementType()))
    return std::move(e);
  QkvShape s;
  s.k = w.getDimSize(1);
  s.n = w.getDimSize(0);
  int64_t kvw = cache.getSlotWidth(), qw = s.n - 2 * kvw;
  bool rope = qkv.getRopeTheta().has_value();
  bool interleaved = rope && *qkv.getRopeLayout() == RopeLayout::interleaved;
  // With RoPE one task computes both columns of a rotated pair of k.
  int64_t kTasks = rope ? kvw / 2 : kvw;
  s.tasks = qw + kTasks + kvw;
  auto eps = qkv.getNormEpsilon();

  llvm::raw_string_ostream os(s.header);
  os << "\n// kernel " << kernelFor(op).kernel << ": [q | k | v] = x[S, " << s.k
     << "] . W[" << s.n << ", " << s.k << "]^T" << (eps ? ", RMSNorm" : "")
     << (rope ? ", RoPE on k" : "") << ", k and v into layer " << qkv.getLayer()
     << "'s cache\n";
  // (Declared without RoPE too: a discarded `if constexpr` branch in a
  // non-template function still names it.)
  os << (rope ? invFreqTable(cache.getHeadDim(),
                             qkv.getRopeTheta()->convertToDouble())
              : "__constant__ float kiln_inv_freq[1] = {0.0f};\n");
  os << "constexpr int K = " << s.k << ", N = " << s.n
     << ", VEC = " << vectorWidth(s.k, opts.maxVectorWidth) << ";\n";
  os << "constexpr int QW = " << qw << ", KVW = " << kvw
     << ", DH = " << cache.getHeadDim() << ", K_TASKS = " << kTasks
     << ", TASKS = " << s.tasks << ";\n"
     << poolConstants(op);
  os << "constexpr bool NORM = " << (eps ? "true" : "false")
     << ", ROPE = " << (rope ? "true" : "false")
     << ", INTERLEAVED = " << (interleaved ? "true" : "false") << ";\n";
  os << "constexpr float EPS = "
     << floatLiteral(eps ? eps->convertToDouble() : 0.0) << ";\n";
  os << R"cuda(
// One task of a token's [q | k | v] row: a column of q (stored in q), a
// column or a rotated pair of k, or a column of v (stored in the token's
// slot of the layer's keys or values). value(col) is column col of the
// matmul; only threads with `store` write.
template <class Value>
__device__ __forceinline__ void kiln_qkv_task(int task, int pos, long long slot,
                                              Value value, bool store,
                                              __half *q, __half *k_cache,
                                              __half *v_cache) {
  if (task < QW) {
    const float y = value(task);
    if (store)
      q[task] = __float2half(y);
  } else if (task < QW + K_TASKS) {
    const int t = task - QW;
    int a = t, b = t;
    if constexpr (ROPE)
      kiln_rope_pair<DH, INTERLEAVED>(t, a, b);
    const float ka = value(QW + a);
    if constexpr (ROPE) {
      const float kb = value(QW + b);
      if (store) {
        float s, c;
        sincosf(pos * kiln_inv_freq[t % (DH / 2)], &s, &c);
        k_cache[slot + a] = __float2half(ka * c - kb * s);
        k_cache[slot + b] = __float2half(ka * s + kb * c);
      }
    } else if (store) {
      k_cache[slot + a] = __float2half(ka);
    }
  } else {
    const int r = task - QW - K_TASKS;
    const float v = value(QW + KVW + r);
    if (store)
      v_cache[slot + r] = __float2half(v);
  }
}
)cuda";
  return s;
}

llvm::Expected<CudaKernel> emitQkvGemv(Operation *op,
                                       const CodegenOptions &opts) {
  auto shape = qkvShape(op, opts);
  if (!shape)
    return shape.takeError();
  int warps = opts.gemvWarps;

  CudaKernel k = kernelFor(op, opts.kernelSuffix);
  k.params = {{ParamKind::Activation, "x", "const __half *"},
              {ParamKind::Weight, "w", "const __half *"},
              {ParamKind::KCache, "k_cache", "__half *"},
              {ParamKind::VCache, "v_cache", "__half *"},
              {ParamKind::BlockTable, "block_table", "const int *"},
              {ParamKind::RowSequence, "seqs", "const int *"},
              {ParamKind::Positions, "positions", "const int *"},
              {ParamKind::Activation, "q", "__half *"}};
  k.grid = {(shape->tasks + warps - 1) / warps, 1, 1};
  k.blockThreads = 32 * warps;
  k.source = cudaPrelude() + shape->header +
             "constexpr int WARPS = " + std::to_string(warps) + ";\n" +
             R"cuda(
// x [1, K] f16, w [N = QW + 2 KVW, K] f16, k_cache/v_cache: this layer's
// keys and values in the pool, slot-major [slot, KVW] f16; block_table
// [sequences, TABLE_BLOCKS] i32, seqs [1] i32, positions [1] i32; q [1, QW]
// f16.
// grid (ceil(TASKS / WARPS)), block (32 * WARPS): a warp per task
extern "C" __global__ void __launch_bounds__(32 * WARPS) )cuda" +
             k.entry + "(" + kernelParameters(k) + R"cuda() {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float scale = kiln_prologue_scale<K, VEC, NORM>(x, EPS);
  const int task = blockIdx.x * WARPS + warp;
  if (task >= TASKS)
    return;
  const int pos = positions[0];
  const int *table = block_table + (long long)seqs[0] * TABLE_BLOCKS;
  const long long slot = kiln_slot(table, pos, BLOCK_SIZE) * KVW;
  // Every lane takes part in each dot product; lane 0 stores.
  auto value = [&](int col) {
    return scale * kiln_warp_dot<K, VEC>(w + (long long)col * K, x, lane);
  };
  kiln_qkv_task(task, pos, slot, value, lane == 0, q, k_cache, v_cache);
}
)cuda";
  return k;
}

} // namespace kiln

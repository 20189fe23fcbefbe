//===- QkvKernel.cpp - kiln.fused_qkv for decode --------------------------===//
//
// The QKV matmul with the RMSNorm prologue and the cache-write epilogue.
// Each warp streams a pair of W's rows in one loop (kiln_gemv_pair in the
// prelude, as the decode GEMVs do): two columns of q (stored as the
// result), the two columns of k that RoPE rotates together (rotated and
// stored in the cache), or two columns of v (stored in the cache).
// Positions and the block table are read on the device, so the launch is
// the same for every step. A quantized weight's is the quantized GEMV's
// (QuantGemmKernel.cpp), with the same tasks. qkvShape() writes what decode's
// kernel and prefill's epilogue (QkvEpilogueKernel.cpp) share.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/raw_ostream.h"

#include <cmath>

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
  s.taskCount = qw + kTasks + kvw;
  auto eps = qkv.getNormEpsilon();

  llvm::raw_string_ostream header(s.header);
  header << "\n// kernel " << kernelFor(op).kernel << ": [q | k | v] = x[S, "
         << s.k << "] . W[" << s.n << ", " << s.k << "]^T"
         << (eps ? ", RMSNorm" : "") << (rope ? ", RoPE on k" : "")
         << ", k and v into layer " << qkv.getLayer() << "'s cache\n";
  header << "constexpr int K = " << s.k << ", N = " << s.n
         << ", VEC = " << vectorWidth(s.k, opts.maxVectorWidth) << ";\n";
  header << "constexpr bool NORM = " << (eps ? "true" : "false") << ";\n";
  header << "constexpr float EPS = "
         << floatLiteral(eps ? eps->convertToDouble() : 0.0) << ";\n";

  llvm::raw_string_ostream os(s.tasks);
  std::optional<double> theta;
  if (rope)
    theta = qkv.getRopeTheta()->convertToDouble();
  os << ropePrelude(cache.getHeadDim(), theta, qkv.getRopeLinear(),
                    qkv.getRopeDynamicAttr());
  os << "constexpr int QW = " << qw << ", KVW = " << kvw
     << ", DH = " << cache.getHeadDim() << ", KV_HEADS = " << cache.getKvHeads()
     << ", K_TASKS = " << kTasks << ", TASKS = " << s.taskCount << ";\n"
     << poolConstants(op) << kvCachePrelude(cache);
  os << "constexpr bool ROPE = " << (rope ? "true" : "false")
     << ", INTERLEAVED = " << (interleaved ? "true" : "false") << ";\n";
  os << R"cuda(

// One task of a token's [q | k | v] row: a column of q (stored in q), a
// column or a rotated pair of k, or a column of v (stored in the token's
// slot of the layer's keys or values; a quantized cache's heads are
// kiln_qkv_head's, not tasks). value(col) is column col of the matmul;
// only threads with `store` write. len: the token's sequence length for
// RoPE (kiln_rope_length).
template <class Value>
__device__ __forceinline__ void kiln_qkv_task(int task, int pos, int len,
                                              long long slot, Value value,
                                              bool store,
                                              __half *q, kiln_kv_t *k_cache,
                                              kiln_kv_t *v_cache) {
  if (task < QW) {
    const float y = value(task);
    if (store)
      q[task] = __float2half(y);
  } else if constexpr (KV_QUANT) {
    return;
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
        kiln_rope_sincos(pos, len, t % (DH / 2), &s, &c);
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

// Head h of the token's [k heads | v heads] (k rotated by RoPE) into slot
// `slot` of a quantized cache, by one warp: codes at k_cache/v_cache
// [slot, KVW], the scale at k_scales/v_scales [slot, KV_HEADS].
template <class Value>
__device__ __forceinline__ void
kiln_qkv_head(int h, int pos, int len, long long slot, Value value,
              kiln_kv_t *k_cache,
              kiln_kv_t *v_cache, __half *k_scales, __half *v_scales) {
  const bool key = h < KV_HEADS;
  const int head = key ? h : h - KV_HEADS;
  const int col0 = QW + (key ? 0 : KVW) + head * DH;
  auto element = [&](int d) { return value(col0 + d); };
  float x[(DH + 31) / 32];
#pragma unroll
  for (int i = 0; i < (DH + 31) / 32; ++i) {
    const int d = min(int(threadIdx.x & 31) + 32 * i, DH - 1);
    x[i] = ROPE && key ? kiln_rope_rotate<DH, INTERLEAVED>(element, d, pos, len)
                       : element(d);
  }
  kiln_kv_store_head<DH>(x, (key ? k_cache : v_cache) + slot * KVW + head * DH,
                         (key ? k_scales : v_scales) + slot * KV_HEADS + head);
}

// The task of column col of [q | k | v] (-1: the second column of a
// rotated pair of k, which its first column's task stores).
__device__ __forceinline__ int kiln_qkv_task_of(int col) {
  if (col < QW)
    return col;
  if (col >= QW + KVW)
    return col - QW - KVW + QW + K_TASKS;
  const int e = col - QW;
  if constexpr (!ROPE)
    return QW + e;
  const int d = e % DH, head = e - d;
  if constexpr (INTERLEAVED) // pairs (2i, 2i + 1)
    return d % 2 ? -1 : QW + (head + d) / 2;
  return d < DH / 2 ? QW + head / 2 + d : -1; // pairs (i, i + DH / 2)
}
)cuda";
  header << s.tasks;
  return s;
}

llvm::Expected<CudaKernel> emitQkvGemv(Operation *op,
                                       const CodegenOptions &opts) {
  if (hasQuantizedWeight(op)) // dequantized in registers, on tensor cores
    return emitQuantGemm(op, opts, Phase::decode, /*fused=*/true);
  if (llvm::Error e = requireDenseWeight(op->getOperand(1).getType()))
    return std::move(e);
  if (cast<KVCacheType>(cast<FusedQKVOp>(op).getCache().getType())
          .isQuantized())
    return llvm::createStringError(
        "the qkv_gemv template writes an f16 cache; a quantized cache's "
        "heads are the qkv_epilogue's");
  auto shape = qkvShape(op, opts);
  if (!shape)
    return shape.takeError();
  int warps = opts.gemvWarps, splitK = opts.gemvSplitK;
  // A warp's pair of W's rows: two columns of q, a rotated pair of k (two
  // columns of k without RoPE), two columns of v; odd widths end with one.
  auto cache = cast<KVCacheType>(cast<FusedQKVOp>(op).getCache().getType());
  int64_t kvw = cache.getSlotWidth(), qw = shape->n - 2 * kvw;
  int64_t pairs = (qw + 1) / 2 + 2 * ((kvw + 1) / 2);

  CudaKernel k = kernelFor(op, opts.kernelSuffix);
  k.params = {{ParamKind::Activation, "x", "const __half *"},
              {ParamKind::Weight, "w", "const __half *"},
              {ParamKind::KCache, "k_cache", "__half *"},
              {ParamKind::VCache, "v_cache", "__half *"},
              {ParamKind::BlockTable, "block_table", "const int *"},
              {ParamKind::RowSequence, "seqs", "const int *"},
              {ParamKind::Positions, "positions", "const int *"},
              {ParamKind::Activation, "q", "__half *"}};
  k.grid = {(pairs + warps - 1) / warps, 1, 1};
  k.blockThreads = 32 * warps * splitK;
  k.source = cudaPrelude() + shape->header +
             "constexpr int PAIRS = " + std::to_string(pairs) +
             ";\nconstexpr int WARPS = " + std::to_string(warps) +
             ", SPLIT_K = " + std::to_string(splitK) +
             ", UNROLL = " + std::to_string(opts.gemvUnroll) + ";\n" +
             R"cuda(
// Pair p's tasks of kiln_qkv_task (the second -1 when there is none) and
// the two columns of [q | k | v] they read: the first QP pairs take
// columns of q, the next KPAIRS rotated pairs of k (pairs of columns of k
// without RoPE), the rest pairs of columns of v.
constexpr int QP = (QW + 1) / 2, KP = (KVW + 1) / 2;
constexpr int KPAIRS = ROPE ? K_TASKS : KP;
__device__ __forceinline__ void kiln_qkv_pair(int p, int &task_a, int &task_b,
                                              int &col_a, int &col_b) {
  // A pair of columns: t of the block of `width` columns at column col0,
  // whose tasks start at task0.
  int t = p, width = QW, col0 = 0, task0 = 0;
  if (p >= QP + KPAIRS) {
    t = p - QP - KPAIRS, width = KVW, col0 = QW + KVW, task0 = QW + K_TASKS;
  } else if (p >= QP) {
    t = p - QP, width = KVW, col0 = QW, task0 = QW;
    if constexpr (ROPE) { // one task, the two columns it rotates
      int a, b;
      kiln_rope_pair<DH, INTERLEAVED>(t, a, b);
      task_a = QW + t, task_b = -1, col_a = QW + a, col_b = QW + b;
      return;
    }
  }
  const bool two = 2 * t + 1 < width;
  task_a = task0 + 2 * t, task_b = two ? task_a + 1 : -1;
  col_a = col0 + 2 * t, col_b = two ? col_a + 1 : col_a;
}

// x [1, K] f16, w [N = QW + 2 KVW, K] f16, k_cache/v_cache: this layer's
// keys and values in the pool, slot-major [slot, KVW] f16; block_table
// [sequences, TABLE_BLOCKS] i32, seqs [1] i32, positions [1] i32; q [1, QW]
// f16.
// grid (ceil(PAIRS / WARPS)), block (32 * WARPS * SPLIT_K): SPLIT_K warps
// per pair of W's rows, each over a span of K
constexpr int THREADS = 32 * WARPS * SPLIT_K;
extern "C" __global__ void __launch_bounds__(
    THREADS, kiln_gemv_min_blocks<THREADS, UNROLL>) )cuda" +
             k.entry + "(" + kernelParameters(k) + R"cuda() {
  kiln_launch_dependents();
  const int lane = threadIdx.x & 31;
  const int pair = blockIdx.x * WARPS + (threadIdx.x >> 5) / SPLIT_K;
  const bool active = pair < PAIRS;
  int task_a = 0, task_b = -1, col_a = 0, col_b = 0;
  if (active)
    kiln_qkv_pair(pair, task_a, task_b, col_a, col_b);
  // The token's slot is read while W streams in, not after (the host's
  // inputs: before kiln_gemv_pair's wait for the previous kernel).
  const int pos = positions[0];
  const int *table = block_table + (long long)seqs[0] * TABLE_BLOCKS;
  const long long slot = kiln_slot(table, pos, BLOCK_SIZE) * KVW;
  const float2 dot = kiln_gemv_pair<K, VEC, UNROLL, SPLIT_K, THREADS, NORM>(
      x, w + (long long)col_a * K, w + (long long)col_b * K, active, EPS);
  if (!active || (threadIdx.x >> 5) % SPLIT_K != 0)
    return;
  // Lane 0 stores the first task, lane 1 the second.
  auto value = [&](int col) { return col == col_a ? dot.x : dot.y; };
  const int task = lane == 0 ? task_a : lane == 1 ? task_b : -1;
  if (task >= 0)
    kiln_qkv_task(task, pos, pos + 1, slot, value, true, q, k_cache, v_cache);
}
)cuda";
  return k;
}

} // namespace kiln

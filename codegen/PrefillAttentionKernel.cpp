//===- PrefillAttentionKernel.cpp - causal kiln.attention over S tokens ---===//
//
// Tiled flash attention for prefill. Block (tile, h) takes QROWS query rows
// of head h (ROWS per warp), rotated by RoPE and scaled as they are loaded
// into shared memory, and walks the keys 0 ..= the tile's last position 32
// at a time: the block stages 32 keys and values of kv head h / GROUP from
// the paged pool in shared memory, then each warp scores its rows against
// them (lane j takes key j), masks keys past each row's position, and
// updates the row's online softmax (running max m, sum l, weighted values
// acc in fp32, a lane per DPL head dims). The keys come from the pool, so
// a prompt continued from an earlier prefill (a chunk) sees its history.
// Padding rows (at and past count) are skipped. A prefill's rows are all
// one sequence (that of row 0): a block stages one table's keys.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

llvm::Expected<CudaKernel> emitPrefillAttention(Operation *op,
                                                const CodegenOptions &opts) {
  auto shape = attentionShape(op);
  if (!shape)
    return shape.takeError();
  int64_t heads = shape->heads, dh = shape->dh;
  if (dh % 2)
    return llvm::createStringError("the prefill attention template takes an "
                                   "even head dim (it moves pairs of halves)");
  int warps = opts.attentionWarps, rows = opts.prefillAttentionRows;

  CudaKernel k = kernelFor(op, opts.kernelSuffix);
  k.params = shape->params;
  k.grid = {1, heads, 1};
  k.rowAxis = 0;
  k.rowsPerBlock = warps * rows;
  k.blockThreads = 32 * warps;

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << shape->header;
  os << "constexpr int WARPS = " << warps << ", ROWS = " << rows
     << ", QROWS = WARPS * ROWS, TILE = 32; // causal, tiled\n";
  os << "constexpr int LOAD = "
     << (dh % 8 == 0   ? 8
         : dh % 4 == 0 ? 4
                       : 2)
     << "; // halves per key load\n";
  os << R"cuda(
// N halves from global memory in one load (N * 2 bytes, aligned).
template <int N>
__device__ __forceinline__ void kiln_copy(__half2 *dst, const __half *src) {
  struct alignas(2 * N) Chunk {
    __half2 h[N / 2];
  };
  const Chunk c = *reinterpret_cast<const Chunk *>(src);
#pragma unroll
  for (int e = 0; e < N / 2; ++e)
    dst[e] = c.h[e];
}

// q [S, H*DH] f16, k_cache/v_cache: this layer's keys and values in the pool
// ([slot, KVH*DH] f16), block_table [sequences, TABLE_BLOCKS] i32, seqs
// [S] i32 (all the same sequence), positions [S] i32, count [1] i32, out
// [S, H*DH] f16.
// grid (ceil(S / QROWS), H), block (32 * WARPS)
extern "C" __global__ void __launch_bounds__(32 * WARPS) )cuda"
     << k.entry << "(" << kernelParameters(k) << R"cuda() {
  __shared__ float qs[QROWS][DH];            // the tile's queries, f32
  __shared__ __half ks[TILE][DH + 2];        // keys; the odd word stride
                                             // spreads lanes over banks
  __shared__ __half vs[TILE][DH];            // values
  __shared__ int last_pos;
  const int h = blockIdx.y, g = h / GROUP, n = count[0];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row0 = blockIdx.x * QROWS;
  if (row0 >= n)
    return; // all padding: the whole block leaves together
  const int *table = block_table + (long long)seqs[0] * TABLE_BLOCKS;

  for (int i = threadIdx.x; i < QROWS * DH; i += blockDim.x) {
    const int r = i / DH, d = i % DH, row = row0 + r;
    float x = 0.0f;
    if (row < n) {
      const __half *head = q + (long long)row * (H * DH) + h * DH;
      x = ROPE ? kiln_rope_element<DH, INTERLEAVED>(head, d, positions[row],
                                                   kiln_inv_freq)
               : __half2float(head[d]);
    }
    qs[r][d] = x * SCALE;
  }
  if (threadIdx.x == 0) {
    int last = 0;
    for (int r = 0; r < QROWS && row0 + r < n; ++r)
      last = max(last, positions[row0 + r]);
    last_pos = last;
  }
  __syncthreads();
  const int last = last_pos;

  float m[ROWS], l[ROWS], acc[ROWS][DPL];
  int pos[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int row = row0 + warp * ROWS + r;
    pos[r] = row < n ? positions[row] : -1; // -1: no key is visible
    m[r] = KILN_NEG_INF;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < DPL; ++e)
      acc[r][e] = 0.0f;
  }

  for (int t0 = 0; t0 <= last; t0 += TILE) {
    // LOAD halves (16 bytes when the head allows) per thread and step.
    for (int i = threadIdx.x; i < TILE * (DH / LOAD); i += blockDim.x) {
      const int j = i / (DH / LOAD), d = LOAD * (i % (DH / LOAD)), t = t0 + j;
      __half2 kv[LOAD / 2], vv[LOAD / 2];
      if (t <= last) {
        const long long at =
            kiln_slot(table, t, BLOCK_SIZE) * (KVH * DH) + g * DH + d;
        kiln_copy<LOAD>(kv, k_cache + at);
        kiln_copy<LOAD>(vv, v_cache + at);
      } else {
#pragma unroll
        for (int e = 0; e < LOAD / 2; ++e)
          kv[e] = vv[e] = __float2half2_rn(0.0f);
      }
#pragma unroll
      for (int e = 0; e < LOAD / 2; ++e) {
        *reinterpret_cast<__half2 *>(&ks[j][d + 2 * e]) = kv[e];
        *reinterpret_cast<__half2 *>(&vs[j][d + 2 * e]) = vv[e];
      }
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      if (t0 > pos[r])
        continue; // every key of the tile is in this row's future
      const float *qr = qs[warp * ROWS + r];
      float score = KILN_NEG_INF;
      if (t0 + lane <= pos[r]) {
        float dot = 0.0f;
#pragma unroll 8
        for (int d = 0; d < DH; d += 2) {
          const float2 kf =
              __half22float2(*reinterpret_cast<const __half2 *>(&ks[lane][d]));
          dot += qr[d] * kf.x + qr[d + 1] * kf.y;
        }
        score = dot;
      }
      const float m_new = fmaxf(m[r], kiln_warp_max(score));
      const float correction = expf(m[r] - m_new); // 0 while m is -inf
      const float p = expf(score - m_new);          // 0 for masked keys
      l[r] = l[r] * correction + kiln_warp_sum(p);
#pragma unroll
      for (int e = 0; e < DPL; ++e)
        acc[r][e] *= correction;
      for (int j = 0; j < TILE; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
        for (int e = 0; e < DPL; ++e)
          if (lane + 32 * e < DH)
            acc[r][e] += pj * __half2float(vs[j][lane + 32 * e]);
      }
      m[r] = m_new;
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int row = row0 + warp * ROWS + r;
    if (row >= n)
      continue;
    __half *o = out + (long long)row * (H * DH) + h * DH;
#pragma unroll
    for (int e = 0; e < DPL; ++e)
      if (lane + 32 * e < DH)
        o[lane + 32 * e] = __float2half(acc[r][e] / l[r]);
  }
}
)cuda";
  k.source = src;
  return k;
}

} // namespace kiln

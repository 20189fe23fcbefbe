//===- DecodeAttentionKernel.cpp - kiln.attention for one new token -------===//
//
// Split-KV flash decoding, for one new token of each of `rows` sequences:
// decode's one row, or a batch's (the batched decode plans run it on
// @prefill's attention, whose rows are then sequences of their own, each
// with its table, position and scratch). Block (h, split, row) takes query
// head h of the row and one chunk of the row's keys; each warp walks every
// WARPS-th key of the chunk with an online softmax (running max m, sum l,
// weighted values acc in fp32), the warps merge in shared memory, and with
// several splits the last block of a head to finish (an atomic ticket) merges
// the splits' partials. Query head h reads kv head h / GROUP: grouped-query
// attention copies nothing. RoPE is applied to q as it is loaded; the scale is
// folded into q.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace kiln {

llvm::Expected<AttentionShape> attentionShape(Operation *op) {
  auto att = cast<AttentionOp>(op);
  auto q = cast<RankedTensorType>(att.getQuery().getType());
  if (llvm::Error e = requireF16(q.getElementType()))
    return std::move(e);
  AttentionShape s;
  s.heads = att.getHeads();
  s.kvHeads = att.getKvHeads();
  s.dh = q.getDimSize(1) / s.heads;
  s.params = {{ParamKind::Activation, "q", "const __half *"},
              {ParamKind::KCache, "k_cache", "const __half *"},
              {ParamKind::VCache, "v_cache", "const __half *"},
              {ParamKind::BlockTable, "block_table", "const int *"},
              {ParamKind::RowSequence, "seqs", "const int *"},
              {ParamKind::Positions, "positions", "const int *"},
              {ParamKind::Count, "count", "const int *"},
              {ParamKind::Activation, "out", "__half *"}};
  bool rope = att.getRopeTheta().has_value();
  bool interleaved = rope && *att.getRopeLayout() == RopeLayout::interleaved;
  llvm::raw_string_ostream os(s.header);
  os << "\n// kernel " << kernelFor(op).kernel << ": " << s.heads
     << " query heads on " << s.kvHeads << " kv heads of " << s.dh
     << (rope ? ", RoPE on q" : "") << "\n";
  // (Declared without RoPE too: a discarded `if constexpr` branch in a
  // non-template function still names it.)
  os << (rope ? invFreqTable(s.dh, att.getRopeTheta()->convertToDouble())
              : "__constant__ float kiln_inv_freq[1] = {0.0f};\n");
  os << "constexpr int H = " << s.heads << ", KVH = " << s.kvHeads
     << ", DH = " << s.dh << ", GROUP = " << s.heads / s.kvHeads << ";\n"
     << poolConstants(op);
  os << "constexpr int DPL = (DH + 31) / 32; // head dims per lane\n";
  os << "constexpr bool ROPE = " << (rope ? "true" : "false")
     << ", INTERLEAVED = " << (interleaved ? "true" : "false") << ";\n";
  os << "constexpr float SCALE = "
     << floatLiteral(att.getScale().convertToDouble()) << ";\n";
  return s;
}

llvm::Expected<CudaKernel>
emitDecodeAttention(Operation *op, const CodegenOptions &opts, bool batch) {
  auto shape = attentionShape(op);
  if (!shape)
    return shape.takeError();
  int64_t heads = shape->heads, dh = shape->dh;
  // Enough warps that one thread per head dimension can merge them.
  int warps = std::max<int>(opts.attentionWarps, int((dh + 31) / 32));

  CudaKernel k =
      kernelFor(op, std::string(batch ? kBatchSuffix : "") + opts.kernelSuffix);
  k.params = shape->params;
  k.params.insert(k.params.end(),
                  {{ParamKind::Workspace, "workspace", "float *"},
                   {ParamKind::Counters, "counters", "unsigned *"}});
  // Key splits: --kernel-options kv-splits, else enough blocks of all the
  // rows' heads to fill the GPU twice (fewer splits for larger batches).
  k.grid = {heads, std::max(opts.kvSplits, 1), 1};
  if (opts.kvSplits <= 0)
    k.fillBlocks = 2 * opts.smCount;
  k.rowAxis = 2;
  k.blockThreads = 32 * warps;
  k.workspacePerBlock = dh + 2;
  k.countersPerBlock = 1;

  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << shape->header;
  os << "constexpr int WARPS = " << warps << ";\n";
  os << R"cuda(
// q [rows, H*DH] f16, k_cache/v_cache: this layer's keys and values in the
// pool ([slot, KVH*DH] f16), block_table [sequences, TABLE_BLOCKS] i32, seqs
// [rows] i32, positions [rows] i32, count [1] i32, out [rows, H*DH] f16,
// workspace [rows, H, splits, DH + 2] f32, counters [rows, H] u32 (zero
// between launches).
// grid (H, splits, rows), block (32 * WARPS)
extern "C" __global__ void __launch_bounds__(32 * WARPS) )cuda"
     << k.entry << "(" << kernelParameters(k) << R"cuda() {
  __shared__ float sm_m[WARPS], sm_l[WARPS], sm_acc[WARPS][DH];
  __shared__ bool last;
  const int h = blockIdx.x, split = blockIdx.y, g = h / GROUP;
  const int row = blockIdx.z, SPLITS = gridDim.y;
  if (row >= count[0])
    return; // padding: the whole block leaves together
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int pos = positions[row], keys = pos + 1;
  const int *table = block_table + (long long)seqs[row] * TABLE_BLOCKS;
  q += (long long)row * (H * DH);
  out += (long long)row * (H * DH);
  workspace += (long long)row * H * SPLITS * (DH + 2);
  counters += (long long)row * H;
  const int chunk = (keys + SPLITS - 1) / SPLITS;
  const int begin = split * chunk, end = min(keys, begin + chunk);

  // This lane's dims of q, rotated and scaled.
  float qv[DPL];
#pragma unroll
  for (int e = 0; e < DPL; ++e) {
    const int d = lane * DPL + e;
    qv[e] = 0.0f;
    if (d >= DH)
      continue;
    const float x =
        ROPE ? kiln_rope_element<DH, INTERLEAVED>(q + h * DH, d, pos, kiln_inv_freq)
             : __half2float(q[h * DH + d]);
    qv[e] = x * SCALE;
  }

  // Online softmax over this warp's keys.
  float m = KILN_NEG_INF, l = 0.0f, acc[DPL];
#pragma unroll
  for (int e = 0; e < DPL; ++e)
    acc[e] = 0.0f;
  for (int t = begin + warp; t < end; t += WARPS) {
    const long long base =
        kiln_slot(table, t, BLOCK_SIZE) * (KVH * DH) + g * DH;
    // This lane's DPL dims of the key and the value, in one load each when
    // 32 lanes cover the head exactly.
    float kf[DPL], vf[DPL];
    if constexpr (DH % 32 == 0) {
      kiln_load<DPL>(k_cache + base + lane * DPL, kf);
      kiln_load<DPL>(v_cache + base + lane * DPL, vf);
    } else {
#pragma unroll
      for (int e = 0; e < DPL; ++e) {
        const bool in = lane * DPL + e < DH;
        kf[e] = in ? __half2float(k_cache[base + lane * DPL + e]) : 0.0f;
        vf[e] = in ? __half2float(v_cache[base + lane * DPL + e]) : 0.0f;
      }
    }
    float score = 0.0f;
#pragma unroll
    for (int e = 0; e < DPL; ++e)
      score += qv[e] * kf[e]; // qv is 0 past DH
    score = kiln_warp_sum(score);
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new); // 0 while m is -inf
    const float p = expf(score - m_new);
    l = l * correction + p;
#pragma unroll
    for (int e = 0; e < DPL; ++e)
      acc[e] = acc[e] * correction + p * vf[e];
    m = m_new;
  }

  // Merge the warps: thread d owns head dim d.
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < DPL; ++e)
    if (lane * DPL + e < DH)
      sm_acc[warp][lane * DPL + e] = acc[e];
  __syncthreads();
  float M = KILN_NEG_INF;
  for (int w = 0; w < WARPS; ++w)
    M = fmaxf(M, sm_m[w]);
  float L = 0.0f, A = 0.0f;
  const int d = threadIdx.x;
  for (int w = 0; w < WARPS; ++w) {
    const float weight = sm_m[w] == KILN_NEG_INF ? 0.0f : expf(sm_m[w] - M);
    L += sm_l[w] * weight;
    if (d < DH)
      A += sm_acc[w][d] * weight;
  }
  if (SPLITS == 1) {
    if (d < DH)
      out[h * DH + d] = __float2half(A / L);
    return;
  }

  // Several splits: publish this split's (acc, m, l); the last to finish
  // merges them all and re-arms the counter for the next launch.
  float *mine = workspace + ((long long)h * SPLITS + split) * (DH + 2);
  if (d < DH)
    mine[d] = A;
  if (d == 0) {
    mine[DH] = M;
    mine[DH + 1] = L;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    last = atomicAdd(&counters[h], 1u) == SPLITS - 1;
  __syncthreads();
  if (!last)
    return;
  __threadfence();
  const float *all = workspace + (long long)h * SPLITS * (DH + 2);
  float MM = KILN_NEG_INF;
  for (int s = 0; s < SPLITS; ++s)
    MM = fmaxf(MM, __ldcg(all + s * (DH + 2) + DH));
  float LL = 0.0f, AA = 0.0f;
  for (int s = 0; s < SPLITS; ++s) {
    const float ms = __ldcg(all + s * (DH + 2) + DH);
    const float weight = ms == KILN_NEG_INF ? 0.0f : expf(ms - MM);
    LL += __ldcg(all + s * (DH + 2) + DH + 1) * weight;
    if (d < DH)
      AA += __ldcg(all + s * (DH + 2) + d) * weight;
  }
  if (d < DH)
    out[h * DH + d] = __float2half(AA / LL);
  if (threadIdx.x == 0)
    counters[h] = 0;
}
)cuda";
  k.source = src;
  return k;
}

} // namespace kiln

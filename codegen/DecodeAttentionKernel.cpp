//===- DecodeAttentionKernel.cpp - kiln.attention for one new token -------===//
//
// Flash decoding, for one new token of each of `rows` sequences: decode's
// one row, or a batch's (the batched decode plans run it on @prefill's
// attention, whose rows are then sequences of their own, each with its
// table, position and scratch). Block (kvh, split, row) serves all GROUP
// query heads of KV head kvh, so each key and value is loaded once for the
// group, over one split of the row's keys. A lane loads VEC halves (16
// bytes) of a key at a time; LPK lanes cover a key, so one load of the warp
// covers KPW key slots (HS of which load the same key for a share of a
// large group's heads), and a tile of UNROLL loads holds KEYS keys; the
// next tile's loads are in flight while one is computed. A warp walks its
// own contiguous run of tiles, reading the block table once a page (a page
// ahead), with an online softmax in fp32 (running max m, sum l, weighted
// values acc) per head and per key slot; the key slots merge by shuffles,
// the warps in shared memory, and with several splits the last block of a
// group to finish (an atomic ticket) merges the splits' partials. The grid
// is one wave of blocks; a row uses as many splits as its context fills (at
// least a tile a warp). RoPE is applied to q as it is staged; the scale and
// log2(e) are folded into q (exp2 below). It waits for the previous kernel
// (PDL), which wrote q and the new token's key and value, after reading
// the host's inputs (positions, the block table). docs/kernels.md has the
// why.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnDialect.h"
#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace kiln {

llvm::Expected<AttentionShape> attentionShape(Operation *op) {
  auto att = cast<AttentionOp>(op);
  auto q = cast<RankedTensorType>(att.getQuery().getType());
  if (llvm::Error e = requireF16(q.getElementType()))
    return std::move(e);
  auto read = att.getKeys().getDefiningOp<KVReadOp>();
  if (!read)
    return llvm::createStringError(
        "the attention templates read keys and values from the cache "
        "(kiln.kv_read)");
  AttentionShape s;
  s.heads = att.getHeads();
  s.kvHeads = att.getKvHeads();
  s.dh = q.getDimSize(1) / s.heads;
  s.cache = cast<KVCacheType>(read.getCache().getType());
  s.params = {{ParamKind::Activation, "q", "const __half *"}};
  llvm::append_range(s.params, kvCacheParams(s.cache, /*readOnly=*/true));
  s.params.insert(s.params.end(),
                  {{ParamKind::BlockTable, "block_table", "const int *"},
                   {ParamKind::RowSequence, "seqs", "const int *"},
                   {ParamKind::Positions, "positions", "const int *"},
                   {ParamKind::Count, "count", "const int *"},
                   {ParamKind::Activation, "out", "__half *"}});
  bool rope = att.getRopeTheta().has_value();
  bool interleaved = rope && *att.getRopeLayout() == RopeLayout::interleaved;
  llvm::raw_string_ostream os(s.header);
  os << "\n// kernel " << kernelFor(op).kernel << ": " << s.heads
     << " query heads on " << s.kvHeads << " kv heads of " << s.dh
     << (rope ? ", RoPE on q" : "") << "\n";
  std::optional<double> theta;
  if (rope)
    theta = att.getRopeTheta()->convertToDouble();
  os << ropePrelude(s.dh, theta, att.getRopeLinear(), att.getRopeDynamicAttr());
  os << "constexpr int H = " << s.heads << ", KVH = " << s.kvHeads
     << ", DH = " << s.dh << ", GROUP = " << s.heads / s.kvHeads << ";\n"
     << poolConstants(op) << kvCachePrelude(s.cache);
  os << "constexpr int DPL = (DH + 31) / 32; // head dims per lane\n";
  os << "constexpr bool ROPE = " << (rope ? "true" : "false")
     << ", INTERLEAVED = " << (interleaved ? "true" : "false") << ";\n";
  os << "constexpr float SCALE = "
     << floatLiteral(att.getScale().convertToDouble()) << ";\n";
  return s;
}

DecodeAttentionTiling decodeAttentionTiling(int64_t dh, int64_t group,
                                            const CodegenOptions &opts,
                                            int64_t elementBytes) {
  DecodeAttentionTiling t;
  t.vec = vectorWidth(dh, opts.maxVectorWidth);
  t.chunks = int(dh / t.vec);
  t.lanesPerKey = 1;
  while (t.lanesPerKey < std::min(t.chunks, 32))
    t.lanesPerKey *= 2;
  t.chunksPerLane = (t.chunks + t.lanesPerKey - 1) / t.lanesPerKey;
  t.keysPerLoad = 32 / t.lanesPerKey;
  // A warp has two tiles' loads in flight (the next is loaded while one is
  // computed): up to 8 keys (16 of 8-bit codes), as many as a lane's
  // registers hold at 16 warps an SM (128 a thread). A lane's registers,
  // about: its heads' sums (acc, and a score a key), both tiles' keys and
  // values (a register per two halves), the query and 40 more. A large group
  // splits its heads among the key slots of a load (`headSplits` lanes load the
  // same key, each for its share of the heads), which frees registers for more
  // keys.
  int lane = t.chunksPerLane * t.vec;
  auto registers = [&](int64_t heads, int unroll) {
    // (Codes are counted as halves: their decoded floats and scales take
    // what packing them saves; llama2-70b's group of 8 spills otherwise.)
    return int(heads * lane + heads * unroll + 2 * unroll * lane + lane + 40);
  };
  auto better = [&](const DecodeAttentionTiling &a,
                    const DecodeAttentionTiling &b) { // a over b?
    bool fitsA = registers(group / a.headSplits, a.unroll) <= 128;
    bool fitsB = registers(group / b.headSplits, b.unroll) <= 128;
    if (fitsA != fitsB)
      return fitsA;
    if (!fitsA)
      return registers(group / a.headSplits, a.unroll) <
             registers(group / b.headSplits, b.unroll);
    return a.keysPerTile() > b.keysPerTile(); // ties: fewer splits
  };
  DecodeAttentionTiling best = t;
  best.unroll = 0;
  for (int hs = 1; hs <= t.keysPerLoad && group % hs == 0; hs *= 2) {
    DecodeAttentionTiling c = t;
    c.headSplits = hs;
    int keys = int(16 / elementBytes);
    c.unroll = std::max(1, keys / (2 * (t.keysPerLoad / hs) * t.chunksPerLane));
    while (c.unroll > 1 && registers(group / hs, c.unroll) > 128)
      c.unroll /= 2;
    if (best.unroll == 0 || better(c, best))
      best = c;
  }
  t = best;
  // The warps' partials in shared memory: at most 32 KB of them.
  t.warps = int(std::clamp<int64_t>(8192 / (group * dh), 1,
                                    std::max(opts.attentionWarps, 1)));
  // As many blocks an SM as the registers hold (65536, in 8 a thread), up
  // to 32 warps: ptxas is held to them (__launch_bounds__), and the grid
  // is one wave of them.
  int perBlock =
      (registers(group / t.headSplits, t.unroll) + 7) / 8 * 8 * 32 * t.warps;
  t.minBlocks = std::clamp(65536 / perBlock, 1, std::max(1, 32 / t.warps));
  return t;
}

int64_t decodeAttentionSplits(const DecodeAttentionTiling &t,
                              int64_t gridSplits, int64_t keys, bool fixed) {
  if (fixed)
    return gridSplits;
  int64_t tiles = (keys + t.keysPerTile() - 1) / t.keysPerTile();
  return std::clamp<int64_t>((tiles + t.warps - 1) / t.warps, 1, gridSplits);
}

/// The most keys a sequence has: its whole table of blocks.
static int64_t poolTokens(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  if (auto pool = module ? module->getAttrOfType<KVPoolAttr>("kiln.kv_pool")
                         : KVPoolAttr())
    return pool.getTableBlocks() * pool.getBlockSize();
  auto fn = op->getParentOfType<FunctionOpInterface>();
  for (Type t : fn ? fn.getArgumentTypes() : ArrayRef<Type>())
    if (auto cache = dyn_cast<KVCacheType>(t))
      return cache.getCapacity();
  return kMaxFillSplits * 1024; // unknown: no limit from the context
}

llvm::Expected<CudaKernel>
emitDecodeAttention(Operation *op, const CodegenOptions &opts, bool batch) {
  auto shape = attentionShape(op);
  if (!shape)
    return shape.takeError();
  int64_t kvHeads = shape->kvHeads, dh = shape->dh;
  int64_t group = shape->heads / kvHeads;
  DecodeAttentionTiling t =
      decodeAttentionTiling(dh, group, opts, shape->cache.getElementBytes());

  CudaKernel k =
      kernelFor(op, std::string(batch ? kBatchSuffix : "") + opts.kernelSuffix);
  k.params = shape->params;
  k.params.insert(k.params.end(),
                  {{ParamKind::Workspace, "workspace", "float *"},
                   {ParamKind::Counters, "counters", "unsigned *"}});
  // Key splits: --kernel-options kv-splits (that many at every context),
  // else one wave of blocks of all the rows' groups, of which a row uses as
  // many as its context fills.
  k.grid = {kvHeads, std::max(opts.kvSplits, 1), 1};
  if (opts.kvSplits <= 0) {
    k.fillBlocks = int64_t(t.minBlocks) * opts.smCount;
    k.maxSplits = decodeAttentionSplits(t, kMaxFillSplits, poolTokens(op),
                                        /*fixed=*/false);
  }
  k.rowAxis = 2;
  k.blockThreads = 32 * t.warps;
  k.workspacePerBlock = group * (dh + 2);
  k.countersPerBlock = 1;

  const char *scales = kvScaleArguments(shape->cache); // kiln_load_tile's
  std::string src = cudaPrelude();
  llvm::raw_string_ostream os(src);
  os << shape->header;
  os << "constexpr int WARPS = " << t.warps << ", MIN_BLOCKS = " << t.minBlocks
     << ";\n";
  os << "constexpr int VEC = " << t.vec << ", CHUNKS = " << t.chunks
     << ", LPK = " << t.lanesPerKey << ", CPL = " << t.chunksPerLane
     << ", KPW = " << t.keysPerLoad << ", HS = " << t.headSplits
     << ", UNROLL = " << t.unroll << ", KEYS = " << t.keysPerTile() << ";\n";
  os << "constexpr bool AUTO_SPLITS = "
     << (opts.kvSplits <= 0 ? "true" : "false") << ";\n";
  os << R"cuda(// A key is CHUNKS loads of VEC halves; LPK lanes cover it, CPL chunks each
// (lanes past CHUNKS idle), so a load of the warp covers KPW key slots: HS
// of them load the same key for GS heads each, SLOTS keys a load, and a
// tile of UNROLL loads keeps KEYS keys in flight. A tile lies in one page
// of the pool when KEYS divides BLOCK_SIZE.
constexpr int GS = GROUP / HS, SLOTS = KPW / HS;
constexpr bool FULL = CHUNKS == LPK * CPL, PAGED = BLOCK_SIZE % KEYS == 0;
constexpr float LOG2E = 1.442695041f;

// The bits of VEC halves (or VEC codes), one load.
template <int W, bool CODES> struct kiln_kv_bits {
  using type = typename kiln_halves<W>::type;
};
template <> struct kiln_kv_bits<1, false> { using type = __half; };
template <> struct kiln_kv_bits<16, true> { using type = uint4; };
template <> struct kiln_kv_bits<8, true> { using type = uint2; };
template <> struct kiln_kv_bits<4, true> { using type = unsigned; };
template <> struct kiln_kv_bits<2, true> { using type = unsigned short; };
template <> struct kiln_kv_bits<1, true> { using type = unsigned char; };
using kiln_kv = kiln_kv_bits<VEC, KV_QUANT>::type;

// A load's VEC elements as floats (a quantized cache's: KV_UNIT times less
// than the codes' values; the scale is applied to the dot product and to
// the probability).
template <int W>
__device__ __forceinline__ void kiln_kv_floats(
    const typename kiln_kv_bits<W, KV_QUANT>::type &raw, float *f) {
  if constexpr (KV_QUANT && W % 4 == 0) {
    const unsigned *w = reinterpret_cast<const unsigned *>(&raw);
#pragma unroll
    for (int i = 0; i < W / 4; ++i)
      kiln_kv_decode4(w[i], f + 4 * i);
  } else if constexpr (KV_QUANT) {
    const unsigned char *c = reinterpret_cast<const unsigned char *>(&raw);
#pragma unroll
    for (int i = 0; i < W; ++i)
      f[i] = kiln_kv_decode1(c[i]);
  } else if constexpr (W == 1) {
    f[0] = __half2float(raw);
  } else {
    const __half2 *h = reinterpret_cast<const __half2 *>(&raw);
#pragma unroll
    for (int i = 0; i < W / 2; ++i) {
      const float2 t = __half22float2(h[i]);
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  }
}

// Tile t's keys and values for this lane (key `slot` of each load, chunk
// `part`): UNROLL keys, CPL chunks each, and a quantized cache's scales of
// them times KV_UNIT (ks, vs). A key from kend on loads the tile's first
// key instead (its score is masked); in a page (`block`), the keys of a
// tile lie SLOTS slots apart.
__device__ __forceinline__ void
kiln_load_tile(const kiln_kv_t *__restrict__ k_cache,
               const kiln_kv_t *__restrict__ v_cache,
               const __half *__restrict__ k_scales,
               const __half *__restrict__ v_scales, const int *table,
               long long block, int t, int kend, int kvh, int slot, int part,
               kiln_kv (&kr)[UNROLL][CPL], kiln_kv (&vr)[UNROLL][CPL],
               float (&ks)[UNROLL], float (&vs)[UNROLL]) {
  const int first = t * KEYS + slot;
  const long long tile_slot = block * BLOCK_SIZE + (t * KEYS) % BLOCK_SIZE;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const bool in = first + u * SLOTS < kend;
    const long long at =
        PAGED ? tile_slot + (in ? u * SLOTS + slot : 0)
              : kiln_slot(table, in ? first + u * SLOTS : t * KEYS, BLOCK_SIZE);
    const long long base = (at * KVH + kvh) * DH + part * VEC;
    if constexpr (KV_QUANT) {
      ks[u] = __half2float(k_scales[at * KVH + kvh]) * KV_UNIT;
      vs[u] = __half2float(v_scales[at * KVH + kvh]) * KV_UNIT;
    }
#pragma unroll
    for (int j = 0; j < CPL; ++j) {
      kr[u][j] = vr[u][j] = kiln_kv{};
      if (FULL || part + j * LPK < CHUNKS) {
        kr[u][j] = *reinterpret_cast<const kiln_kv *>(k_cache + base + j * LPK * VEC);
        vr[u][j] = *reinterpret_cast<const kiln_kv *>(v_cache + base + j * LPK * VEC);
      }
    }
  }
}

// q [rows, H*DH] f16, k_cache/v_cache: this layer's keys and values in the
// pool ([slot, KVH*DH] f16, or codes with k_scales/v_scales [slot, KVH]
// f16), block_table [sequences, TABLE_BLOCKS] i32, seqs
// [rows] i32, positions [rows] i32, count [2] i32 (rows, a prefill's
// sequence length), out [rows, H*DH] f16,
// workspace [rows, KVH, gridDim.y, GROUP, DH + 2] f32 (a split's acc, m,
// l), counters [rows, KVH, gridDim.y] u32 (the first KVH of a row used;
// zero between launches).
// grid (KVH, splits, rows), block (32 * WARPS)
extern "C" __global__ void __launch_bounds__(32 * WARPS, MIN_BLOCKS) )cuda"
     << k.entry << "(" << kernelParameters(k) << R"cuda() {
  __shared__ float sm_q[GROUP][DH]; // the group's queries, rotated, scaled
  __shared__ float sm_m[WARPS][GROUP], sm_l[WARPS][GROUP];
  __shared__ float sm_acc[WARPS][GROUP][DH];
  __shared__ bool last;
  kiln_launch_dependents();
  const int kvh = blockIdx.x, split = blockIdx.y, row = blockIdx.z;
  if (row >= count[0]) {
    kiln_wait_previous_grid(); // even to leave (the prelude says why)
    return; // padding: the whole block leaves together
  }
  const int pos = positions[row], keys = pos + 1;
  const int tiles = (keys + KEYS - 1) / KEYS;
  // Splits of this row's context: at least a tile a warp.
  const int splits =
      AUTO_SPLITS ? min((int)gridDim.y, max(1, (tiles + WARPS - 1) / WARPS))
                  : (int)gridDim.y;
  if (split >= splits) {
    kiln_wait_previous_grid();
    return; // a shorter context than the grid was sized for
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // This lane's chunk of a key, its share of the heads (heads hs * GS ...),
  // its key of a load.
  const int part = lane % LPK, hs = lane / LPK % HS, slot = lane / (LPK * HS);
  const int *table =
      block_table + (long long)kiln_input(seqs + row) * TABLE_BLOCKS;
  const long long task = (long long)row * KVH + kvh;
  q += task * GROUP * DH;
  out += task * GROUP * DH;
  workspace += task * gridDim.y * GROUP * (DH + 2);
  counters += task;

  // This warp's tiles: the split's, evenly among its warps, contiguous.
  const int per_split = (tiles + splits - 1) / splits;
  const int split_begin = split * per_split;
  const int split_end = min(tiles, split_begin + per_split);
  const int per_warp = (split_end - split_begin + WARPS - 1) / WARPS;
  const int t0 = split_begin + warp * per_warp;
  const int t1 = min(split_end, t0 + per_warp);
  const int kend = min(keys, t1 * KEYS); // this warp's keys end here
  // The block of the first tile's page, and of the next page: read once a
  // page, a page ahead. The block table is the host's: read before the
  // wait for the previous kernel, which wrote q and this token's key and
  // value.
  const int last_page = (kend - 1) / BLOCK_SIZE;
  int page = t0 * KEYS / BLOCK_SIZE;
  long long block = 0, next = 0;
  if (t0 < t1) {
    if constexpr (PAGED) {
      block = kiln_input(table + page);
      next = kiln_input(table + min(page + 1, last_page));
    }
  }
  kiln_wait_previous_grid();

  const int len = kiln_rope_length(pos, count);
  for (int e = threadIdx.x; e < GROUP * DH; e += 32 * WARPS) {
    const int g = e / DH, d = e % DH;
    const float x =
        ROPE ? kiln_rope_rotated<DH, INTERLEAVED>(q + g * DH, d, pos, len)
             : __half2float(q[g * DH + d]);
    sm_q[g][d] = x * (SCALE * LOG2E);
  }
  __syncthreads();

  // Online softmax per head, per key of a load (merged below).
  float m[GS], l[GS], acc[GS][CPL * VEC];
#pragma unroll
  for (int g = 0; g < GS; ++g) {
    m[g] = KILN_NEG_INF;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < CPL * VEC; ++i)
      acc[g][i] = 0.0f;
  }
  if (t0 < t1) {
    // Tile t + 1's loads are in flight while tile t is computed.
    kiln_kv kr[UNROLL][CPL], vr[UNROLL][CPL];
    float ksr[UNROLL] = {}, vsr[UNROLL] = {}; // a quantized cache's scales x KV_UNIT
    kiln_load_tile(k_cache, v_cache, )cuda"
     << scales << R"cuda(, table, block, t0, kend, kvh, slot,
                   part, kr, vr, ksr, vsr);
    for (int t = t0; t < t1; ++t) {
      kiln_kv kc[UNROLL][CPL], vc[UNROLL][CPL];
      float ksc[UNROLL], vsc[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        ksc[u] = ksr[u];
        vsc[u] = vsr[u];
#pragma unroll
        for (int j = 0; j < CPL; ++j) {
          kc[u][j] = kr[u][j];
          vc[u][j] = vr[u][j];
        }
      }
      if (t + 1 < t1) {
        if constexpr (PAGED) {
          if ((t + 1) % (BLOCK_SIZE / KEYS) == 0) {
            ++page;
            block = next;
            next = table[min(page + 1, last_page)];
          }
        }
        kiln_load_tile(k_cache, v_cache, )cuda"
     << scales << R"cuda(, table, block, t + 1, kend, kvh,
                       slot, part, kr, vr, ksr, vsr);
      }
      const int first = t * KEYS + slot;
      // Scores: this lane's part of each dot product, summed over the LPK
      // lanes of its key.
      float s[GS][UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
        for (int g = 0; g < GS; ++g)
          s[g][u] = 0.0f;
#pragma unroll
        for (int j = 0; j < CPL; ++j) {
          const int c = part + j * LPK;
          if (FULL || c < CHUNKS) {
            float kf[VEC];
            kiln_kv_floats<VEC>(kc[u][j], kf);
#pragma unroll
            for (int g = 0; g < GS; ++g)
#pragma unroll
              for (int e = 0; e < VEC; ++e)
                s[g][u] += sm_q[hs * GS + g][c * VEC + e] * kf[e];
          }
        }
#pragma unroll
        for (int g = 0; g < GS; ++g) {
#pragma unroll
          for (int o = LPK / 2; o > 0; o >>= 1)
            s[g][u] += __shfl_xor_sync(0xffffffffu, s[g][u], o);
          if constexpr (KV_QUANT)
            s[g][u] *= ksc[u];
        }
      }
      // s becomes p = 2^(s - m), the running sums are rescaled.
#pragma unroll
      for (int g = 0; g < GS; ++g) {
        float mt = m[g];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          if (first + u * SLOTS >= kend)
            s[g][u] = KILN_NEG_INF;
          mt = fmaxf(mt, s[g][u]);
        }
        const float ref = mt == KILN_NEG_INF ? 0.0f : mt; // no key yet
        const float correction = exp2f(m[g] - ref);
        float sum = 0.0f;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          s[g][u] = exp2f(s[g][u] - ref);
          sum += s[g][u];
        }
        l[g] = l[g] * correction + sum;
        m[g] = mt;
#pragma unroll
        for (int i = 0; i < CPL * VEC; ++i)
          acc[g][i] *= correction;
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
#pragma unroll
        for (int j = 0; j < CPL; ++j) {
          float vf[VEC];
          kiln_kv_floats<VEC>(vc[u][j], vf);
#pragma unroll
          for (int g = 0; g < GS; ++g) {
            const float p = KV_QUANT ? s[g][u] * vsc[u] : s[g][u];
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              acc[g][j * VEC + e] += p * vf[e];
          }
        }
    }
  }

  // Merge the SLOTS keys of a load (lanes LPK * HS apart), then the warps:
  // thread e of the block owns element e of the group's [GROUP, DH] result.
#pragma unroll
  for (int o = LPK * HS; o < 32; o <<= 1)
#pragma unroll
    for (int g = 0; g < GS; ++g) {
      const float mo = __shfl_xor_sync(0xffffffffu, m[g], o);
      const float lo = __shfl_xor_sync(0xffffffffu, l[g], o);
      const float mm = fmaxf(m[g], mo), ref = mm == KILN_NEG_INF ? 0.0f : mm;
      const float a = exp2f(m[g] - ref), b = exp2f(mo - ref);
      l[g] = l[g] * a + lo * b;
      m[g] = mm;
#pragma unroll
      for (int i = 0; i < CPL * VEC; ++i)
        acc[g][i] = acc[g][i] * a +
                    __shfl_xor_sync(0xffffffffu, acc[g][i], o) * b;
    }
  if (slot == 0) {
#pragma unroll
    for (int j = 0; j < CPL; ++j) {
      const int c = part + j * LPK;
      if (FULL || c < CHUNKS)
#pragma unroll
        for (int g = 0; g < GS; ++g)
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            sm_acc[warp][hs * GS + g][c * VEC + e] = acc[g][j * VEC + e];
    }
  }
  if (slot == 0 && part == 0)
#pragma unroll
    for (int g = 0; g < GS; ++g) {
      sm_m[warp][hs * GS + g] = m[g];
      sm_l[warp][hs * GS + g] = l[g];
    }
  __syncthreads();
  for (int e = threadIdx.x; e < GROUP * DH; e += 32 * WARPS) {
    const int g = e / DH, d = e % DH;
    float M = KILN_NEG_INF;
    for (int w = 0; w < WARPS; ++w)
      M = fmaxf(M, sm_m[w][g]);
    const float ref = M == KILN_NEG_INF ? 0.0f : M;
    float L = 0.0f, A = 0.0f;
    for (int w = 0; w < WARPS; ++w) {
      const float weight = exp2f(sm_m[w][g] - ref);
      L += sm_l[w][g] * weight;
      A += sm_acc[w][g][d] * weight;
    }
    if (splits == 1) {
      out[e] = __float2half(A / L);
    } else {
      // Several splits: publish this split's (acc, m, l).
      float *mine = workspace + ((long long)split * GROUP + g) * (DH + 2);
      mine[d] = A;
      if (d == 0) {
        mine[DH] = M;
        mine[DH + 1] = L;
      }
    }
  }
  if (splits == 1)
    return;

  // The last split to finish merges them all and re-arms the counter for
  // the next launch.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    last = atomicAdd(counters, 1u) == unsigned(splits - 1);
  __syncthreads();
  if (!last)
    return;
  __threadfence();
  for (int e = threadIdx.x; e < GROUP * DH; e += 32 * WARPS) {
    const int g = e / DH, d = e % DH;
    float M = KILN_NEG_INF;
    for (int s = 0; s < splits; ++s)
      M = fmaxf(M, __ldcg(workspace + ((long long)s * GROUP + g) * (DH + 2) + DH));
    const float ref = M == KILN_NEG_INF ? 0.0f : M;
    float L = 0.0f, A = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float *part_s = workspace + ((long long)s * GROUP + g) * (DH + 2);
      const float weight = exp2f(__ldcg(part_s + DH) - ref);
      L += __ldcg(part_s + DH + 1) * weight;
      A += __ldcg(part_s + d) * weight;
    }
    out[e] = __float2half(A / L);
  }
  if (threadIdx.x == 0)
    *counters = 0;
}
)cuda";
  k.source = src;
  return k;
}

} // namespace kiln

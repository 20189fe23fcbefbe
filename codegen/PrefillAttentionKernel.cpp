//===- PrefillAttentionKernel.cpp - causal kiln.attention on tensor cores -===//
//
// Prefill attention, FlashAttention-2 style. A block takes
// BM = 16 x MT x WARPS query rows, each a (token, query head) pair: TOK
// consecutive tokens times the GPC query heads of one KV group (all of them
// when the group fits), so that each tile of keys and values is read once
// for the whole group. Warp w owns MT m-tiles of 16 rows, from row 16 MT w.
//
// The queries are rotated by RoPE, rounded to f16 and staged in shared
// memory once, then held in registers as mma A fragments (ldmatrix). The
// block walks the keys 0 ..= its last row's position BN at a time (tiles
// wholly in every row's future are never visited); keys and values come
// from the paged KV pool by cp.async (16 bytes a copy), so a prompt
// continued from an earlier prefill sees its history. Two buffers of a
// tile's keys and values alternate; per tile:
//   read the pages of the tile after next; copy the next tile (one group)
//   wait for this tile's group; barrier
//   S = Q K^T on tensor cores (mma.sync m16n8k16, K through ldmatrix)
//   mask the keys past each row's position (only in tiles that reach past
//   the block's first row), online softmax in fp32 (running max and sum
//   per row; each exponent one FFMA into ex2.approx)
//   O += P V (P from S's registers as f16 A fragments, V through
//   ldmatrix.trans); barrier
// Shared rows are padded by 16 bytes so that ldmatrix's eight rows fall in
// distinct banks. The output is O / l in f16. Blocks take the tiles of the
// last tokens first (the causal work grows with the token). Padding rows
// (at and past count) compute nothing that is stored. A prefill's rows are
// all one sequence (that of row 0): a block reads one table's keys.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

namespace {
/// Static shared memory a block may take without opting in.
constexpr int64_t kStaticSharedBytes = 48 * 1024;
} // namespace

PrefillAttentionTiling prefillAttentionTiling(int64_t dh, int64_t group,
                                              const CodegenOptions &opts,
                                              int64_t elementBytes) {
  PrefillAttentionTiling t;
  t.warps = opts.attentionWarps;
  t.paddedDh = (dh + 15) / 16 * 16;
  // By default two m-tiles a warp up to head dim 128: each K and V
  // fragment read from shared memory then serves 32 rows, which the cost
  // model finds is what bounds one m-tile (docs/kernels.md). The registers
  // (O and Q in them, 3/4 of a register a head dim a row) leave room for
  // 64-key tiles of S up to head dim 64, 16 to 128.
  t.mtiles = opts.prefillAttentionRows ? opts.prefillAttentionRows / 16
             : t.paddedDh <= 128       ? 2
                                       : 1;
  t.rows = 16 * t.mtiles * t.warps;
  t.groupHeads = std::min<int64_t>(group, t.rows);
  t.headSlices = (group + t.groupHeads - 1) / t.groupHeads;
  t.tokens = t.rows / t.groupHeads;
  // The f16 rows (two buffers of keys and values, or the queries), and a
  // quantized cache's staged codes and their rows' scales.
  auto shared = [&](int keys) {
    int64_t staged = elementBytes == 1 ? 2 * keys * t.paddedDh + 4 * keys : 0;
    return std::max<int64_t>(4 * keys, t.rows) * (t.paddedDh + 8) * 2 + staged;
  };
  t.keys = opts.prefillAttentionKeys;
  if (t.keys == 0 && t.mtiles == 2 && t.paddedDh > 64)
    t.keys = 16;
  if (t.keys == 0) // the largest tile that fits
    for (int keys : {64, 32, 16})
      if (t.keys == 0 && shared(keys) <= kStaticSharedBytes)
        t.keys = keys;
  t.sharedBytes = shared(t.keys ? t.keys : 16);
  return t;
}

llvm::Expected<CudaKernel> emitPrefillAttention(Operation *op,
                                                const CodegenOptions &opts) {
  auto shape = attentionShape(op);
  if (!shape)
    return shape.takeError();
  int64_t dh = shape->dh, group = shape->heads / shape->kvHeads;
  if (dh % 8)
    return llvm::createStringError(
        "the prefill attention template takes a head dim that is a multiple "
        "of 8 (rows of 16-byte copies), not " +
        std::to_string(dh));
  PrefillAttentionTiling t =
      prefillAttentionTiling(dh, group, opts, shape->cache.getElementBytes());
  if (t.keys == 0 || t.sharedBytes > kStaticSharedBytes)
    return llvm::createStringError(
        "prefill attention tiles of " + std::to_string(t.rows) +
        " query rows (attention-warps=" + std::to_string(t.warps) +
        ", prefill-attention-rows=" + std::to_string(16 * t.mtiles) + ") and " +
        std::to_string(t.keys ? t.keys : 16) +
        " keys (prefill-attention-keys) of head dim " + std::to_string(dh) +
        " need " + std::to_string(t.sharedBytes) +
        " bytes of shared memory, more than the " +
        std::to_string(kStaticSharedBytes) + " a block has");

  CudaKernel k = kernelFor(op, opts.kernelSuffix);
  k.params = shape->params;
  k.grid = {1, shape->kvHeads * t.headSlices, 1};
  k.rowAxis = 0;
  k.rowsPerBlock = t.tokens;
  k.blockThreads = 32 * t.warps;

  const char *scales = kvScaleArguments(shape->cache); // kiln_stage_kv's
  std::string src = cudaPrelude() + tensorCorePrelude();
  llvm::raw_string_ostream os(src);
  os << shape->header;
  os << "constexpr int WARPS = " << t.warps << ", MT = " << t.mtiles
     << ", BM = 16 * MT * WARPS, BN = " << t.keys
     << "; // m-tiles a warp, query rows, keys a tile\n";
  os << "constexpr int DHP = " << t.paddedDh
     << ", LD = DHP + 8; // head dims padded to 16, a shared row\n";
  os << "constexpr int GPC = " << t.groupHeads << ", HS = " << t.headSlices
     << ", TOK = " << t.tokens
     << "; // query heads a block, blocks a group, tokens a block\n";
  os << R"cuda(constexpr int THREADS = 32 * WARPS, CH = DHP / 8; // 16-byte chunks a row
// Shared rows: two buffers, each a tile of keys [BN] and its values [BN]
// (buffer b at rows 2 b BN); the queries [BM] are staged first at the end
// (past buffer 0 when BM <= 2 BN, so the first tile can be in flight while
// the queries are staged).
constexpr int SROWS = 4 * BN > BM ? 4 * BN : BM, QROW = SROWS - BM;
constexpr bool EARLY_KV = QROW >= 2 * BN;
constexpr float SCALE_LOG2 = SCALE * 1.4426950408889634f; // for exp2

// A tile is BN rows of CH chunks; thread i copies chunks i, i + THREADS, ...
constexpr int CPT = (BN * CH + THREADS - 1) / THREADS; // chunks a thread

// Paged copies: when whole rows of chunks fill the block's threads (R rows
// a pass, thread i taking chunk i % CH of row i / CH) and the tiles and
// passes line up with the pool's pages, a thread's chunk u lies in page
// (row / BLOCK_SIZE) + (R u) / BLOCK_SIZE of the tile, at slot
// (row % BLOCK_SIZE) + (R u) % BLOCK_SIZE in it: the page and the offset
// are constants of u, so chunks of one page share a table load and an
// address, and differ by an immediate offset. Otherwise each chunk finds
// its own slot.
constexpr int R = THREADS % CH == 0 ? THREADS / CH : 0;
constexpr bool PAGED = R > 0 && BN % BLOCK_SIZE == 0 &&
                       (R % BLOCK_SIZE == 0 || BLOCK_SIZE % R == 0);
constexpr long long PAGE = (long long)BLOCK_SIZE * KVH * DH; // elements a page

// The pool blocks that hold this thread's chunks of the tile of tokens
// t0 .. t0 + BN - 1, from the sequence's block table (0 for pages past
// `last`). Loaded a tile ahead and first used by kiln_copy_tile, so that
// the loads fly while the tile before is computed.
__device__ __forceinline__ void kiln_tile_blocks(const int *table, int t0,
                                                 int last, int (&block)[CPT]) {
#pragma unroll
  for (int u = 0; u < CPT; ++u) {
    if constexpr (PAGED) {
      const int page = t0 / BLOCK_SIZE + (threadIdx.x / CH) / BLOCK_SIZE +
                       R * u / BLOCK_SIZE;
      if (u > 0 && R * u / BLOCK_SIZE == R * (u - 1) / BLOCK_SIZE)
        block[u] = block[u - 1]; // the same page: one load (kiln_input is
                                 // volatile, so not merged by itself)
      else
        block[u] = page * BLOCK_SIZE <= last ? kiln_input(table + page) : 0;
    } else {
      const int i = threadIdx.x + u * THREADS, t = t0 + i / CH;
      block[u] =
          i < BN * CH && t <= last ? kiln_input(table + t / BLOCK_SIZE) : 0;
    }
  }
}

// Where chunk u of this thread's share of the tile of tokens t0 .. t0 +
// BN - 1 lies in this layer's keys or values (`block`'s page): its element
// offset, its shared row j and chunk c, and whether it holds keys (`in`:
// none past `last` or past the head's DH dims; such a chunk points into
// block 0 of the pool, or just past its row's head dims). `at`: this
// thread's offset in a page (PAGED; kiln_copy_offset).
__device__ __forceinline__ long long kiln_tile_chunk(int u, int kvh, int t0,
                                                int last, int at,
                                                const int (&block)[CPT],
                                                int &j, int &c, bool &in) {
  const int i = threadIdx.x + u * THREADS;
  j = i / CH, c = i % CH;
  const int t = t0 + j;
  in = t <= last && (DHP == DH || 8 * c < DH);
  if constexpr (PAGED)
    return block[u] * PAGE + at + (long long)(R * u % BLOCK_SIZE) * KVH * DH;
  else
    return (((long long)block[u] * BLOCK_SIZE + t % BLOCK_SIZE) * KVH + kvh) *
               DH +
           8 * c;
}

// One tile of this layer's keys or values (f16) into rows [BN] of shared
// memory by cp.async (the caller commits); zeros where a chunk holds none
// (a copy of 0 bytes, nothing read).
__device__ __forceinline__ void kiln_copy_tile(__half (*rows)[LD],
                                               const kiln_kv_t *cache, int kvh,
                                               int t0, int last, int at,
                                               const int (&block)[CPT]) {
#pragma unroll
  for (int u = 0; u < CPT; ++u)
    if ((BN * CH) % THREADS == 0 || threadIdx.x + u * THREADS < BN * CH) {
      int j, c;
      bool in;
      const long long at_u = kiln_tile_chunk(u, kvh, t0, last, at, block, j, c, in);
      kiln_cp_async16(&rows[j][8 * c], cache + at_u, in);
    }
}

// A quantized cache's tile: its codes by cp.async (8 a chunk) into
// `codes` [2 (keys, values), BN, DHP] of shared memory, one group, and the
// key and value scales of the rows whose chunk 0 this thread copies into
// `scales` (an f16 pair, 0 for a row with no keys): registers, a tile
// ahead. kiln_convert_kv then writes the tile dequantized into a buffer of
// f16 rows once the tile before is computed: cp.async cannot convert.
__device__ __forceinline__ void
kiln_stage_kv(unsigned char *codes, __half2 (&scales)[CPT],
              const kiln_kv_t *k_cache, const kiln_kv_t *v_cache,
              const __half *k_scales, const __half *v_scales, int kvh, int t0,
              int last, int at, const int (&block)[CPT]) {
#pragma unroll
  for (int u = 0; u < CPT; ++u)
    if ((BN * CH) % THREADS == 0 || threadIdx.x + u * THREADS < BN * CH) {
      int j, c;
      bool in;
      const long long at_u =
          kiln_tile_chunk(u, kvh, t0, last, at, block, j, c, in);
      kiln_cp_async8(codes + j * DHP + 8 * c, k_cache + at_u, in);
      kiln_cp_async8(codes + (BN + j) * DHP + 8 * c, v_cache + at_u, in);
      // [slot, KVH]: the chunk's element offset over DH.
      if (c == 0)
        scales[u] = in ? __halves2half2(k_scales[at_u / DH], v_scales[at_u / DH])
                       : __floats2half2_rn(0.0f, 0.0f);
    }
  kiln_cp_async_commit();
}

// The staged tile (kiln_stage_kv) dequantized into buffer `buf`: the
// copies waited for, the scales through `row_scales` [BN], then every chunk
// of 8 codes as 8 halves. Ends with a barrier.
__device__ __forceinline__ void
kiln_convert_kv(__half (*tile)[LD], int buf, const unsigned char *codes,
                __half2 *row_scales, const __half2 (&scales)[CPT]) {
  kiln_cp_async_wait<0>();
#pragma unroll
  for (int u = 0; u < CPT; ++u) {
    const int i = threadIdx.x + u * THREADS;
    if (((BN * CH) % THREADS == 0 || i < BN * CH) && i % CH == 0)
      row_scales[i / CH] = scales[u];
  }
  __syncthreads();
#pragma unroll 1 // (unrolled, its loads in flight together spill)
  for (int i = threadIdx.x; i < 2 * BN * CH; i += THREADS) {
    const int kv = i / (BN * CH), j = i / CH % BN, c = i % CH;
    const uint2 w =
        *reinterpret_cast<const uint2 *>(codes + (kv * BN + j) * DHP + 8 * c);
    const float2 sc = __half22float2(row_scales[j]);
    const float scale = (kv ? sc.y : sc.x) * KV_UNIT;
    float f[8];
    kiln_kv_decode4(w.x, f);
    kiln_kv_decode4(w.y, f + 4);
    uint4 h;
    unsigned *hw = reinterpret_cast<unsigned *>(&h);
#pragma unroll
    for (int e = 0; e < 4; ++e)
      hw[e] = kiln_pack_half2(f[2 * e] * scale, f[2 * e + 1] * scale);
    *reinterpret_cast<uint4 *>(&tile[2 * BN * buf + kv * BN + j][8 * c]) = h;
  }
  __syncthreads();
}

// Tile t0's keys and values (f16) into buffer `buf`, as one cp.async group.
__device__ __forceinline__ void kiln_copy_kv(__half (*tile)[LD], int buf,
                                             const kiln_kv_t *k_cache,
                                             const kiln_kv_t *v_cache, int kvh,
                                             int t0, int last, int at,
                                             const int (&block)[CPT]) {
  kiln_copy_tile(tile + 2 * BN * buf, k_cache, kvh, t0, last, at, block);
  kiln_copy_tile(tile + 2 * BN * buf + BN, v_cache, kvh, t0, last, at, block);
  kiln_cp_async_commit();
}

// The first tile into buffer 0: f16 by cp.async (in flight on return), a
// quantized cache's staged and converted (landed on return).
__device__ __forceinline__ void
kiln_first_tile(__half (*tile)[LD], unsigned char *codes, __half2 *row_scales,
                __half2 (&staged)[CPT], const kiln_kv_t *k_cache,
                const kiln_kv_t *v_cache, const __half *k_scales,
                const __half *v_scales, int kvh, int last, int at,
                const int (&block)[CPT]) {
  if constexpr (KV_QUANT) {
    kiln_stage_kv(codes, staged, k_cache, v_cache, k_scales, v_scales, kvh, 0,
                  last, at, block);
    kiln_convert_kv(tile, 0, codes, row_scales, staged);
  } else {
    kiln_copy_kv(tile, 0, k_cache, v_cache, kvh, 0, last, at, block);
  }
}

// PAGED: where this thread's first chunk lies in its page, in elements.
__device__ __forceinline__ int kiln_copy_offset(int kvh) {
  const int row = threadIdx.x / CH, c = threadIdx.x % CH;
  return ((row % BLOCK_SIZE) * KVH + kvh) * DH + 8 * c;
}

// q [S, H*DH] f16, k_cache/v_cache: this layer's keys and values in the pool
// ([slot, KVH*DH] f16, or codes with k_scales/v_scales [slot, KVH] f16),
// block_table [sequences, TABLE_BLOCKS] i32, seqs
// [S] i32 (all the same sequence), positions [S] i32, count [2] i32 (rows,
// the prefill's sequence length), out
// [S, H*DH] f16.
// grid (ceil(S / TOK), KVH * HS), block (THREADS)
extern "C" __global__ void __launch_bounds__(THREADS) )cuda"
     << k.entry << "(" << kernelParameters(k) << R"cuda() {
  alignas(16) __shared__ __half tile[SROWS][LD]; // 2 x (keys [BN], values [BN])
  // A quantized cache's staged codes [2, BN, DHP] and their rows' scales [BN].
  alignas(16) __shared__ unsigned char kv_codes[KV_QUANT ? 2 * BN * DHP : 16];
  __shared__ __half2 row_scales[KV_QUANT ? BN : 1];
  __half (*qs)[LD] = tile + QROW;
  kiln_launch_dependents();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q4 = lane & 3; // the fragments' groupID, thread in group
  const int n = kiln_input(count);
  const int tok0 = (gridDim.x - 1 - blockIdx.x) * TOK; // the last tokens first
  if (tok0 >= n) { // all padding: the whole block leaves together
    kiln_wait_previous_grid(); // even to leave (the prelude says why)
    return;
  }
  const int kvh = blockIdx.y / HS, slice = blockIdx.y % HS;
  const int h0 = kvh * GROUP + slice * GPC; // this block's first query head
  const int heads = min(GPC, GROUP - slice * GPC);
  const int tok_end = min(n, tok0 + TOK);
  const int *table = block_table + (long long)kiln_input(seqs) * TABLE_BLOCKS;

  // The block's first and last positions: keys 0 ..= last are visible to
  // some row, and keys up to first to every row.
  int first = 0x7fffffff, last = -1;
  for (int t = tok0 + lane; t < tok_end; t += 32) {
    const int p = kiln_input(positions + t);
    first = min(first, p);
    last = max(last, p);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
    last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
  }
  // The pool blocks of the next tile to copy and of the one after it.
  int blocks[CPT], later[CPT];
  kiln_tile_blocks(table, 0, last, blocks);
  const int at = PAGED ? kiln_copy_offset(kvh) : 0;
  // The host's inputs and the first tile's pages are read: from here on the
  // queries and the pool, which the kernels before this one write.
  kiln_wait_previous_grid();
  __half2 staged[CPT]; // a quantized cache's scales of the staged tile
  if (EARLY_KV)
    kiln_first_tile(tile, kv_codes, row_scales, staged, k_cache, v_cache, )cuda"
     << scales << R"cuda(,
                    kvh, last, at, blocks);

  // The queries, rotated and rounded to f16: row m is token tok0 + m / GPC,
  // head h0 + m % GPC; rows past the block's tokens and heads are zeros.
  for (int i = threadIdx.x; i < BM * (DHP / 2); i += THREADS) {
    const int m = i / (DHP / 2), d = 2 * (i % (DHP / 2));
    const int token = tok0 + m / GPC, head = h0 + m % GPC;
    float x0 = 0.0f, x1 = 0.0f;
    if (m < TOK * GPC && token < tok_end && m % GPC < heads && d < DH) {
      const __half *row = q + (long long)token * (H * DH) + head * DH;
      if constexpr (ROPE) {
        const int pos = positions[token], len = kiln_rope_length(pos, count);
        x0 = kiln_rope_rotated<DH, INTERLEAVED>(row, d, pos, len);
        x1 = kiln_rope_rotated<DH, INTERLEAVED>(row, d + 1, pos, len);
      } else {
        x0 = __half2float(row[d]);
        x1 = __half2float(row[d + 1]);
      }
    }
    *reinterpret_cast<__half2 *>(&qs[m][d]) = __floats2half2_rn(x0, x1);
  }
  __syncthreads();
  // This warp's MT x 16 rows (m-tile mt: rows 16 (MT warp + mt) ..), as A
  // fragments: 16 rows x 16 dims each.
  unsigned qf[MT][DHP / 16][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int kk = 0; kk < DHP / 16; ++kk)
      kiln_ldmatrix<4>(qf[mt][kk], &qs[16 * (MT * warp + mt) + (lane & 15)]
                                      [16 * kk + 8 * (lane >> 4)]);
  if (!EARLY_KV) {
    __syncthreads(); // every warp has its queries: the tile may land there
    kiln_first_tile(tile, kv_codes, row_scales, staged, k_cache, v_cache, )cuda"
     << scales << R"cuda(,
                    kvh, last, at, blocks);
  }
  kiln_tile_blocks(table, BN, last, blocks);

  // This lane's rows, g and g + 8 of each m-tile: their positions (-1: a
  // row with no token, which no key is visible to), running maxima (of the
  // raw scores) and sums (this lane's share of them).
  int pos[MT][2];
  float mx[MT][2], sum[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int m = 16 * (MT * warp + mt) + g + 8 * r, token = tok0 + m / GPC;
      pos[mt][r] = m < TOK * GPC && token < tok_end && m % GPC < heads
                       ? positions[token]
                       : -1;
      mx[mt][r] = KILN_NEG_INF;
      sum[mt][r] = 0.0f;
    }
  float o[MT][DHP / 8][4]; // O [16, DHP] per m-tile as C fragments, 8 dims each
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int j = 0; j < DHP / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o[mt][j][e] = 0.0f;

#pragma unroll 1
  for (int t0 = 0, buf = 0; t0 <= last; t0 += BN, buf ^= 1) {
    // The next tile into the other buffer (which every warp left at the
    // end of the last tile), in flight through this one; the pages of the
    // one after it, read for the next tile's copy.
    kiln_tile_blocks(table, t0 + 2 * BN, last, later);
    if constexpr (KV_QUANT) { // the next tile's codes, converted after this one
      if (t0 + BN <= last)
        kiln_stage_kv(kv_codes, staged, k_cache, v_cache, )cuda"
     << scales << R"cuda(, kvh,
                      t0 + BN, last, at, blocks);
    } else if (t0 + BN <= last) {
      kiln_copy_kv(tile, buf ^ 1, k_cache, v_cache, kvh, t0 + BN, last, at,
                   blocks);
    } else {
      kiln_cp_async_commit(); // an empty group: the wait below counts on it
    }
    kiln_cp_async_wait<1>(); // this tile has landed, the next may not
    __syncthreads();
    const __half(*ks)[LD] = tile + 2 * BN * buf, (*vs)[LD] = ks + BN;

    // S = Q K^T: [16, BN] per m-tile, 8 keys a fragment; each fragment of
    // K serves every m-tile.
    float s[MT][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          s[mt][j][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DHP / 16; ++kk)
#pragma unroll
      for (int j = 0; j < BN / 16; ++j) {
        unsigned kf[4]; // keys 16j .. 16j + 15, dims 16kk .. 16kk + 15
        kiln_ldmatrix<4>(kf, &ks[16 * j + (lane & 7) + 8 * (lane >> 4)]
                                [16 * kk + 8 * ((lane >> 3) & 1)]);
        const unsigned b0[2] = {kf[0], kf[1]}, b1[2] = {kf[2], kf[3]};
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          kiln_mma(s[mt][2 * j], qf[mt][kk], b0);
          kiln_mma(s[mt][2 * j + 1], qf[mt][kk], b1);
        }
      }

    // The online softmax of each row, in fp32: keys past the row's
    // position at -inf (only where the tile reaches past the block's first
    // position), then exp2 of the scores times SCALE_LOG2. P [16, BN] per
    // m-tile as f16 A fragments, 16 keys each, straight from S's registers.
    const bool mask = t0 + BN - 1 > first;
    unsigned p[MT][BN / 16][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (mask)
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (t0 + 8 * j + 2 * q4 + (e & 1) > pos[mt][e >> 1])
              s[mt][j][e] = KILN_NEG_INF;
      float tile_max[2] = {KILN_NEG_INF, KILN_NEG_INF};
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[mt][j][e]);
      // The maxima are of the raw scores (SCALE > 0 keeps their order); the
      // exponents are scores x SCALE_LOG2 - base, one FFMA each.
      float base[2], correction[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) { // a row's scores lie in its quad's 4 lanes
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
        const float m_new = fmaxf(mx[mt][r], tile_max[r]);
        // No key yet: every p is 0 (and so is the correction of -inf).
        base[r] = m_new == KILN_NEG_INF ? 0.0f : m_new * SCALE_LOG2;
        correction[r] = kiln_exp2(fmaf(mx[mt][r], SCALE_LOG2, -base[r]));
        mx[mt][r] = m_new;
        sum[mt][r] *= correction[r];
      }
#pragma unroll
      for (int j = 0; j < DHP / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          o[mt][j][e] *= correction[e >> 1];
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        float e4[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          e4[e] = kiln_exp2(fmaf(s[mt][j][e], SCALE_LOG2, -base[e >> 1]));
          sum[mt][e >> 1] += e4[e];
        }
        p[mt][j / 2][2 * (j & 1)] = kiln_pack_half2(e4[0], e4[1]);
        p[mt][j / 2][2 * (j & 1) + 1] = kiln_pack_half2(e4[2], e4[3]);
      }
    }

    // O += P V: V [BN, DHP] as B fragments through ldmatrix.trans, each
    // serving every m-tile.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
      for (int j = 0; j < DHP / 16; ++j) {
        unsigned vf[4]; // keys 16kk .. 16kk + 15, dims 16j .. 16j + 15
        kiln_ldmatrix<4, true>(vf, &vs[16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1)]
                                      [16 * j + 8 * (lane >> 4)]);
        const unsigned b0[2] = {vf[0], vf[1]}, b1[2] = {vf[2], vf[3]};
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          kiln_mma(o[mt][2 * j], p[mt][kk], b0);
          kiln_mma(o[mt][2 * j + 1], p[mt][kk], b1);
        }
      }
    if constexpr (KV_QUANT) // into the other buffer, which no warp reads now
      if (t0 + BN <= last)
        kiln_convert_kv(tile, buf ^ 1, kv_codes, row_scales, staged);
    __syncthreads(); // every warp is done with this buffer
#pragma unroll
    for (int u = 0; u < CPT; ++u)
      blocks[u] = later[u];
  }

  // O / l, in f16, for the rows with a token and the dims of the head.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = sum[mt][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      if (pos[mt][r] < 0)
        continue;
      const int m = 16 * (MT * warp + mt) + g + 8 * r;
      __half *row =
          out + (long long)(tok0 + m / GPC) * (H * DH) + (h0 + m % GPC) * DH;
      const float inv = 1.0f / l;
#pragma unroll
      for (int j = 0; j < DHP / 8; ++j) {
        const int d = 8 * j + 2 * q4;
        if (d < DH)
          *reinterpret_cast<__half2 *>(&row[d]) = __floats2half2_rn(
              o[mt][j][2 * r] * inv, o[mt][j][2 * r + 1] * inv);
      }
    }
}
)cuda";
  k.source = src;
  return k;
}

} // namespace kiln

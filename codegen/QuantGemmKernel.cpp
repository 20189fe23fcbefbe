//===- QuantGemmKernel.cpp - matmuls of quantized weights -----------------===//
//
// C[S, N] f32 = (x[S, K] * g) . W[N, K]^T for a weight of #kiln.quant,
// before the op's epilogue kernel (linear_epilogue, qkv_epilogue), in every
// phase: one token (decode), a batch's rows and a prefill's. W is read in
// the layout of runtime/QuantLayout.h: a warp owns a tile of 16 rows of W
// and streams it once, UNROLL 16-byte loads a lane in flight; each 16 x 16
// piece of the tile dequantizes in registers into an mma.m16n8k16 A
// fragment (int4: masks and the 0x6400 exponent, so that 1024 + code is an
// f16 from which 1024 + zero is subtracted exactly; int8: a byte permute
// into the same; fp8: cvt.rn.f16x2.e4m3x2 from sm_89 on, before it the
// e4m3 bits moved into f16's, 2^-8 of the value)
// and multiplies 8 x-rows at once per n-tile. A group's products sum in
// their own fp32 accumulators, scaled by the group's f16 scales as the
// group ends, so the weights are dequantized exactly. With mins (f32
// scales and mins: llama.cpp's Q4_1, Q5_1, K-quants) the codes multiply
// unshifted and the group's min times its sum of x is taken off as it
// ends: a batch's sums of x by one more mma a k-step, of an all-ones A
// fragment. Decode's grouped int4 and int8 take the codes raw (1024 +
// code, no zero taken off a k-step: RAW) and each group's offset off its
// sum as it ends, from the group's sum of x, taken while x is staged. The norm
// weight g (a folded RMSNorm's, which a quantized W cannot absorb) scales x as
// it is loaded; the epilogue then applies 1 / rms(x) as after a dense GEMM.
// With act-order the buffer's columns are permuted (each group's
// contiguous) and x is gathered through the permutation.
// With split-K, SPLIT_K warps share a tile, each a span of K, summed
// through shared memory. Spans start on a group, so that which k-steps
// start one is known once the loop is unrolled and the others carry no
// group bookkeeping. Decode's one token is staged in shared memory first
// (times g, in the B fragments' order: one 8-byte load a lane a k-step,
// by a .shared address taken once, into every column of B: the other
// columns of C hold the same sums, which no one reads), all its loads at once
// (in batches in a long row), a fused RMSNorm's sum of squares taken from
// them; the block's groups (scales, mins, zero points) are copied beside it
// by cp.async with the first loads of W (where they fit 48 KB; a row of x
// past that is in dynamic shared memory), so that no group's flush waits for
// memory; a fused residual is loaded with x. The registers are capped for
// 32 warps an SM (16 with SwiGLU). Rows at and past the step's count are
// not loaded (zero fragments). It waits for the previous kernel (PDL)
// after issuing its first loads of W (and decode's groups), before it
// reads x. Decode's fused_qkv stores q, rotates k and writes k and v into
// the pool in this kernel, its blocks two tiles half a head apart so that
// RoPE's pairs meet in the block.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"
#include "runtime/QuantLayout.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace kiln {

namespace {
/// Decode's staged buffer, one block's: x's row (2 bytes a column), the
/// block's groups (scales, mins, zero points) where everything fits the 48
/// KiB of static shared memory beside them, and RAW's sums of x's chunks.
/// The template lays it out, and asserts the same size. Past 48 KiB
/// without the groups (a row of more than about 23000 columns) it is
/// dynamic shared memory, and the groups are staged too where the block
/// leaves room for two an SM.
struct DecodeStage {
  bool groups = false;
  int64_t bytes = 0;
  bool dynamic = false;
};
DecodeStage decodeStage(const QuantFormat &f, const QuantLayout &layout,
                        int64_t kdim, int parts, int tilesPerBlock, int splitK,
                        bool quantStage) {
  // As the template's: RAW (grouped int4 and int8), XCHUNK, SG,
  // ENTRY_BYTES, the split-K sums' red.
  const int64_t group = f.group ? f.group : kdim;
  const bool raw = f.kind != QuantKind::FP8 && layout.groups != 1;
  const int64_t xseg = (group / 2) % 32 == 0   ? 32
                       : (group / 2) % 16 == 0 ? 16
                                               : 8;
  const int64_t chunkBytes = raw ? 4 * (kdim / (2 * xseg)) : 0;
  const int64_t groupBytes = int64_t(parts) * tilesPerBlock * layout.groups *
                             8 * ((f.mins ? 16 : 4) + (f.zeroPoints ? 2 : 0));
  const int64_t redBytes =
      splitK > 1 ? int64_t(tilesPerBlock) * splitK * parts * 2 * 8 * 4 : 0;
  // The rest of the block's static shared memory (the sums of squares, the
  // residuals, fused_qkv's slot) is within 1 KiB.
  const int64_t others = 2 * kdim + chunkBytes + redBytes + 1024;
  // Static shared memory's 48 KiB; past it (x alone), what leaves two
  // blocks an SM on sm_80 (164 KiB, 1 KiB reserved a block): the blocks of
  // 512 threads that make 32 warps.
  constexpr int64_t kStatic = 48 * 1024, kTwoBlocks = 164 * 1024 / 2 - 1024;
  const bool dynamic = others > kStatic;
  DecodeStage s;
  s.groups =
      quantStage && others + groupBytes <= (dynamic ? kTwoBlocks : kStatic);
  s.bytes = 2 * kdim + (s.groups ? groupBytes : 0) + chunkBytes;
  s.dynamic = dynamic;
  return s;
}
} // namespace

llvm::Expected<CudaKernel> emitQuantGemm(Operation *op,
                                         const CodegenOptions &opts,
                                         Phase phase, bool fused,
                                         bool lastRow) {
  if (lastRow && (fused || phase != Phase::decode))
    return llvm::createStringError(
        "the quantized GEMM of a prompt's last row is decode's, unfused");
  auto x = cast<RankedTensorType>(op->getOperand(0).getType());
  auto weight = quantizedWeight(op, "the quantized GEMM");
  if (!weight)
    return weight.takeError();
  if (llvm::Error e = requireF16(x.getElementType()))
    return std::move(e);
  const int64_t n = weight->n, kdim = weight->k;
  const bool norm = weight->norm;
  const QuantFormat *quant = &weight->format;
  QuantLayout layout = quantLayout(*quant, n, kdim, norm);
  // Decode's fused_qkv into an f16 cache: the GEMV stores q, rotates k
  // and writes k and v into the token's slot (decodesAsPrefill says when
  // it cannot). A block holds two tiles half a head apart, so that RoPE's
  // pairs (i, i + DH / 2) are the same lanes' rows of its two tiles
  // (INTERLEAVED's (2i, 2i + 1) share a tile).
  auto qkvOp = dyn_cast<FusedQKVOp>(op);
  const bool qkv = fused && qkvOp;
  // Fused (decode's fused_linear, fused_qkv): the epilogue in this kernel.
  LinearShape shape;
  if (qkv) {
    if (auto eps = qkvOp.getNormEpsilon())
      shape.eps = eps->convertToDouble();
  } else if (fused) {
    auto s = linearShape(op);
    if (!s)
      return s.takeError();
    shape = *s;
    if (shape.swiglu && (n / 2) % 16)
      return llvm::createStringError(
          "a fused SwiGLU needs whole tiles of 16 gate rows, not " +
          std::to_string(n / 2));
  }
  const bool swiglu = fused && shape.swiglu;

  const bool int4 = quant->kind == QuantKind::Int4;
  const int64_t perLoad = int4 ? 64 : 32; // columns a 16-byte load covers
  const int64_t loads = kdim / perLoad;
  // One n-tile (8 rows) for a token, four for a batch's or a prompt's.
  const int nTiles = phase == Phase::decode ? 1 : 4;
  const int unroll = std::max(1, opts.gemvUnroll);
  // The tiles a warp streams: with SwiGLU gate tile j and up tile
  // TILES / 2 + j together.
  const int64_t warpTiles = swiglu ? layout.tiles / 2 : layout.tiles;
  // Split-K: the fewest warps a tile, in a power of two of at most 16 and
  // at least UNROLL loads a warp, that make at least WARPS warps an SM
  // (sm-count of them) over the grid, each with UNROLL 16-byte loads a lane
  // in flight. Decode's WARPS is quant-warps (16 by default: 4 a scheduler;
  // llama2-7b's QKV and gate/up in 4 warps a tile making 4 passes each, in
  // about a wave, where 32 made them 8 warps of 2 passes in 1.5 and 2.6
  // waves: docs/quantization.md, "Split-K"); a batch's and a prompt's 32.
  // A batch's sums of x for mins (8 more registers) do not fit the 128
  // registers a thread that 512 threads a block leave: 8 warps a tile then.
  const int maxSplitK = quant->mins && phase != Phase::decode ? 8 : 16;
  // SwiGLU of a mins format (16 bytes a group entry) at twice that: its
  // blocks of two tiles a part would not stage their groups beside x in 48
  // KB (int4-g32-min's gate/up waited for 24 loads a pass), one a block do.
  const int warpsPerSm = phase != Phase::decode  ? 32
                         : swiglu && quant->mins ? 2 * opts.quantWarps
                                                 : opts.quantWarps;
  int splitK = 1;
  while (splitK < maxSplitK && warpTiles * splitK < warpsPerSm * opts.smCount &&
         loads / (2 * splitK) >= unroll)
    splitK *= 2;
  // Decode's QKV blocks hold two tiles (RoPE's pairs), 64 x split-K
  // threads, which stage x's row: at most 8 pairs of columns a thread
  // (llama2-13b's 5120 columns in 4 warps a tile, 10 pairs, spilled).
  while (qkv && phase == Phase::decode && splitK < maxSplitK &&
         kdim > 1024 * splitK && loads / (2 * splitK) >= unroll)
    splitK *= 2;
  // Decode streams W at the bandwidth only with enough warps an SM: up to
  // 32 (16 with SwiGLU's two tiles a warp, whose registers would spill at
  // 64), the registers held to what that leaves. A block stages x once for
  // its tiles, its threads K / (2 THREADS) pairs each, held at once: a
  // one-tile GEMV's blocks keep 512 threads (16 warps) where a tile has
  // fewer, so that a long row's pairs fit the registers as they did at 16
  // warps a tile (llama2-13b's down_proj, 13824 columns, spilled its 27
  // pairs in 8 warps). A batch's and a prompt's blocks: 8 warps at least.
  const int decodeThreads = swiglu ? 512 : 1024;
  const int tilesPerBlock =
      qkv ? 2
          : std::max(1, (phase == Phase::decode && !swiglu ? 16 : 8) / splitK);
  // fused_qkv: a block's second tile is PAIR_STRIDE tiles after its first
  // (half a head with rotate-half RoPE, else the next).
  int64_t pairStride = 0;
  KVCacheType cache;
  bool interleaved = false;
  if (qkv) {
    cache = cast<KVCacheType>(qkvOp.getCache().getType());
    interleaved = qkvOp.getRopeTheta() &&
                  *qkvOp.getRopeLayout() == RopeLayout::interleaved;
    bool rotateHalf = qkvOp.getRopeTheta() && !interleaved;
    if (cache.isQuantized() || cache.getHeadDim() % 32 || warpTiles % 2)
      return llvm::createStringError(
          "the quantized GEMV of a fused_qkv writes an f16 cache of head "
          "dims a multiple of 32 (decodesAsPrefill)");
    pairStride = rotateHalf ? cache.getHeadDim() / 32 : 1;
  }

  CudaKernel k = kernelFor(op, (fused ? "" : kQuantGemmSuffix) +
                                   std::string(lastRow ? kLastRowSuffix : "") +
                                   opts.kernelSuffix);
  k.params = {{ParamKind::Activation, "x", "const __half *"},
              {ParamKind::Weight, "w", "const unsigned char *"}};
  ResultStores outs;
  if (qkv) {
    llvm::append_range(k.params, kvCacheParams(cache, /*readOnly=*/false));
    k.params.insert(k.params.end(),
                    {{ParamKind::BlockTable, "block_table", "const int *"},
                     {ParamKind::RowSequence, "seqs", "const int *"},
                     {ParamKind::Positions, "positions", "const int *"},
                     {ParamKind::Activation, "q", "__half *"}});
  } else if (fused) {
    if (shape.residual)
      k.params.push_back({ParamKind::Activation, "residual", "const __half *"});
    outs = resultStores(op, k);
  } else {
    k.params.push_back({ParamKind::Workspace, "c", "float *"});
    k.params.push_back({ParamKind::Count, "count", "const int *"});
    k.rowAxis = lastRow ? -1 : 1; // the last row: one launch of one row
    k.rowsPerBlock = 8 * nTiles;
  }
  k.grid = {(warpTiles + tilesPerBlock - 1) / tilesPerBlock, 1, 1};
  k.blockThreads = 32 * tilesPerBlock * splitK;

  std::string src = cudaPrelude() + tensorCorePrelude();
  llvm::raw_string_ostream os(src);
  os << "\n// kernel " << k.kernel << ": C[S, " << n << "] = x[S, " << kdim
     << "]" << (norm ? " * g" : "") << " . W[" << n << ", " << kdim << "]^T, W "
     << quant->name() << "\n";
  os << quantBufferConstants(*weight);
  os << "constexpr int NT = " << nTiles << ", SPLIT_K = " << splitK
     << ", TPB = " << tilesPerBlock << ", UNROLL = " << unroll << ";\n";
  os << "constexpr bool STAGE_X = "
     << (phase == Phase::decode ? "true" : "false")
     << "; // x's row in shared memory, in B fragment order\n";
  os << "constexpr int THREADS = 32 * TPB * SPLIT_K;\n";
  const DecodeStage stage =
      phase == Phase::decode
          ? decodeStage(*quant, layout, kdim, swiglu ? 2 : 1, tilesPerBlock,
                        splitK, opts.quantStage)
          : DecodeStage{false, 16, false};
  k.dynamicSharedBytes = stage.dynamic ? stage.bytes : 0;
  os << "constexpr bool STAGE_GROUPS = " << (stage.groups ? "true" : "false")
     << "; // decode's groups in shared memory (decodeStage, quant-stage)\n";
  os << "constexpr int STAGED_BYTES = " << stage.bytes
     << "; // decode's x, groups and sums of x's chunks\n";
  os << "constexpr bool FUSED = " << (fused ? "true" : "false")
     << ", SWIGLU = " << (swiglu ? "true" : "false")
     << ", RESIDUAL = " << (fused && shape.residual ? "true" : "false")
     << ", RMS = " << (fused && shape.eps ? "true" : "false")
     << ", QKV = " << (qkv ? "true" : "false") << ";\n";
  os << "constexpr int PAIR_STRIDE = " << pairStride << ";\n";
  if (qkv) { // the row's tasks, as the f16 QKV GEMV stores them
    auto tasks = qkvShape(op, opts);
    if (!tasks)
      return tasks.takeError();
    os << tasks->tasks;
  }
  os << "constexpr int PARTS = SWIGLU ? 2 : 1, WARP_TILES = " << warpTiles
     << ";\n";
  os << "constexpr float EPS = "
     << floatLiteral(fused ? shape.eps.value_or(0) : 0) << ";\n";
  os << outs.store;
  os << quantPrelude();
  os << "\n// x [S, K] f16, w the " << quant->name() << " buffer ("
     << layout.bytes << " bytes), "
     << (qkv ? std::string("k_cache/v_cache this layer's keys and values "
                           "in the pool [slot, KVW] f16, block_table "
                           "[sequences, TABLE_BLOCKS] i32, seqs [1] i32, "
                           "positions [1] i32, q [1, QW] f16")
         : fused
             ? std::string(shape.residual ? "residual [1, TASKS] f16, " : "") +
                   "the results [1, TASKS]"
             : std::string("c [S, N] f32, count [1] i32"))
     << ".\n";
  os << "// grid (ceil(WARP_TILES / TPB)"
     << (fused ? "" : ", ceil(S / (8 * NT))")
     << "), block (THREADS): SPLIT_K warps a tile of 16 rows of W (with "
        "SwiGLU a gate and an up tile), each a span of K\n";
  os << R"cuda(
// Tile i of this block: the next TPB from blockIdx.x * TPB, or (fused_qkv)
// tiles PAIR_STRIDE apart, in chunks of 2 PAIR_STRIDE.
__device__ __forceinline__ int kiln_block_tile(int i) {
  if constexpr (PAIR_STRIDE > 0)
    return blockIdx.x / PAIR_STRIDE * 2 * PAIR_STRIDE +
           blockIdx.x % PAIR_STRIDE + i * PAIR_STRIDE;
  return blockIdx.x * TPB + i;
}

// Decode: a section of the block's groups (PAIR bytes an entry: rows g and
// g + 8) into shared memory by cp.async, 16 bytes a copy: [PARTS][TPB]
// runs of a tile's GROUPS x 8 entries, contiguous in the buffer's section
// (at `section`) too. Tiles past the last copy zeros. The caller commits.
template <int PAIR>
__device__ __forceinline__ void
kiln_stage_groups(void *to, const unsigned char *section) {
  constexpr int CHUNKS = GROUPS * 8 * PAIR / 16; // a tile's
  constexpr int ALL = PARTS * TPB * CHUNKS;
#pragma unroll
  for (int i = 0; i < (ALL + THREADS - 1) / THREADS; ++i) {
    const int c = threadIdx.x + i * THREADS;
    if (ALL % THREADS && c >= ALL)
      break;
    const int run = c / CHUNKS, p = run / TPB;
    const int tile = kiln_block_tile(run % TPB);
    kiln_cp_async16(
        static_cast<unsigned char *>(to) + (long long)c * 16,
        section +
            ((long long)(tile + p * WARP_TILES) * CHUNKS + c % CHUNKS) * 16,
        tile < WARP_TILES);
  }
}
)cuda";
  os << "extern \"C\" __global__ void __launch_bounds__(THREADS"
     << (phase == Phase::decode
             ? ", " + std::to_string(std::max(
                          1, decodeThreads / (32 * tilesPerBlock * splitK)))
             : std::string())
     << ") " << k.entry << "(" << kernelParameters(k) << ") {\n";
  os << R"cuda(  kiln_launch_dependents();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wt = kiln_block_tile(warp / SPLIT_K), part = warp % SPLIT_K;
  const bool live = wt < WARP_TILES;
  int tiles[PARTS]; // the W tiles this warp streams
  tiles[0] = live ? wt : 0;
  if constexpr (SWIGLU)
    tiles[PARTS - 1] = live ? wt + WARP_TILES : 0;
  // Groups: KPG k-steps each. A warp's span starts on a group (whole
  // groups of loads a span) and a pass of UNROLL loads holds whole groups,
  // or there is one group: then which k-steps start a group is known when
  // the loop is unrolled, and the group bookkeeping of the others compiles
  // away (it was most of a decode k-step's instructions).
  constexpr int KPG = GROUP / 16, LPG = KPG > STEPS ? KPG / STEPS : 1;
  constexpr int SPAN = ((LOADS + SPLIT_K - 1) / SPLIT_K + LPG - 1) / LPG * LPG;
  constexpr bool ONE_GROUP = GROUPS == 1;
  // Decode's grouped int4 and int8 codes go into the mmas raw (1024 +
  // code), each group's zero (and min) taken off its sum as it ends, from
  // the group's sum of x (kiln_quant_raw_offsets): four instructions fewer a
  // k-step of the nine that dequantized it. Not a whole row (ONE_GROUP):
  // 1024 x summed over thousands of columns would cancel more of fp32's
  // digits than a group's 128 do (2^-10 of them: below f16's rounding).
  constexpr bool RAW = STAGE_X && KIND != 2 && !ONE_GROUP;
  static_assert(RAW || !(MINS && STAGE_X), "decode's mins are RAW's offsets");
  // The staged x's sums, of XCHUNK columns each (a warp's 64, or a group's
  // where shorter: XSEG lanes' pairs), XCPG a group.
  constexpr int XSEG = (GROUP / 2) % 32 == 0   ? 32
                       : (GROUP / 2) % 16 == 0 ? 16
                                               : 8;
  constexpr int XCHUNK = 2 * XSEG, XCPG = GROUP / XCHUNK;
  static_assert(GROUP % XCHUNK == 0, "a group is whole chunks of x's sums");
  // Decode loads x for two k-steps at once (16 bytes), but where a warp
  // holds one tile of a mins format: its f32 scales and mins leave no two
  // more registers a k-step under the cap of 64 (int8-g16-min's o_proj
  // spilled on sm_80, int4-g32-min's QKV GEMV on sm_90).
  constexpr bool X_PAIRS = !(MINS && !SWIGLU);
  constexpr bool STATIC_GROUPS =
      ONE_GROUP || ((KPG % STEPS == 0 || STEPS % KPG == 0) &&
                    (UNROLL * STEPS) % KPG == 0);
  // Whole passes: every warp's span is a multiple of UNROLL loads, so no
  // load of a pass needs its own bound check (nor a predicate and a
  // branch of its own).
  constexpr bool WHOLE_PASSES = SPAN % UNROLL == 0 && LOADS % UNROLL == 0;
  const int begin = part * SPAN;
  const int end = live ? min(LOADS, begin + SPAN) : begin;
  const uint4 *wp[PARTS];
  uint4 buf[PARTS][UNROLL]; // the loads in flight
#pragma unroll
  for (int p = 0; p < PARTS; ++p) {
    wp[p] = reinterpret_cast<const uint4 *>(w) +
            (long long)tiles[p] * LOADS * 32 + lane;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (begin + u < end)
        buf[p][u] = kiln_stream_load(wp[p] + (long long)(begin + u) * 32);
  }
  // Decode: the groups of the block's tiles (scales, mins, zero points)
  // are copied to shared memory beside x by cp.async, issued here with the
  // first loads of W: no k-step and no group's flush waits for memory then
  // (they did, twice a warp's span of int4-g128, and a decode GEMV is a
  // span or two a warp), and no register holds them on the way (loaded
  // into registers and stored after the wait, they took 4 an entry with
  // mins, which capped them at 16 KB). Groups that do not fit the block's
  // 48 KB of shared memory beside x (the mins formats' long rows) are
  // loaded from global memory as each starts (its zero points) and ends
  // (its scales, mins), as prompts' GEMMs do.
  using Group = kiln_quant_group<MINS, ZP>;
  constexpr int SG = PARTS * TPB * GROUPS * 8; // [PARTS][TPB][GROUPS][8]
  constexpr int ENTRY_BYTES = (MINS ? 16 : 4) + (ZP ? 2 : 0);
  // Decode's split-K sums: c0 and c2 of the lanes t = 0 (the others hold
  // padding columns of x); a batch's every accumulator.
  constexpr int RED_VALUES = STAGE_X ? PARTS * 2 : PARTS * NT * 4,
                RED_LANES = STAGE_X ? 8 : 32;
  // The staged groups: the scales' section (SG pairs of f16, or of f32
  // with mins), then the mins' (f32 pairs), then the zero points' (u8
  // pairs), each [PARTS][TPB][GROUPS][8] entries (rows g and g + 8).
  constexpr int SCALE_PAIR = MINS ? 8 : 4;
  constexpr int MINS_OFF = SG * SCALE_PAIR,
                ZEROS_OFF = MINS_OFF + (MINS ? SG * 8 : 0);
  // x's row, the groups and RAW's sums of x's chunks in one buffer, whose
  // .shared address the loop takes once for all (each array whose address
  // is taken for a copy costs the window's base, S2UR and three more, at
  // every use the register cap does not let the compiler keep).
  constexpr int CHUNKS_OFF = 2 * K + (STAGE_GROUPS ? SG * ENTRY_BYTES : 0);
  static_assert(!STAGE_X ||
                    STAGED_BYTES == CHUNKS_OFF + (RAW ? 4 * (K / XCHUNK) : 0),
                "the staged buffer as kiln sized it (decodeStage)");
)cuda";
  // Past 48 KiB (a long row of x: llama2-70b's down_proj) in dynamic
  // shared memory, which a launch may make larger.
  if (stage.dynamic)
    os << "  KILN_DYNAMIC_SHARED(staged, STAGED_BYTES); // [STAGED_BYTES]\n";
  else
    os << "  __shared__ __align__(16) unsigned char staged[STAGED_BYTES];\n";
  os << R"cuda(  __half *const xs = reinterpret_cast<__half *>(staged); // [K] with STAGE_X
  unsigned char *const group_stage = // [SG * ENTRY_BYTES] with STAGE_GROUPS
      staged + (STAGE_X ? 2 * K : 0);
  float *const x_chunks = // [K / XCHUNK] with RAW
      reinterpret_cast<float *>(staged + (STAGE_X ? CHUNKS_OFF : 0));
  if constexpr (STAGE_GROUPS) {
    kiln_stage_groups<SCALE_PAIR>(group_stage, w + SCALES);
    if constexpr (MINS)
      kiln_stage_groups<8>(group_stage + MINS_OFF, w + MINS_AT);
    if constexpr (ZP)
      kiln_stage_groups<2>(group_stage + ZEROS_OFF, w + ZEROS);
    kiln_cp_async_commit();
  }
)cuda";
  // fused_qkv: the token's slot (the host's inputs, a round trip after
  // another) is read by one thread before the wait, while W streams in.
  if (qkv)
    os << R"cuda(  __shared__ int qkv_pos;          // the token's position
  __shared__ long long qkv_slot;   // its first element in the layer's pool
  if (threadIdx.x == 0) {
    const int pos = positions[0];
    qkv_pos = pos;
    qkv_slot = kiln_slot(block_table + (long long)seqs[0] * TABLE_BLOCKS, pos,
                         BLOCK_SIZE) * KVW;
  }
)cuda";
  os << R"cuda(  kiln_wait_previous_grid(); // x is the previous kernel's; W was not
  if constexpr (STAGE_X) // its staging is straight code
    x = kiln_waited(x);
  const __half *gs = reinterpret_cast<const __half *>(w + NORM_AT);
  // Decode stages x: XPT pairs of columns a thread, 2 (threadIdx.x + i
  // THREADS), and g's with them.
  constexpr int XPT = STAGE_X ? (K / 2 + THREADS - 1) / THREADS : 1;
  // Every thread's pairs are in the row (no bound check: a predicated
  // assignment put x's pairs in local memory under the register cap).
  constexpr bool WHOLE_X = K % (2 * THREADS) == 0;
  // Held at once, more than 16 pairs a thread spill under the register cap
  // (llama2-70b's down_proj: 28): a longer row's are loaded in batches of
  // XB, a round trip each, g's with them.
  constexpr int X_BATCHES = (XPT + 15) / 16,
                XB = (XPT + X_BATCHES - 1) / X_BATCHES;
  __half2 g_pairs[STAGE_X && NORM && X_BATCHES == 1 ? XPT : 1];
  if constexpr (STAGE_X && NORM && X_BATCHES == 1) {
#pragma unroll
    for (int i = 0; i < XPT; ++i) {
      const int j = 2 * (threadIdx.x + i * THREADS);
      if (WHOLE_X || j < K)
        g_pairs[i] = *reinterpret_cast<const __half2 *>(gs + j);
    }
  }
)cuda";
  if (!fused)
    os << "  const long long row0 = "
       << (lastRow ? "count[0] - 1; // the prompt's last real row"
                   : "(long long)blockIdx.y * 8 * NT;")
       << R"cuda(
  // The block's rows of the step. Decode reads the count only for its
  // stores: held across the loop, it was spilled under the register cap.
  auto rows_of_step = [&] {
    return (int)min((long long)8 * NT, (long long)count[0] - row0);
  };
  const int rows = STAGE_X ? 1 : rows_of_step();
)cuda";
  else
    os << R"cuda(  constexpr long long row0 = 0;
  constexpr int rows = 1;
)cuda";
  // With a residual, thread i loads the residual of the block's W row i
  // with x's loads and keeps it in shared memory for the end: its round
  // trip runs beside x's, not after the loop, and holds no register.
  os << "  float residual_v = 0.0f; // the residual of block row threadIdx.x\n";
  if (fused && shape.residual)
    os << R"cuda(  if (threadIdx.x < 16 * TPB &&
      blockIdx.x * TPB * 16 + threadIdx.x < N)
    residual_v = __half2float(
        kiln_waited(residual)[blockIdx.x * TPB * 16 + threadIdx.x]);
)cuda";
  os << R"cuda(  const unsigned short *perm =
      reinterpret_cast<const unsigned short *>(w + PERM_AT);
  // Decode: the token's x (times g, through perm) once into shared memory,
  // each 32 columns as the lanes' B fragments of two k-steps want them
  // (t's columns 2t, 2t + 1, 2t + 8, 2t + 9, then the same 16 on, side by
  // side: one 16-byte load a pair of k-steps; without X_PAIRS each 16
  // columns, one 8-byte load a k-step), instead of four loads from global
  // memory a k-step. Every load of x (of a batch, in a long row) is
  // issued before the first store, and a fused RMSNorm's sum of squares
  // and RAW's sums of x's chunks are taken on the way, reduced at the same
  // barrier: one round trip to x (a batch), not one a pair and another for
  // each sum.
  __shared__ float x_squares[THREADS / 32]; // [warps] with a fused RMSNorm
  __shared__ float residuals[RESIDUAL ? 16 * TPB : 1]; // [16 * TPB]
  float rms_scale = 1.0f;
  static_assert(STAGE_X || !FUSED, "decode fuses its epilogue, no other");
  if constexpr (STAGE_X) {
    float squares = 0.0f;
#pragma unroll
    for (int b = 0; b < XPT; b += XB) { // pairs b to b + XB
      __half2 x_pairs[XB], g_batch[NORM && X_BATCHES > 1 ? XB : 1];
#pragma unroll
      for (int i = 0; i < XB; ++i) {
        const int j = 2 * (threadIdx.x + (b + i) * THREADS);
        if (b + i < XPT && (WHOLE_X || j < K)) {
          if constexpr (PERM)
            x_pairs[i] =
                __halves2half2(x[row0 * K + perm[j]], x[row0 * K + perm[j + 1]]);
          else
            x_pairs[i] = *reinterpret_cast<const __half2 *>(x + row0 * K + j);
          if constexpr (NORM && X_BATCHES > 1)
            g_batch[i] = *reinterpret_cast<const __half2 *>(gs + j);
        }
      }
      float chunk[RAW ? XB : 1]; // this thread's pairs as staged, summed
#pragma unroll
      for (int i = 0; i < XB; ++i) {
        const int j = 2 * (threadIdx.x + (b + i) * THREADS);
        if constexpr (RAW)
          chunk[i] = 0.0f;
        if (b + i < XPT && (WHOLE_X || j < K)) {
          __half2 v = x_pairs[i];
          if constexpr (RMS) {
            const float2 f = __half22float2(v);
            squares += f.x * f.x + f.y * f.y;
          }
          if constexpr (NORM)
            v = __hmul2(v, X_BATCHES > 1 ? g_batch[i] : g_pairs[b + i]);
          if constexpr (RAW) {
            const float2 f = __half22float2(v); // the values the mmas take
            chunk[i] = f.x + f.y;
          }
          const int c = j & (X_PAIRS ? 31 : 15), cc = c & 15;
          *reinterpret_cast<__half2 *>(xs + (j - c) +
                                       (cc & 7) * (X_PAIRS ? 4 : 2) +
                                       (cc >> 3) * 2 + (c >> 4) * 4) = v;
        }
      }
      // The sum of squares once every batch is in it, before the last
      // batch's chunks (in the other order, llama2-7b's int4-g32 QKV
      // spilled 15 bytes on sm_90).
      if (RMS && b + XB >= XPT) {
        squares = kiln_warp_sum(squares);
        if (lane == 0)
          x_squares[warp] = squares;
      }
      if constexpr (RAW) { // a warp's pairs are 64 columns in a row
#pragma unroll
        for (int i = 0; i < XB; ++i) {
          float v = chunk[i];
#pragma unroll
          for (int o = XSEG / 2; o > 0; o /= 2)
            v += __shfl_xor_sync(0xffffffffu, v, o);
          const int j = 2 * (threadIdx.x + (b + i) * THREADS);
          if (lane % XSEG == 0 && b + i < XPT && (WHOLE_X || j < K))
            x_chunks[j / XCHUNK] = v;
        }
      }
    }
    if (RESIDUAL && threadIdx.x < 16 * TPB)
      residuals[threadIdx.x] = residual_v;
    if constexpr (STAGE_GROUPS)
      kiln_cp_async_wait<0>(); // this thread's copies; the barrier: all
    __syncthreads();
    if constexpr (RMS) {
      float total = 0.0f;
#pragma unroll
      for (int i = 0; i < THREADS / 32; ++i)
        total += x_squares[i];
      rms_scale = rsqrtf(total / K + EPS);
    }
  }
#ifndef KILN_CUDA_EMU_H
  // This lane's place in xs as a .shared address, once: each k-step's load
  // then takes it plus an offset, instead of the shared window's base again
  // (S2R of the CTA id and its arithmetic, which the register cap made the
  // compiler recompute every k-step).
  const unsigned staged_at = kiln_shared_address(staged);
  const unsigned xs_at = staged_at + (X_PAIRS ? 16 : 8) * t,
                 groups_at = staged_at + (STAGE_X ? 2 * K : 0),
                 chunks_at = staged_at + (STAGE_X ? CHUNKS_OFF : 0);
#endif
  // acc: all the groups' sums; part_acc: this group's.
  float acc[PARTS][NT][4], part_acc[PARTS][NT][4];
#pragma unroll
  for (int p = 0; p < PARTS; ++p)
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        acc[p][i][j] = part_acc[p][i][j] = 0.0f;
  // With mins, a batch's sums of x rows 2t and 2t + 1 as the accumulators
  // hold them, from one more mma a k-step of an all-ones A fragment
  // (decode's are RAW's, x_chunks).
  constexpr bool MMA_SUMS = MINS && !STAGE_X;
  float x_sum[MMA_SUMS ? NT : 1][2]; // x rows 2t, 2t + 1
#pragma unroll
  for (int i = 0; i < (MMA_SUMS ? NT : 1); ++i)
    x_sum[i][0] = x_sum[i][1] = 0.0f;
  int group = -1;
  // This warp's first staged entry (part 0, group 0, row g) and its
  // addresses, once (HOIST 2): derived from the thread's index at each
  // flush, they cost up to seven instructions a group, the register cap
  // having the compiler read the index again. Where that spilled, the
  // entry's index alone (1: a tile a warp with mins; SwiGLU with zero
  // points, on sm_80, in spans of 4 passes) or neither (0: SwiGLU of
  // groups under 128 columns, on sm_80; a QKV GEMV with mins).
  constexpr int HOIST =
      (QKV && MINS) || (SWIGLU && !ONE_GROUP && GROUP < 128) ? 0
      : MINS || (SWIGLU && ZP)                               ? 1
                                                             : 2;
  const int entry0 = (warp / SPLIT_K) * GROUPS * 8 + g;
#ifndef KILN_CUDA_EMU_H
  const unsigned scales_at0 = groups_at + SCALE_PAIR * entry0,
                 zeros_at0 = groups_at + ZEROS_OFF + 2 * entry0;
#endif
  // This group's values of part p: staged, or loaded now.
  auto group_of = [&](int p) {
    Group q{};
    if constexpr (STAGE_GROUPS) {
      const int e =
          HOIST ? entry0 + (p * TPB * GROUPS + group) * 8
                : ((p * TPB + warp / SPLIT_K) * GROUPS + group) * 8 + g;
#ifdef KILN_CUDA_EMU_H
      if constexpr (MINS) {
        q.fscales = reinterpret_cast<const float2 *>(group_stage)[e];
        q.mins = reinterpret_cast<const float2 *>(group_stage + MINS_OFF)[e];
      } else {
        q.scales = reinterpret_cast<const unsigned *>(group_stage)[e];
      }
      if constexpr (ZP)
        q.zeros = reinterpret_cast<const unsigned short *>(group_stage +
                                                           ZEROS_OFF)[e];
#else
      const int de = (p * TPB * GROUPS + group) * 8; // e - entry0
      // The addresses of entry e's scales and zero points.
      const unsigned scales_at = HOIST == 2 ? scales_at0 + SCALE_PAIR * de
                                            : groups_at + SCALE_PAIR * e,
                     zeros_at = HOIST == 2 ? zeros_at0 + 2 * de
                                           : groups_at + ZEROS_OFF + 2 * e;
      if constexpr (MINS) {
        asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];"
                     : "=f"(q.fscales.x), "=f"(q.fscales.y)
                     : "r"(scales_at));
        asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];"
                     : "=f"(q.mins.x), "=f"(q.mins.y)
                     : "r"(scales_at + MINS_OFF));
      } else {
        asm volatile("ld.shared.u32 %0, [%1];"
                     : "=r"(q.scales)
                     : "r"(scales_at));
      }
      if constexpr (ZP)
        asm volatile("ld.shared.u16 %0, [%1];"
                     : "=h"(q.zeros)
                     : "r"(zeros_at));
#endif
    } else {
      q = kiln_quant_group_load<MINS, ZP>(w, SCALES, MINS_AT, ZEROS, tiles[p],
                                          GROUPS, group, g);
    }
    return q;
  };
  kiln_quant_zero zero[PARTS] = {}; // unused with RAW
  // This group's sums into acc, times its scales (fp8: and 2^8), less its
  // mins times the sums of x (sum (code s - m) x = s sum code x - m sum x).
  auto flush = [&] {
    if (group < 0)
      return;
    float x_group = 0.0f; // RAW: the group's sum of x
    if constexpr (RAW)
#pragma unroll
      for (int c = 0; c < XCPG; ++c) {
        float v;
#ifdef KILN_CUDA_EMU_H
        v = x_chunks[group * XCPG + c];
#else
        asm volatile("ld.shared.f32 %0, [%1];"
                     : "=f"(v)
                     : "r"(chunks_at + 4 * (group * XCPG + c)));
#endif
        x_group = c ? x_group + v : v;
      }
#pragma unroll
    for (int p = 0; p < PARTS; ++p) {
      const Group q = group_of(p);
      const float2 s = kiln_quant_scales_of<KIND>(q);
      if constexpr (RAW) { // decode's one row: rows g (c0) and g + 8 (c2)
        const float2 o = kiln_quant_raw_offsets<KIND, ZP, MIDDLE>(q);
        constexpr float HI = KIND == 4 ? 0.0625f : 1.0f; // int4's: 16 code
        acc[p][0][0] += (part_acc[p][0][0] - o.x * x_group) * s.x;
        acc[p][0][2] += (part_acc[p][0][2] * HI - o.y * x_group) * s.y;
        if constexpr (MINS) {
          const float2 m = kiln_quant_mins_of(q);
          acc[p][0][0] -= m.x * x_group;
          acc[p][0][2] -= m.y * x_group;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j)
          part_acc[p][0][j] = 0.0f;
        continue;
      }
      const float lo = s.x, hi = s.y;
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        acc[p][i][0] += part_acc[p][i][0] * lo;
        acc[p][i][2] += part_acc[p][i][2] * hi;
        if constexpr (!STAGE_X) { // decode's x row 1 is padding: no one reads
          acc[p][i][1] += part_acc[p][i][1] * lo;
          acc[p][i][3] += part_acc[p][i][3] * hi;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j)
          part_acc[p][i][j] = 0.0f;
      }
      if constexpr (MINS) {
        const float2 m = kiln_quant_mins_of(q);
#pragma unroll
        for (int i = 0; i < NT; ++i) {
          const float s0 = x_sum[i][0], s1 = x_sum[i][1];
          acc[p][i][0] -= s0 * m.x;
          acc[p][i][2] -= s0 * m.y;
          if constexpr (!STAGE_X) {
            acc[p][i][1] -= s1 * m.x;
            acc[p][i][3] -= s1 * m.y;
          }
        }
      }
    }
    if constexpr (MMA_SUMS)
#pragma unroll
      for (int i = 0; i < NT; ++i)
        x_sum[i][0] = x_sum[i][1] = 0.0f;
  };
  // A group's start: the sums so far flushed, its zeros.
  auto start = [&](int next) {
    flush();
    group = next;
    if constexpr (!RAW) // RAW's zeros are taken off at the flush
#pragma unroll
      for (int p = 0; p < PARTS; ++p)
        zero[p] = kiln_quant_zeros_of<ZP, MIDDLE>(group_of(p));
  };
  if constexpr (ONE_GROUP)
    start(0);
  // One k-step of every part: its group's zeros, the fragments, the mmas.
  // `at` is its place in a pass (u * STEPS + s), known when unrolled; a
  // pass starts on an even k-step (STEPS is even), whose load of x
  // serves the next k-step too.
  static_assert(STEPS % 2 == 0, "k-steps in pairs a load of W");
  uint4 x_pair; // decode: B of k-steps 2i and 2i + 1
  auto step = [&](const unsigned (&q)[PARTS][4], int s, int kstep, int at) {
    const int k0 = kstep * 16;
    if constexpr (!ONE_GROUP) {
      if (STATIC_GROUPS ? at % KPG == 0 : k0 / GROUP != group)
        start(kstep / KPG);
    }
    unsigned a[PARTS][4];
#pragma unroll
    for (int p = 0; p < PARTS; ++p)
      kiln_dequant<KIND, RAW>(q[p] + s * (4 / STEPS), a[p], zero[p]);
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      unsigned b[2] = {0u, 0u}; // x rows past the count are zeros
      const int r = i * 8 + g;
      if constexpr (STAGE_X) {
        // Decode's one row, staged, in every column of B: column g of C
        // then holds the token's sums too, which no one reads (the
        // epilogue takes column 0), and no lane selects or zeroes.
        if constexpr (X_PAIRS) {
          if (s % 2 == 0) {
#ifdef KILN_CUDA_EMU_H
            x_pair = *reinterpret_cast<const uint4 *>(xs + k0 + 8 * t);
#else
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(x_pair.x), "=r"(x_pair.y), "=r"(x_pair.z),
                           "=r"(x_pair.w)
                         : "r"(xs_at + 2 * k0));
#endif
          }
          b[0] = s % 2 ? x_pair.z : x_pair.x;
          b[1] = s % 2 ? x_pair.w : x_pair.y;
        } else {
#ifdef KILN_CUDA_EMU_H
          const uint2 v = *reinterpret_cast<const uint2 *>(xs + k0 + 4 * t);
          b[0] = v.x;
          b[1] = v.y;
#else
          asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];"
                       : "=r"(b[0]), "=r"(b[1])
                       : "r"(xs_at + 2 * k0));
#endif
        }
      } else if (r < rows) {
        __half2 x0, x1;
        if constexpr (PERM) { // x's columns perm[j] of the buffer's j
          const __half *xr = x + (row0 + r) * K;
          const int j = k0 + 2 * t;
          x0 = __halves2half2(xr[perm[j]], xr[perm[j + 1]]);
          x1 = __halves2half2(xr[perm[j + 8]], xr[perm[j + 9]]);
        } else {
          const __half *xr = x + (row0 + r) * K + k0 + 2 * t;
          x0 = *reinterpret_cast<const __half2 *>(xr);
          x1 = *reinterpret_cast<const __half2 *>(xr + 8);
        }
        if constexpr (NORM) {
          x0 = __hmul2(x0, *reinterpret_cast<const __half2 *>(gs + k0 + 2 * t));
          x1 = __hmul2(x1,
                       *reinterpret_cast<const __half2 *>(gs + k0 + 8 + 2 * t));
        }
        b[0] = kiln_half2_bits(x0);
        b[1] = kiln_half2_bits(x1);
      }
#pragma unroll
      for (int p = 0; p < PARTS; ++p)
        kiln_mma<false>(part_acc[p][i], a[p], b);
      if constexpr (MMA_SUMS) {
        const unsigned ones[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u,
                                  0x3c003c00u}; // f16 1.0 pairs
        float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f}; // rows g, g + 8 alike
        kiln_mma<false>(sums, ones, b);
        x_sum[i][0] += sums[0];
        x_sum[i][1] += sums[1];
      }
    }
  };
  // UNROLL loads a lane in flight through each pass. Where decode's
  // groups are staged (no load in the loop but W's), passes are whole
  // (WHOLE_PASSES, above), and a GEMV of one tile a warp (64 registers
  // under the cap) refills each load's registers with the next pass's
  // load once its words are used: they hold UNROLL loads, not a pass
  // being used and the next arriving (double buffered with whole passes,
  // int4's 32 registers of loads spilled). Elsewhere the next pass's loads
  // are issued, all at once, before this pass's are used (SwiGLU's two
  // tiles refilled went out late, behind the pass's work; where groups
  // are loaded in the loop, and for SwiGLU with mins on sm_80, whole
  // passes spilled).
  // Not whole in one-tile GEMVs of rows of 8192 columns or more in blocks
  // of several tiles (llama2-70b's, 2 tiles a block: o_proj in int4-g32
  // and int4-g64, down_proj in int4-g128-zp, spans of 4 and 14 passes,
  // spilled a register the loop reloaded every pass; 7b's down_proj, one
  // tile a block, is whole and clean, and 70b's gate/up waited for loads
  // when not whole).
  constexpr bool STAGED = STAGE_X && (STAGE_GROUPS || ONE_GROUP);
  constexpr bool WHOLE =
      STAGED && WHOLE_PASSES && !(SWIGLU && MINS) &&
      (SWIGLU || SPAN <= UNROLL || TPB == 1 || K < 8192);
  constexpr bool REFILL = STAGED && !SWIGLU;
  // The loads of [from, from + UNROLL) into `into`.
  auto issue = [&](uint4(&into)[PARTS][UNROLL], int from) {
#pragma unroll
    for (int p = 0; p < PARTS; ++p)
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        if (WHOLE ? from < end : from + u < end)
          into[p][u] = kiln_stream_load(wp[p] + (long long)(from + u) * 32);
  };
  // The pass of loads [l, l + UNROLL), held in `now`; with REFILL each
  // load's registers take the next pass's load once used.
  auto pass = [&](uint4(&now)[PARTS][UNROLL], int l) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (WHOLE || l + u < end) { // the same for the whole warp
        unsigned q[PARTS][4];
#pragma unroll
        for (int p = 0; p < PARTS; ++p) {
          const uint4 v = now[p][u];
          q[p][0] = v.x, q[p][1] = v.y, q[p][2] = v.z, q[p][3] = v.w;
        }
#pragma unroll
        for (int s = 0; s < STEPS; ++s)
          step(q, s, (l + u) * STEPS + s, u * STEPS + s);
        if constexpr (REFILL)
#pragma unroll
          for (int p = 0; p < PARTS; ++p)
            if (WHOLE ? l + UNROLL < end : l + UNROLL + u < end)
              now[p][u] =
                  kiln_stream_load(wp[p] + (long long)(l + UNROLL + u) * 32);
      }
    }
  };
  // Staged SwiGLU of groups of 128 columns or more: two buffers in turn,
  // the next pass's loads into the other (a buffer copied into the pass's
  // registers each pass costs a move a word, 32 a pass of its 8 loads).
  // Shorter groups' flushes, and loads of groups in the loop, leave no
  // registers for a second buffer of their own (they spilled).
  constexpr bool PING_PONG =
      STAGED && SWIGLU && !MINS && (ONE_GROUP || GROUP >= 128);
  if constexpr (REFILL) {
#pragma unroll 1
    for (int l = begin; l < end; l += UNROLL)
      pass(buf, l);
  } else if constexpr (!PING_PONG) {
#pragma unroll 1
    for (int l = begin; l < end; l += UNROLL) {
      uint4 cur[PARTS][UNROLL]; // this pass's, while the next's arrive
#pragma unroll
      for (int p = 0; p < PARTS; ++p)
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
          cur[p][u] = buf[p][u];
      issue(buf, l + UNROLL);
      pass(cur, l);
    }
  } else {
    uint4 other[PARTS][UNROLL];
#pragma unroll 1
    for (int l = begin; l < end; l += 2 * UNROLL) {
      issue(other, l + UNROLL);
      pass(buf, l);
      if (l + UNROLL >= end)
        break;
      issue(buf, l + 2 * UNROLL);
      pass(other, l + UNROLL);
    }
  }
  flush();
  if constexpr (SPLIT_K > 1) {
    // The parts' sums, [warp][RED_VALUES][RED_LANES], added by each tile's
    // first warp: decode's c0, c2 of lanes t = 0 (lane g), a batch's all.
    __shared__ float red[TPB * SPLIT_K][RED_VALUES][RED_LANES];
    if constexpr (STAGE_X) {
      if (t == 0)
#pragma unroll
        for (int p = 0; p < PARTS; ++p)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            red[warp][p * 2 + h][g] = acc[p][0][2 * h];
    } else {
#pragma unroll
      for (int p = 0; p < PARTS; ++p)
#pragma unroll
        for (int i = 0; i < NT; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            red[warp][(p * NT + i) * 4 + j][lane] = acc[p][i][j];
    }
    __syncthreads();
    if (part != 0 && !QKV) // fused_qkv's warps meet once more below
      return;
    for (int o = 1; (!QKV || part == 0) && o < SPLIT_K; ++o) {
      if constexpr (STAGE_X) {
        if (t == 0)
#pragma unroll
          for (int p = 0; p < PARTS; ++p)
#pragma unroll
            for (int h = 0; h < 2; ++h)
              acc[p][0][2 * h] += red[warp + o][p * 2 + h][g];
      } else {
#pragma unroll
        for (int p = 0; p < PARTS; ++p)
#pragma unroll
          for (int i = 0; i < NT; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
              acc[p][i][j] += red[warp + o][(p * NT + i) * 4 + j][lane];
      }
    }
  }
  if (!QKV && !live)
    return;
)cuda";
  if (qkv)
    // Lanes t = 0 of the tiles' first warps hold rows g and g + 8 of each
    // tile; RoPE's partner of a row of k is in the block, at the same lane
    // of the other tile (rotate-half) or at row g ^ 1 of its own.
    os << R"cuda(  __shared__ float tile_rows[TPB][16]; // the block's [q | k | v] rows
  if (part == 0 && t == 0 && live) {
    tile_rows[warp / SPLIT_K][g] = acc[0][0][0] * rms_scale;
    tile_rows[warp / SPLIT_K][g + 8] = acc[0][0][2] * rms_scale;
  }
  __syncthreads();
  if (part != 0 || t != 0 || !live)
    return;
  // Column col of [q | k | v], one of the block's tiles' rows.
  auto value = [&](int col) {
    return tile_rows[col / 16 == kiln_block_tile(0) ? 0 : 1][col % 16];
  };
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int col = wt * 16 + g + 8 * h, task = kiln_qkv_task_of(col);
    if (col < N && task >= 0)
      kiln_qkv_task(task, qkv_pos, qkv_pos + 1, qkv_slot, value, true, q,
                    k_cache, v_cache);
  }
}
)cuda";
  else if (!fused)
    os << R"cuda(  // c0, c1: W row g, x rows 2t and 2t + 1; c2, c3: W row g + 8.
  const int stored = STAGE_X ? rows_of_step() : rows;
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = i * 8 + 2 * t + (j & 1), col = wt * 16 + g + 8 * (j >> 1);
      if (r < stored && col < N)
        c[(row0 + r) * N + col] = acc[0][i][j];
    }
}
)cuda";
  else {
    // The one row's results: lanes t = 0 hold W rows g (c0) and g + 8 (c2).
    os << R"cuda(  if (t != 0)
    return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int col = tiles[0] * 16 + g + 8 * h;
    if (col >= (SWIGLU ? N / 2 : N))
      continue;
    float y = acc[0][0][2 * h] * rms_scale;
    if constexpr (SWIGLU)
      y = kiln_silu(y) * (acc[PARTS - 1][0][2 * h] * rms_scale);
)cuda";
    if (shape.residual)
      os << "    y += residuals[(warp / SPLIT_K) * 16 + g + 8 * h];\n";
    os << "    kiln_store(0, col, y" << outs.names << ");\n  }\n}\n";
  }
  k.source = src;
  return k;
}

} // namespace kiln

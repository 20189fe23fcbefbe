//===- CudaKernel.h - generated CUDA C++ for one kernel ---------*- C++ -*-===//
#ifndef KILN_CODEGEN_CUDAKERNEL_H
#define KILN_CODEGEN_CUDAKERNEL_H

#include "ir/KernelOpInterface.h"
#include "ir/KilnDialect.h"
#include "runtime/Program.h"

#include "mlir/IR/Operation.h"
#include "llvm/Support/Error.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// Tuning knobs every template reads; `kiln tune` will choose them per
/// kernel, these are the defaults. `kiln compile --kernel-options` sets
/// them by the names in parseCodegenOptions.
struct CodegenOptions {
  int gemvWarps = 4;         // row pairs per GEMV block (gemv-rows)
  int gemvSplitK = 1;        // warps sharing one GEMV pair (gemv-split-k)
  int gemvUnroll = 4;        // GEMV loads per row per lane (gemv-unroll)
  int maxVectorWidth = 8;    // widest fp16 load, in halves (vector-width)
  int attentionWarps = 4;    // warps per attention block (attention-warps)
  int kvSplits = 0;          // decode attention key splits; 0: choose
  int smCount = 132;         // multiprocessors to fill (H100/H200)
  int epilogueThreads = 256; // threads per prefill epilogue row
  int prefillAttentionRows =
      0; // query rows a warp, prefill attention; 0: choose
  int prefillAttentionKeys = 0; // keys a prefill attention tile; 0: choose
  int elementwiseThreads = 128; // threads per embedding block
  /// Prefill GEMMs: cuBLAS's choice (-1), cuBLASLt's N-th (0 to
  /// kMaxGemmAlgo), or kiln's own (kSmallGemmAlgo).
  int gemmAlgo = -1;
  int gemmTile = 8; // token rows per warp of kiln's own GEMM (gemm-tile)
  /// Prefill GEMMs of quantized weights: kiln's quantized GEMM (0), the
  /// weight dequantized to f16 and cuBLAS's GEMM (1), fp8 weights by
  /// cuBLASLt's FP8 GEMM with the activations rounded to e4m3 (2, W8A8;
  /// other formats as 1), or by the plan's rows (-1: 1 from
  /// kDequantizeRows rows on). quant-gemm.
  int quantGemm = -1;
  /// Decode GEMVs of quantized weights: their block's groups (scales, mins,
  /// zero points) staged in shared memory where they fit (1), or loaded as
  /// each group starts and ends, as prompts' GEMMs load them (0).
  /// quant-stage.
  int quantStage = 1;
  /// Decode GEMVs of quantized weights: the warps an SM their split-K
  /// makes at least, over the grid (the fewest warps a tile, in powers of
  /// two, that do). quant-warps.
  int quantWarps = 16;
  /// Prefill's sequence-length buckets; empty: powers of two from 16 up to
  /// the largest prefill the arena holds, and that largest.
  std::vector<int64_t> prefillBuckets;
  /// Knobs that differ by plan (the tuner's winners, kiln compile
  /// --tuning-db): "name=value,..." for the prefill bucket of that many
  /// rows, and for the batched decode of that many sequences. A plan with
  /// knobs of its own runs its own variants of the kernels they change,
  /// named with "@" and the knobs.
  std::map<int64_t, std::string> prefillKnobs, batchKnobs;
  /// Appended to the name of every kernel emitted (a variant's "@...").
  std::string kernelSuffix;
};

/// The batched decode plans of `sequences` slots: 2, 4, 8, ... and
/// `sequences` (none for one).
std::vector<int64_t> batchBuckets(int64_t sequences);

/// Sets the knobs named in `text`, "name=value,...": gemv-rows,
/// gemv-split-k, gemv-unroll, vector-width (1, 2, 4, 8), attention-warps,
/// kv-splits, sm-count, epilogue-threads, prefill-attention-rows,
/// prefill-attention-keys,
/// elementwise-threads, gemm-algo, gemm-tile, quant-gemm, quant-stage,
/// quant-warps.
/// Fails naming an unknown knob or a value out of range (a block has at most
/// 1024 threads).
llvm::Error parseCodegenOptions(llvm::StringRef text, CodegenOptions &opts);

/// The buckets of a module whose arena holds prefills of up to `maxTokens`
/// tokens (kiln.arena_tokens of @prefill): always ending with maxTokens.
std::vector<int64_t> prefillBuckets(const CodegenOptions &opts,
                                    int64_t maxTokens);

/// A kernel's parameters, in order, as the runtime binds them.
enum class ParamKind {
  Activation,  // an arena buffer (input or output)
  Weight,      // a weight (or packed weight) buffer
  KCache,      // the layer's keys in the KV pool
  VCache,      // the layer's values in the KV pool
  KScales,     // a quantized cache's key scales [slot, KVH] f16
  VScales,     // a quantized cache's value scales [slot, KVH] f16
  BlockTable,  // int32 [sequences, TABLE_BLOCKS]: every sequence's blocks
  Positions,   // int32 positions of the new tokens
  Tokens,      // int32 token ids
  Workspace,   // float scratch (split-KV partials)
  Counters,    // uint32 counters, zero between launches
  Count,       // int32 [2]: how many of the rows are real tokens, and a
               // prefill's sequence length after them (0 in decode)
  Sampling,    // the step's sampling parameters (runtime/Sampling.h)
  History,     // int32 [sequences, V]: how often each sequence has seen
               // each token
  LogitBias,   // f32 [sequences, V]: each sequence's logit bias
  RowSequence, // int32 [rows]: the sequence of each row (its table row)
  Dequantized, // f16 [n, k]: a quantized weight dequantized for cuBLAS
};

/// One parameter of a kernel: what the runtime binds to it, its name and
/// its C type. The kernel's signature is made from its list
/// (kernelParameters) and each launch's arguments are bound from it by
/// kind (codegen/BuildProgram.cpp), so the three cannot drift apart.
struct KernelParam {
  ParamKind kind;
  std::string name;
  std::string type; // "const __half *", "float *", ...
};

/// The most splits a launch's fillBlocks makes of a task.
constexpr int64_t kMaxFillSplits = 128;

/// One kernel: its CUDA C++ (a whole NVRTC translation unit), the entry
/// point, its parameters and how to launch it.
struct CudaKernel {
  std::string kernel;     // kiln.kernel: shared by identical layers
  std::string provenance; // kiln.name of the first op that runs it
  std::string entry;      // the extern "C" __global__ function's name
  std::string source;     // the translation unit
  std::vector<KernelParam> params;
  std::array<int64_t, 3> grid = {1, 1, 1};
  int64_t blockThreads = 0;
  /// Dynamic shared memory a block (KernelCode::dynamicSharedBytes): the
  /// source declares it with KILN_DYNAMIC_SHARED.
  int64_t dynamicSharedBytes = 0;
  int64_t workspaceFloats = 0; // Workspace size, when the kernel has one
  int64_t counters = 0;        // Counters size, when the kernel has one
  /// Scratch that grows with the grid: per block of a launch.
  int64_t workspacePerBlock = 0, countersPerBlock = 0;
  /// > 0: grid axis 1 splits each task into as many as the launch holds
  /// without passing this many blocks (1 to kMaxFillSplits splits); the
  /// kernel reads gridDim.y.
  int64_t fillBlocks = 0;
  /// With fillBlocks: at most this many splits (> 0).
  int64_t maxSplits = kMaxFillSplits;
  /// Prefill kernels: grid axis `rowAxis` covers the step's tokens,
  /// `rowsPerBlock` to a block; the launch sizes it for each bucket.
  int rowAxis = -1;
  int64_t rowsPerBlock = 1;
  /// The kernel is the epilogue of a cuBLAS GEMM of the op's first two
  /// operands (x . W^T, into the workspace), which runs just before it.
  bool afterGemm = false;

  /// The grid of a launch over `tokens` rows.
  std::array<int64_t, 3> gridFor(int64_t tokens) const {
    std::array<int64_t, 3> g = grid;
    if (rowAxis >= 0)
      g[rowAxis] = (tokens + rowsPerBlock - 1) / rowsPerBlock;
    if (fillBlocks > 0) {
      int64_t tasks = g[0] * g[2];
      g[1] = std::clamp<int64_t>(fillBlocks / tasks, 1, maxSplits);
    }
    return g;
  }
};

/// What the bundle and the devices keep of `k`: its code, not its launch.
inline KernelCode kernelCode(const CudaKernel &k) {
  return {k.kernel,
          k.entry,
          k.source,
          k.provenance,
          int(k.params.size()),
          k.dynamicSharedBytes};
}

/// The common header of every translation unit: fp16 types, warp
/// reductions, vector loads.
std::string cudaPrelude();

/// What a template that uses tensor cores appends to cudaPrelude():
/// kiln_mma (mma.sync m16n8k16, f16 or bf16 in, f32 sums), kiln_ldmatrix
/// (x1/x2/x4, .trans), kiln_cp_async16 with its commit and wait
/// (codegen/TensorCorePrelude.cpp).
std::string tensorCorePrelude();

/// The entry's parameter list, from k.params, a parameter a line: "const
/// __half *__restrict__ x, float *__restrict__ c, ...".
std::string kernelParameters(const CudaKernel &k);

/// Fails when `weight`'s type is quantized (#kiln.quant): the f16 templates
/// cannot read it.
llvm::Error requireDenseWeight(mlir::Type weight);

/// A kernel for `op`, named by its kiln.kernel attribute (and `suffix`),
/// its provenance the op's kiln.name.
CudaKernel kernelFor(mlir::Operation *op, llvm::StringRef suffix = "");

/// The module's #kiln.kv_pool as the kernels see it: `constexpr int
/// BLOCK_SIZE` (tokens per block) and `TABLE_BLOCKS` (blocks per sequence:
/// a sequence's table is row seq of the [sequences, TABLE_BLOCKS] block
/// table). Unplanned: blocks of 16 for the whole context.
std::string poolConstants(mlir::Operation *op);

/// The KV cache's storage as the kernels see it (codegen/KVCacheQuant.cpp):
/// `kiln_kv_t` (__half, or the codes' unsigned char), `KV_QUANT`,
/// `KV_INT8`, `KV_MAX`, `KV_UNIT`; a quantized cache's
/// `kiln_kv_decode4(w, f)`, `kiln_kv_decode1(c)` (codes to floats,
/// KV_UNIT times less than their values) and `kiln_kv_store_head<DH>(x,
/// codes, scale)` (one head quantized by a warp).
std::string kvCachePrelude(KVCacheType cache);
/// The layer's cache parameters of a kernel that reads (`readOnly`) or
/// writes it: k_cache, v_cache, and a quantized cache's k_scales, v_scales.
std::vector<KernelParam> kvCacheParams(KVCacheType cache, bool readOnly);
/// The scale arguments a kernel passes on: "k_scales, v_scales", or
/// "nullptr, nullptr" for an f16 cache (whose kernels have no such
/// parameters, though the code naming them is compiled).
const char *kvScaleArguments(KVCacheType cache);

/// The templates read and write f16 storage only.
llvm::Error requireF16(mlir::Type element);

/// The widest load (8, 4, 2 or 1 halves, at most `widest`) that divides a
/// row of k halves.
int vectorWidth(int64_t k, int widest = 8);

/// How a matmul kernel writes an op's results, which split the output
/// columns in order: their parameters (`out0`, ...) for the signature, the
/// names to pass on, and `kiln_store(row, col, y, outs...)`, which stores y
/// (f16 or f32, as the result is) into the result that covers column col.
/// Adds the parameters to `k`.
struct ResultStores {
  std::string params; // ", __half *__restrict__ out0, ..."
  std::string names;  // ", out0, ..."
  std::string store;  // the kiln_store function
};
ResultStores resultStores(mlir::Operation *op, CudaKernel &k);

/// kiln.fused_qkv's matmul (C = x[S, k] . W[n, k]^T) and the CUDA its
/// templates share. `tasks`: the constants of a token's row and of the
/// cache (QW, KVW, DH, the RoPE table, the pool), kiln_qkv_task, which
/// stores one of the `taskCount` tasks of the row, and kiln_qkv_head;
/// `header`: the matmul's constants (K, N, VEC, NORM, EPS) and `tasks`.
/// The quantized GEMV takes `tasks` alone (it has a K, N, NORM and EPS of
/// its own).
struct QkvShape {
  int64_t k = 0, n = 0, taskCount = 0;
  std::string tasks, header;
};
llvm::Expected<QkvShape> qkvShape(mlir::Operation *op,
                                  const CodegenOptions &opts);

/// kiln.attention's heads and the CUDA both of its templates start with:
/// the RoPE table and the constants H, KVH, DH, GROUP, BLOCK_SIZE,
/// TABLE_BLOCKS, DPL, ROPE, INTERLEAVED and SCALE, the cache's storage
/// (kvCachePrelude); and the parameters both take first (q, the layer's
/// cache and a quantized one's scales, the tables, positions, count, out).
struct AttentionShape {
  int64_t heads = 0, kvHeads = 0, dh = 0;
  KVCacheType cache; // the cache the keys and values are read from
  std::string header;
  std::vector<KernelParam> params;
};
llvm::Expected<AttentionShape> attentionShape(mlir::Operation *op);

/// A matmul op (fused_linear, linear, logits): C = x[S, k] . W[n, k]^T and
/// what is fused around it; `tasks` output columns (n / 2 with SwiGLU).
struct LinearShape {
  int64_t n = 0, k = 0, tasks = 0;
  std::optional<double> eps; // the RMSNorm
  bool swiglu = false;
  mlir::Value residual;
};
llvm::Expected<LinearShape> linearShape(mlir::Operation *op);

/// A float literal that reads back as the same float.
std::string floatLiteral(double v);

/// RoPE as the kernels compute it (codegen/Rope.cpp): the table
/// `kiln_rope_turns[Dh/2][2]` (theta^(-2i/Dh) / (2 pi linear) as two
/// floats, `linear` a linear scaling's factor; one zero entry without
/// theta), `kiln_rope_sincos(pos, len, i, &s, &c)`, which reduces the angle
/// exactly, and `kiln_rope_rotated<DH, INTERLEAVED>(head, d, pos, len)`,
/// element d of a head's vector rotated; `len` is the row's sequence length
/// (`kiln_rope_length(pos, count)`), which only a `dynamic` scaling reads.
std::string ropePrelude(int64_t headDim, std::optional<double> theta,
                        std::optional<llvm::APFloat> linear = std::nullopt,
                        RopeDynamicAttr dynamic = {});

/// A C identifier from a kernel name: "decode.attn.norm_qkv_rope#2" ->
/// "kiln_decode_attn_norm_qkv_rope_2".
std::string entryName(llvm::StringRef kernel);

// One template per kernel-level op, each in its own file.
llvm::Expected<CudaKernel> emitEmbedding(mlir::Operation *op,
                                         const CodegenOptions &opts);
llvm::Expected<CudaKernel> emitGemv(mlir::Operation *op,
                                    const CodegenOptions &opts);
llvm::Expected<CudaKernel> emitQkvGemv(mlir::Operation *op,
                                       const CodegenOptions &opts);
/// With `batch`, the kernel of @prefill's attention for batched decode
/// (named with kBatchSuffix).
llvm::Expected<CudaKernel> emitDecodeAttention(mlir::Operation *op,
                                               const CodegenOptions &opts,
                                               bool batch = false);
/// Decode attention's tiling of a head of `dh` halves (a KV group of
/// `group` query heads): a lane loads `vec` halves of a key at a time (16
/// bytes at 8), `lanesPerKey` lanes cover the key's `chunks` loads
/// (`chunksPerLane` each), so a load of the warp covers `keysPerLoad` key
/// slots; `headSplits` of them load the same key for a share of the heads
/// each, and a tile of `unroll` loads keeps keysPerTile() keys in flight;
/// `warps` a block, at least `minBlocks` an SM (__launch_bounds__).
struct DecodeAttentionTiling {
  int vec = 8, chunks = 0, lanesPerKey = 0, chunksPerLane = 0;
  int keysPerLoad = 0, headSplits = 1, unroll = 0, warps = 0, minBlocks = 1;
  int keysPerTile() const { return keysPerLoad / headSplits * unroll; }
};
/// `elementBytes`: a cache element's (2, or 1 quantized: twice the keys a
/// tile for the same registers and bytes in flight).
DecodeAttentionTiling decodeAttentionTiling(int64_t dh, int64_t group,
                                            const CodegenOptions &opts,
                                            int64_t elementBytes = 2);
/// Decode attention's splits of a row with `keys` keys on a grid of
/// `gridSplits`: all of them with a fixed kv-splits, else at least a tile
/// a warp.
int64_t decodeAttentionSplits(const DecodeAttentionTiling &t,
                              int64_t gridSplits, int64_t keys, bool fixed);
/// gemm-algo for kiln's own GEMM (emitSmallGemm) in place of cuBLAS's.
constexpr int kSmallGemmAlgo = -2;
/// Its kernel is the epilogue op's kiln.kernel with this suffix; it has
/// this many warps (output columns) a block.
constexpr const char *kSmallGemmSuffix = ".gemm";
constexpr int kSmallGemmWarps = 4;
/// The GEMM of a prefill epilogue op's first two operands, C[S, N] f32 =
/// x[S, K] . W[N, K]^T into the workspace, for short prompts; for an op
/// whose epilogue the GEMM does (gemmWritesResult) the op's result itself.
/// With `lastRow`, of the step's last real row only (kLastRowSuffix).
llvm::Expected<CudaKernel> emitSmallGemm(mlir::Operation *op,
                                         const CodegenOptions &opts,
                                         bool lastRow = false);
/// The quantized GEMM before the epilogue of a matmul of a #kiln.quant
/// weight (hasQuantizedWeight), in `phase` (QuantGemmKernel.cpp): C[S, N]
/// f32 = x[S, K] . W^T into the workspace, named with this suffix; or
/// `fused`, decode's GEMV of the op with its epilogue (emitGemv's stand-in
/// for a quantized weight). With `lastRow` (decode's loop, unfused), of a
/// prompt's last real row only (kLastRowSuffix): a quantized LM head's
/// when sampling alone reads the logits.
constexpr const char *kQuantGemmSuffix = ".qgemm";
llvm::Expected<CudaKernel> emitQuantGemm(mlir::Operation *op,
                                         const CodegenOptions &opts,
                                         Phase phase, bool fused = false,
                                         bool lastRow = false);
/// The quantized GEMMs of `fn`'s epilogue ops of quantized weights.
llvm::Expected<std::vector<CudaKernel>>
emitQuantGemms(mlir::Operation *fn, const CodegenOptions &opts);
/// A matmul's quantized weight W[n, k] (operand 1) as its kernels read it:
/// its format and whether the buffer holds a folded norm weight. Fails,
/// naming `kernel`, for a dense or non-f16 weight or a shape the layout
/// cannot hold.
struct QuantizedWeight {
  QuantFormat format;
  int64_t n = 0, k = 0;
  bool norm = false;
};
llvm::Expected<QuantizedWeight> quantizedWeight(mlir::Operation *op,
                                                llvm::StringRef kernel);
/// The constants of `w`'s buffer every such kernel starts with: K, N,
/// TILES, GROUPS, GROUP, KIND (4 int4, 8 int8, 2 fp8), ZP, NORM, PERM,
/// MIDDLE, the sections' byte offsets SCALES, ZEROS, NORM_AT, PERM_AT, and
/// LOADS (16-byte loads a row of tiles) and STEPS (k-steps a load).
std::string quantBufferConstants(const QuantizedWeight &w);
/// What every kernel that reads a quantized buffer appends to
/// cudaPrelude(): a k-step's A fragment dequantized (kiln_dequant<KIND>),
/// a tile's zeros and scales for a group (codegen/QuantPrelude.cpp).
std::string quantPrelude();
/// The other way to a quantized matmul (quant-gemm=1): the weight
/// dequantized into Region::Dequantized as the f16 W[N, K] that the f16
/// path would hold (columns in W's order, a folded norm weight multiplied
/// in and rounded once), then cuBLAS's GEMM of it into the workspace, then
/// the epilogue (codegen/DequantizeWeightKernel.cpp). Its kernel is the
/// epilogue op's kiln.kernel with this suffix.
constexpr const char *kDequantizeSuffix = ".dequant";
/// How a plan multiplies its quantized weights in its GEMMs: the quantized
/// GEMM (quant-gemm=0), the weight dequantized to f16 for cuBLAS (1), or
/// an fp8 weight's FP8 GEMM (2; the other formats' dequantized).
enum class QuantGemm { Quantized, Dequantized, Fp8 };
/// A plan's choice `plan` for matmul `op` of a quantized weight: Fp8 only
/// for an fp8 weight (else Dequantized).
QuantGemm quantGemmOf(mlir::Operation *op, QuantGemm plan);
/// The plans of at least this many rows take it by default (quant-gemm=-1):
/// the cost model's crossover (docs/quantization.md).
constexpr int64_t kDequantizeRows = 128;
/// The dequantize kernel of a [n, k] buffer of `format` (with the norm
/// section when `norm`), named `kernel`, its grid for `smCount` SMs; with
/// `e4m3` (fp8 only) the codes [n, k] row-major and f32 row scales [n]
/// for the FP8 GEMM instead.
CudaKernel emitDequantizeWeight(const QuantFormat &format, int64_t n, int64_t k,
                                bool norm, const std::string &kernel,
                                int smCount = 132, bool e4m3 = false);
/// The dequantize kernel of matmul `op`'s quantized weight (`e4m3`: its
/// FP8 GEMM's, named with kFp8WeightSuffix).
llvm::Expected<CudaKernel> emitDequantizeWeight(mlir::Operation *op,
                                                const CodegenOptions &opts,
                                                bool e4m3 = false);
/// The third way, for fp8 weights on sm_89 and later (quant-gemm=2, W8A8):
/// the weight's codes written out row-major with f32 row scales (the
/// dequantize kernel's e4m3 form, this suffix), the activation quantized
/// to e4m3 per row (codegen/QuantizeActivationKernel.cpp, the other
/// suffix), cuBLASLt's FP8 GEMM with outer-vector scales into the
/// workspace (or + C), then the epilogue. It rounds the activations, so
/// it is never a default: a plan asks for it.
constexpr const char *kFp8WeightSuffix = ".fp8w";
constexpr const char *kQuantizeActivationSuffix = ".fp8a";
/// Where the FP8 GEMM's operands sit in Region::Dequantized (bytes, each
/// 16-aligned): W's codes [n, k] at 0, W's scales f32 [n], A's codes
/// [rows, k], A's scales f32 [rows]; `bytes` in all.
struct Fp8GemmLayout {
  int64_t wScales = 0, a = 0, aScales = 0, bytes = 0;
};
Fp8GemmLayout fp8GemmLayout(int64_t n, int64_t k, int64_t rows);
/// The activation quantizer of a [rows, k] input (times the norm weight
/// at byte `normAt` of the weight buffer when `norm`), named `kernel`.
CudaKernel emitQuantizeActivation(int64_t k, int64_t normAt, bool norm,
                                  const std::string &kernel);
/// The activation quantizer of matmul `op` (an fp8 weight).
llvm::Expected<CudaKernel> emitQuantizeActivation(mlir::Operation *op,
                                                  const CodegenOptions &opts);
/// One per distinct kernel of `fn`'s matmuls of quantized weights (and
/// the FP8 GEMM's two of each fp8 weight's).
llvm::Expected<std::vector<CudaKernel>>
emitDequantizeWeights(mlir::Operation *fn, const CodegenOptions &opts);
/// Whether a prefill matmul's epilogue is only what a GEMM does itself: no
/// RMSNorm scale, no SwiGLU, one result, D = x . W^T (+ the residual, of
/// D's type) rounded once. Its GEMM then writes the result (cuBLASLt with
/// beta 1 onto the residual) and no epilogue kernel runs. Never for a
/// quantized weight's, unless `dequantized` (cuBLAS then multiplies its
/// dequantized f16 copy).
bool gemmWritesResult(mlir::Operation *op, bool dequantized = false);
/// The LM head's kernels of a prefill step that samples without reading
/// its logits back: the last real row only, named with this suffix.
constexpr const char *kLastRowSuffix = ".last";
// Prefill: the epilogues of the cuBLAS GEMMs, and causal attention. An
// epilogue of `phase` decode (a quantized matmul's, one row) spreads the
// row's columns over blocks (grid axis 1); the others take a row a block.
llvm::Expected<CudaKernel> emitLinearEpilogue(mlir::Operation *op,
                                              const CodegenOptions &opts,
                                              bool lastRow = false,
                                              Phase phase = Phase::prefill);
llvm::Expected<CudaKernel> emitQkvEpilogue(mlir::Operation *op,
                                           const CodegenOptions &opts,
                                           Phase phase = Phase::prefill);
llvm::Expected<CudaKernel> emitPrefillAttention(mlir::Operation *op,
                                                const CodegenOptions &opts);
/// Prefill attention's tiling of a head of `dh` halves for a KV group of
/// `group` query heads: `warps` warps of `mtiles` x 16 query rows each
/// (prefill-attention-rows, or 32 up to head dim 128 and 16 past it; `rows`
/// a block), each row a (token, head) pair
/// of `tokens` tokens times
/// `groupHeads` heads of the group (`headSlices` blocks cover a group
/// larger than a block's rows); tiles of `keys` keys (prefill-attention-
/// keys, or 16 with 32 rows past head dim 64, else the largest of 64, 32, 16
/// that fits; 0: none fits), head dims
/// padded to `paddedDh` (16s); `sharedBytes` of static shared memory.
struct PrefillAttentionTiling {
  int warps = 0, mtiles = 0, rows = 0, keys = 0;
  int64_t paddedDh = 0, groupHeads = 0, headSlices = 0, tokens = 0;
  int64_t sharedBytes = 0;
};
/// `elementBytes`: 1 for a quantized cache, whose codes are staged in
/// shared memory too.
PrefillAttentionTiling prefillAttentionTiling(int64_t dh, int64_t group,
                                              const CodegenOptions &opts,
                                              int64_t elementBytes = 2);

/// The batched decode plans run @prefill's attention with the decode
/// template (a row per sequence): that kernel is the op's kiln.kernel with
/// this suffix.
constexpr const char *kBatchSuffix = ".batch";

/// Sampling from the `vocab` logits of the step's last row: greedy, or
/// temperature, top-k and top-p with a seed (runtime/Sampling.h).
CudaKernel emitSampler(int64_t vocab);

/// Template `t`'s kernel for `op` in `phase` (the emitter of each template's
/// file); fails for `none`, naming the op and the phase.
llvm::Expected<CudaKernel> emitTemplate(KernelTemplate t, mlir::Operation *op,
                                        const CodegenOptions &opts,
                                        Phase phase);

/// Every distinct kernel of `fn` (one per kiln.kernel), in order of first
/// use, each op by its template in the function's kiln.phase. Fails, naming
/// the op, for an op without one (a tensor-level op: unfused).
llvm::Expected<std::vector<CudaKernel>>
emitCudaKernels(mlir::Operation *fn, const CodegenOptions &opts);

/// Whether `op` runs a kernel of its own in a batched decode step (its
/// batch_decode template differs from its prefill one: attention, a row
/// per sequence); the other ops of @prefill run their prefill kernels.
bool hasBatchKernel(KernelOpInterface op);

/// The batched decode plans' own kernels (hasBatchKernel) of @prefill's
/// ops, one per distinct kernel, named with kBatchSuffix.
llvm::Expected<std::vector<CudaKernel>>
emitBatchKernels(mlir::Operation *prefill, const CodegenOptions &opts);

/// kiln's own GEMM (emitSmallGemm) of each distinct matmul of `fn` that
/// runs after a GEMM in its phase (but a quantized weight's): @prefill's,
/// for plans with gemm-algo=-2; @decode's (a fused_qkv into a quantized
/// cache), always.
llvm::Expected<std::vector<CudaKernel>>
emitSmallGemms(mlir::Operation *fn, const CodegenOptions &opts);

} // namespace kiln

#endif // KILN_CODEGEN_CUDAKERNEL_H

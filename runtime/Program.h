//===- Program.h - what a device runs: kernels, buffers, launches -*- C++
//-*-===//
//
// The compiler's output as the runtime sees it, with no MLIR: the kernels'
// code, the weight manifest, the memory plan (arena, KV pool), the launches
// of the decode step, of prefill (one plan per sequence-length bucket) and
// of batched decode (one plan per batch-size bucket) with every argument
// bound to a buffer. The bundle (kiln compile -o
// model.kiln) is this, written down.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_PROGRAM_H
#define KILN_RUNTIME_PROGRAM_H

#include "runtime/QuantFormat.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

/// Where an argument points.
enum class Region {
  Arena,       // activations, at an offset in bytes
  Weight,      // the weight buffer named by `weight`
  Pool,        // the KV pool, at an offset in bytes
  Tokens,      // int32 [rows]: token ids of the step
  Positions,   // int32 [rows]: positions of the step
  BlockTable,  // int32 [sequences, tableBlocks]: every sequence's blocks
  Workspace,   // float scratch: split-KV partials, a GEMM's output
  Counters,    // uint32 counters, zero between launches
  Sampled,     // int32 [rows]: the tokens the step's sampling kernel chose
  Count,       // int32 [2]: the step's real row count (a bucket pads it),
               // a prefill's sequence length after it (0 in decode)
  Sampling,    // SamplingParams [sequences]: how each sequence samples
  History,     // int32 [sequences, vocab]: how often each sequence has seen
               // each token
  LogitBias,   // f32 [sequences, vocab]: each sequence's logit bias (the
               // host's, sent when it changes)
  RowSequence, // int32 [rows]: the sequence (slot) of each row: a prefill's
               // rows are all one sequence, a batch's one row each
  Dequantized, // f16 [n, k]: a quantized weight dequantized for the cuBLAS
               // GEMM after it; for the FP8 GEMM its e4m3 codes and scales
               // and the activation's (Program::dequantizedHalves), at an
               // offset in bytes
};

struct Argument {
  Region region;
  int64_t offset;     // bytes, for Arena and Pool
  std::string weight; // for Weight

  Argument(Region region, int64_t offset = 0, std::string weight = "")
      : region(region), offset(offset), weight(std::move(weight)) {}
};

struct KernelCode {
  std::string name;       // kiln.kernel
  std::string entry;      // the extern "C" function
  std::string source;     // CUDA C++
  std::string provenance; // kiln.name of its first op: where it comes from
  int params = 0;         // how many arguments every launch passes
  /// Dynamic shared memory every launch passes (bytes a block): a buffer
  /// past the 48 KiB of static shared memory a block may declare.
  int64_t dynamicSharedBytes = 0;
};

/// The most shared memory, static and dynamic, a block may opt into on
/// `target` (the CUDA C++ Programming Guide's table of technical
/// specifications per compute capability); 48 KiB, what every GPU allows
/// without opting in, for a target not in it.
inline int64_t maxSharedPerBlock(std::string_view target) {
  if (target == "sm_90" || target == "sm_100")
    return 227 * 1024;
  if (target == "sm_80" || target == "sm_87")
    return 163 * 1024;
  if (target == "sm_86" || target == "sm_89" || target == "sm_120")
    return 99 * 1024;
  if (target == "sm_70")
    return 96 * 1024;
  if (target == "sm_75")
    return 64 * 1024;
  return 48 * 1024;
}

/// Why kernel `k`, with `staticBytes` of static shared memory, does not
/// run on `target`, whose blocks hold at most `most` bytes.
inline std::string sharedMemoryFault(const KernelCode &k, int64_t staticBytes,
                                     std::string_view target, int64_t most) {
  return "kernel " + k.name + " needs " +
         std::to_string(staticBytes + k.dynamicSharedBytes) +
         " bytes of shared memory a block (" + std::to_string(staticBytes) +
         " static, " + std::to_string(k.dynamicSharedBytes) + " dynamic), " +
         std::string(target) + " allows " + std::to_string(most) +
         ": its rows are too long for one GPU of it; split them over GPUs "
         "(--tp)";
}

/// Which rows of its plan a GEMM multiplies (GemmShape::rows).
enum class GemmRows {
  All,   // the plan's m rows (batch plans: a CUDA graph fixes m)
  Count, // the step's real rows: m = count (prefill plans)
  Last,  // the step's last real row only: m = 1, A, D and C moved down
         // count - 1 rows (the LM head when no prefill logits are asked for)
};

/// A matmul the runtime hands to cuBLAS (or cuBLASLt), row-major and dense:
/// D[m, n] = A[m, k] f16 . W[n, k]^T f16 (+ C[m, n] when beta is 1; W a
/// weight buffer, or Region::Dequantized after a dequantize kernel), products
/// and sums in fp32 (CUBLAS_COMPUTE_32F), beta . C added in fp32 and the sum
/// rounded once to D's type. Its args are A, W, D, then C when beta is 1.
/// runtime/BlasMatmul.h turns it into cuBLAS's column-major call, which the
/// cuda device makes and the emu device's stand-in runs.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  /// -1: cublasGemmEx with cuBLAS's own choice (cuBLASLt's first when D is
  /// not C: cublasGemmEx writes C); N >= 0: cublasLtMatmul with the N-th
  /// algorithm cuBLASLt's heuristic ranks for this shape (the last one it
  /// offers when it offers fewer). kiln tune's prefill.gemm family.
  int algo = -1;
  GemmRows rows = GemmRows::All;
  /// 0, or 1: D = A . W^T + C, the residual stream accumulated by the GEMM.
  int beta = 0;
  /// D's (and C's) element type: f32 (the workspace, for an epilogue
  /// kernel) or f16 (an activation in the arena: no epilogue kernel).
  bool f16Out = false;
  /// cuBLASLt's FP8 GEMM (quant-gemm=2): A [m, k] and W [n, k] are e4m3
  /// codes in Region::Dequantized, each with an f32 scale a row (two more
  /// args after C: A's [m], then W's [n]), D[i, j] = sA[i] sW[j] sum_p
  /// A[i, p] W[j, p] (+ C), cuBLAS's outer-vector scaling.
  bool fp8 = false;

  /// The rows this GEMM multiplies in a step of `count` real rows, and the
  /// first of them.
  int64_t rowsFor(int64_t count) const {
    return rows == GemmRows::All ? m : rows == GemmRows::Count ? count : 1;
  }
  int64_t firstRowFor(int64_t count) const {
    return rows == GemmRows::Last ? count - 1 : 0;
  }
};

/// The largest GemmShape::algo (the heuristic is asked for this many + 1).
constexpr int kMaxGemmAlgo = 7;

/// Launch::kernel of a cuBLAS GEMM; its args are A, W, D and C (beta 1),
/// then the FP8 GEMM's scales (A's, W's).
constexpr int kGemm = -1;
/// Launch::kernel of tensor parallelism's collectives (a split module's
/// plans only: docs/tensor-parallel.md). All-reduce: args input, then
/// result, with a residual between them when there is one, each [rows,
/// collectiveCols] f16 in the arena. All-gather: input [rows,
/// collectiveCols] f32, result [rows, ranks * collectiveCols].
constexpr int kAllReduce = -2;
constexpr int kAllGather = -3;
/// Whether a launch runs one of the Program's kernels (not cuBLAS, not a
/// collective).
inline bool runsKernel(int kernel) { return kernel >= 0; }

/// When a launch of a prefill plan runs: always, or only when the step's
/// logits are read back (every row's LM head), or only when they are not
/// (the last row's: sampling reads nothing else).
enum class LaunchWhen { Always, EveryLogit, LastLogit };

struct Launch {
  int kernel;       // index into Program::kernels, or kGemm
  std::string name; // kiln.name: the op's provenance
  std::array<int64_t, 3> grid;
  int64_t blockThreads;
  std::vector<Argument> args;
  GemmShape gemm = {}; // when kernel == kGemm
  LaunchWhen when = LaunchWhen::Always;
  int64_t collectiveCols = 0; // when kernel is kAllReduce or kAllGather
};

/// A step of up to `rows` rows: a prefill of that many tokens of one
/// sequence, or a decode of one token each of that many sequences. The
/// launches are sized for exactly that many rows; a shorter step is padded,
/// and the kernels skip the rows at and past Region::Count.
struct StepPlan {
  int64_t rows = 0;
  std::vector<Launch> launches; // ending with its sampling
};

/// A checkpoint tensor a weight buffer is built from: with tensor
/// parallelism (#kiln.shard), the slice a rank holds of it, cut into
/// `shardParts` parts along `shardAxis` (rank r of R reads part
/// r * shardParts / R), `shape` the slice's.
struct WeightSource {
  std::string name;
  std::vector<int64_t> shape;
  int64_t shardAxis = 0, shardParts = 1;

  /// The checkpoint tensor's shape: the slice's, whole again.
  std::vector<int64_t> checkpointShape() const {
    std::vector<int64_t> s = shape;
    if (shardParts > 1)
      s[shardAxis] *= shardParts;
    return s;
  }
};

/// One weight buffer: the `sources` (each [rows, cols], or [cols]) stacked
/// row after row, the columns scaled by the [cols] tensor `scaledBy` when
/// set (a folded RMSNorm weight), stored as f16; or with `quant`, the
/// stacked rows quantized to that format and `scaledBy` kept beside them
/// (runtime/QuantLayout.h).
struct WeightBuffer {
  std::string name;
  std::vector<WeightSource> sources;
  int64_t cols = 0;
  std::string scaledBy;
  std::optional<QuantFormat> quant = {};
};

/// Which of a Program's plans a launch list is: the same plan in another
/// copy of the Program (a rank's), or over a connection (RemoteRank).
struct PlanRef {
  enum Kind : int32_t { Decode, Prefill, Batch } kind = Decode;
  int32_t index = 0; // of prefill or batches
};

struct Program {
  std::vector<KernelCode> kernels;
  std::vector<WeightBuffer> weights;
  int64_t vocab = 0, maxPositions = 0;
  int64_t arenaBytes = 0;
  int64_t poolBytes = 0, poolBlocks = 0, blockSize = 0;
  /// The KV cache's storage: f16 (bf16, f32), or fp8 / int8 codes with an
  /// f16 scale a head of each slot (runtime/KVCacheQuant.h).
  std::string kvDtype = "f16";
  int64_t sequences = 1; // slots: sequences that run at once
  /// Ranks of a split model (kiln.tensor_parallel): each runs this Program
  /// on its slices of the weights (WeightSource's shard); 1: not split.
  int64_t ranks = 1;
  int64_t tableBlocks = 0; // blocks in a sequence's table row
  int64_t workspaceFloats = 0, counters = 0;
  /// Region::Dequantized's size: the largest quantized weight a plan
  /// dequantizes for cuBLAS, or the FP8 GEMM's operands (0: none does).
  int64_t dequantizedHalves = 0;
  std::vector<Launch> decode;    // one new token, ending with its sampling
  int64_t decodeLogits = 0;      // arena offset of the [1, V] f32 logits
  std::vector<StepPlan> prefill; // by ascending rows; never empty
  int64_t prefillLogits = 0;     // arena offset of the [S, V] f32 logits
  /// Decode steps of 2 to `sequences` sequences, by ascending rows; their
  /// logits are at prefillLogits too ([B, V] f32).
  std::vector<StepPlan> batches;

  /// The smallest plan of `plans` that holds `rows`, else the largest: a
  /// longer prompt runs in chunks of it.
  static const StepPlan &planFor(const std::vector<StepPlan> &plans,
                                 int64_t rows) {
    for (const StepPlan &plan : plans)
      if (plan.rows >= rows)
        return plan;
    return plans.back();
  }
  const StepPlan &prefillFor(int64_t tokens) const {
    return planFor(prefill, tokens);
  }
  /// Which plan `launches` is (one of this Program's own lists).
  std::optional<PlanRef> refOf(const std::vector<Launch> &launches) const {
    if (&launches == &decode)
      return PlanRef{PlanRef::Decode, 0};
    for (size_t i = 0; i < prefill.size(); ++i)
      if (&launches == &prefill[i].launches)
        return PlanRef{PlanRef::Prefill, int32_t(i)};
    for (size_t i = 0; i < batches.size(); ++i)
      if (&launches == &batches[i].launches)
        return PlanRef{PlanRef::Batch, int32_t(i)};
    return std::nullopt;
  }
  /// The plan `ref` names; null when this Program has no such plan.
  const std::vector<Launch> *plan(PlanRef ref) const {
    const auto &plans = ref.kind == PlanRef::Prefill ? prefill : batches;
    if (ref.kind == PlanRef::Decode)
      return &decode;
    if (ref.index < 0 || size_t(ref.index) >= plans.size())
      return nullptr;
    return &plans[ref.index].launches;
  }
  /// Whether a plan runs cuBLASLt's FP8 GEMM (GemmShape::fp8): sm_89 on.
  bool usesFp8Gemm() const {
    for (const auto *plans : {&prefill, &batches})
      for (const StepPlan &plan : *plans)
        for (const Launch &l : plan.launches)
          if (l.kernel == kGemm && l.gemm.fp8)
            return true;
    return false;
  }
};

} // namespace kiln

#endif // KILN_RUNTIME_PROGRAM_H

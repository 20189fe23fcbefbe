//===- QkvEpilogueKernel.cpp - prefill kiln.fused_qkv after cuBLAS --------===//
//
// Prefill's QKV matmul is a cuBLAS GEMM of x and the packed [q | k | v]
// weight into the f32 workspace; this kernel, one block per token row,
// scales the row by its RMSNorm factor (the norm weight is folded into W),
// stores q, rotates k by the token's position and writes k and v into the
// token's slot of the paged pool: the same tasks as decode's kernel
// (kiln_qkv_task), reading the matmul from memory instead of computing it.
// A quantized cache's heads are a warp's each (kiln_qkv_head: the head's
// largest magnitude sets its scale). Rows at and past the real token count
// (a bucket's padding) are skipped. Decode runs it too when the cache is
// quantized, or the weight is and its head dim is not a multiple of 32
// (decodesAsPrefill): the GEMM first, then this.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

using namespace mlir;

namespace kiln {

llvm::Expected<CudaKernel>
emitQkvEpilogue(Operation *op, const CodegenOptions &opts, Phase phase) {
  auto shape = qkvShape(op, opts);
  if (!shape)
    return shape.takeError();
  int threads = opts.epilogueThreads;
  auto cache = cast<KVCacheType>(cast<FusedQKVOp>(op).getCache().getType());
  bool quant = cache.isQuantized();
  if (quant && threads % 32)
    return llvm::createStringError(
        "a quantized cache's heads take a warp each: epilogue-threads=" +
        std::to_string(threads) + " is not a multiple of 32");

  CudaKernel k = kernelFor(op, opts.kernelSuffix);
  k.afterGemm = true;
  k.params = {{ParamKind::Activation, "x", "const __half *"},
              {ParamKind::Workspace, "c", "const float *"}};
  llvm::append_range(k.params, kvCacheParams(cache, /*readOnly=*/false));
  k.params.insert(k.params.end(),
                  {{ParamKind::BlockTable, "block_table", "const int *"},
                   {ParamKind::RowSequence, "seqs", "const int *"},
                   {ParamKind::Positions, "positions", "const int *"},
                   {ParamKind::Count, "count", "const int *"},
                   {ParamKind::Activation, "q", "__half *"}});
  // One row (decode): its tasks over blocks, one each a thread (a
  // quantized cache: q's columns a thread each, the heads a warp each).
  int64_t work = quant ? std::max<int64_t>(shape->n - 2 * cache.getSlotWidth(),
                                           2 * cache.getKvHeads() * 32)
                       : shape->taskCount;
  int64_t colBlocks =
      phase == Phase::decode ? (work + threads - 1) / threads : 1;
  k.grid = {1, colBlocks, 1};
  k.rowAxis = 0;
  k.blockThreads = threads;
  k.source = cudaPrelude() + shape->header +
             "constexpr int THREADS = " + std::to_string(threads) +
             ", COL_BLOCKS = " + std::to_string(colBlocks) + ";\n" +
             R"cuda(
// x [S, K] f16 (the GEMM's input), c [S, N] f32 (its output), k_cache/v_cache:
// this layer's keys and values in the pool, slot-major [slot, KVW] f16 (or
// codes, with k_scales/v_scales [slot, KV_HEADS] f16); block_table
// [sequences, TABLE_BLOCKS] i32, seqs [S] i32 (each row's sequence),
// positions [S] i32, count [2] i32 (rows, a prefill's sequence length),
// q [S, QW] f16.
// grid (S, COL_BLOCKS), block (THREADS): a block per token (and slice of
// its tasks), a thread per task
extern "C" __global__ void __launch_bounds__(THREADS) )cuda" +
             k.entry + "(" + kernelParameters(k) + R"cuda() {
  kiln_launch_dependents();
  const long long row = blockIdx.x;
  const bool real = row < count[0];
  // The token's slot (from the host's inputs) is read before the wait for
  // the previous kernel; x, c and the pool after it.
  int pos = 0;
  long long slot = 0; // the token's slot in the pool
  if (real) {
    pos = positions[row];
    const int *table = block_table + (long long)seqs[row] * TABLE_BLOCKS;
    slot = kiln_slot(table, pos, BLOCK_SIZE);
  }
  kiln_wait_previous_grid();
  if (!real)
    return; // padding: the whole block leaves together
  const float scale = kiln_prologue_scale<K, VEC, NORM>(x + row * K, EPS);
  const float *c_row = c + row * N;
  const int len = kiln_rope_length(pos, count);
  auto value = [&](int col) { return scale * c_row[col]; };
  const int first = blockIdx.y * THREADS + threadIdx.x;
  for (int task = first; task < (KV_QUANT ? QW : TASKS);
       task += THREADS * COL_BLOCKS)
    kiln_qkv_task(task, pos, len, slot * KVW, value, true, q + row * QW,
                  k_cache, v_cache);
  if constexpr (KV_QUANT)
    for (int h = first / 32; h < 2 * KV_HEADS; h += THREADS * COL_BLOCKS / 32)
      kiln_qkv_head(h, pos, len, slot, value, k_cache, v_cache, )cuda" +
             kvScaleArguments(cache) + R"cuda();
}
)cuda";
  return k;
}

} // namespace kiln

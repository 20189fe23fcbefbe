//===- EmbeddingKernel.cpp - kiln.embedding, decode and prefill -----------===//
//
// out[s, :] = table[tokens[s], :]: each thread copies VEC halves of a row
// in one (up to 16-byte) streaming load and a store; the load before the
// wait for the previous kernel (PDL), the store after it.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"
#include "ir/KilnOps.h"

using namespace mlir;

namespace kiln {

llvm::Expected<CudaKernel> emitEmbedding(Operation *op,
                                         const CodegenOptions &opts) {
  auto emb = cast<EmbeddingOp>(op);
  auto out = cast<RankedTensorType>(emb.getResult().getType());
  if (llvm::Error e = requireF16(out.getElementType()))
    return std::move(e);
  int64_t s = out.getDimSize(0), d = out.getDimSize(1);
  int vec = vectorWidth(d, opts.maxVectorWidth);
  int threads = opts.elementwiseThreads;

  CudaKernel k = kernelFor(op, opts.kernelSuffix);
  k.params = {{ParamKind::Tokens, "tokens", "const int *"},
              {ParamKind::Weight, "table", "const __half *"},
              {ParamKind::Activation, "out", "__half *"}};
  k.grid = {(d / vec + threads - 1) / threads, s, 1};
  k.blockThreads = threads;
  if (ShapedType::isDynamic(s)) { // prefill: a row of blocks per token
    k.rowAxis = 1;
    k.grid[1] = 1;
  }
  k.source = cudaPrelude() + "\n// kernel " + k.kernel + ": embedding, " +
             std::to_string(d) + " features\n" +
             "constexpr int D = " + std::to_string(d) +
             ", VEC = " + std::to_string(vec) + ";\n" + R"cuda(
// tokens [S] i32, table [V, D] f16, out [S, D] f16; grid (D/VEC/threads, S)
extern "C" __global__ void )cuda" +
             k.entry + "(" + kernelParameters(k) + R"cuda() {
  kiln_launch_dependents();
  const int s = blockIdx.y;
  const int d = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  using Raw = kiln_chunk<VEC>::type;
  // The token (the host's input) and its row of the table (a weight, read
  // once: streamed past L1 and first out of L2, and volatile, so ptxas
  // keeps it before the wait) are read before the wait for the previous
  // kernel; out is written after it.
  Raw c = {};
  if (d < D)
    c = kiln_stream_load(
        reinterpret_cast<const Raw *>(table + (long long)tokens[s] * D + d));
  kiln_wait_previous_grid();
  if (d >= D)
    return;
  *reinterpret_cast<Raw *>(out + (long long)s * D + d) = c;
}
)cuda";
  return k;
}

} // namespace kiln

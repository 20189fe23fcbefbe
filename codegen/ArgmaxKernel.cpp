//===- ArgmaxKernel.cpp - greedy sampling on the device -------------------===//
//
// The index of the largest logit of the step's last row (row count - 1),
// the first one on ties (as the host's argmax), written where the next step
// reads its token. Decode and every prefill bucket share it: one block, each
// thread scanning a stride of the vocabulary, then a tree reduction in
// shared memory. NaN logits never win.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"

namespace kiln {

CudaKernel emitArgmax(int64_t vocab) {
  constexpr int threads = 256;
  CudaKernel k;
  k.kernel = "sampling.argmax";
  k.provenance = "sampling";
  k.entry = entryName(k.kernel);
  k.params = {{ParamKind::Activation, "logits"},
              {ParamKind::Count, "count"},
              {ParamKind::Tokens, "token"}};
  k.grid = {1, 1, 1};
  k.blockThreads = threads;
  k.source = cudaPrelude() + "\n// kernel " + k.kernel +
             ": greedy sampling over " + std::to_string(vocab) +
             " logits\nconstexpr int V = " + std::to_string(vocab) +
             ", THREADS = " + std::to_string(threads) + ";\n" + R"cuda(
// logits [count, V] f32, count [1] i32 -> token [1] i32; grid (1),
// block (THREADS)
extern "C" __global__ void __launch_bounds__(THREADS) )cuda" +
             k.entry + R"cuda((const float *__restrict__ all_logits,
                                          const int *__restrict__ count,
                                          int *__restrict__ token) {
  const float *logits = all_logits + (long long)(count[0] - 1) * V;
  __shared__ float best_value[THREADS];
  __shared__ int best_index[THREADS];
  const int t = threadIdx.x;
  float v = KILN_NEG_INF;
  int i = V; // none yet
  for (int j = t; j < V; j += THREADS)
    if (logits[j] > v || (i == V && logits[j] == v)) {
      v = logits[j];
      i = j;
    }
  best_value[t] = v;
  best_index[t] = i;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if (t < s) {
      const float ov = best_value[t + s];
      const int oi = best_index[t + s];
      if (ov > best_value[t] || (ov == best_value[t] && oi < best_index[t])) {
        best_value[t] = ov;
        best_index[t] = oi;
      }
    }
    __syncthreads();
  }
  if (t == 0)
    token[0] = best_index[0] == V ? 0 : best_index[0];
}
)cuda";
  return k;
}

} // namespace kiln

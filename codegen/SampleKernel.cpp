//===- SampleKernel.cpp - sampling on the device --------------------------===//
//
// The last launch of every step: the next token of each sequence the step
// ran. A prefill (grid 1) samples from the logits of its last row (row
// count - 1); a batched decode (grid rows) samples every row, block b row b.
// Each sequence has its own parameters and history (by seqs[row]). The rule
// (runtime/Sampling.h has the same on the host):
//
// - the sequence's logit bias first (its row of Region::LogitBias, when
//   `biased`), then the penalties, on the tokens this sequence has seen
//   (the history the kernel keeps: repetition, presence and frequency);
// - the temperature of this step: constant, or a linear schedule from
//   `temperature` at step 0 to `temperature_end` at step schedule_steps - 1;
// - greedy (temperature <= 0, or top_k == 1): the first index of the
//   largest logit, as the host's argmax; NaN never wins;
// - otherwise p_i = exp((l_i - max) / temperature) over the candidates: the
//   top_k largest logits (all when top_k <= 0; ties at the edge included),
//   then of those the fewest largest whose mass reaches top_p of theirs
//   (top_p >= 1: all), then of those the ones at least min_p times as
//   likely as the likeliest (transformers' order), and the token is where
//   u * (their mass) falls in index order, u uniform in [0, 1) from a hash
//   of (seed, step).
//
// One pass over the row applies the bias and penalties, keeps the largest
// key and (unless greedy) stores the logits, its loads in batches issued
// before their first use. Thresholds are found exactly, without sorting, by a
// descent over the 32 bits of an order-preserving key of the logits: each bit
// is one block-wide count (top-k) or mass (top-p). Every sum runs in a fixed
// order, so a seed gives the same tokens on every run. It waits for the
// previous kernel (PDL) first: all it reads but the host's inputs is earlier
// kernels'.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"

namespace kiln {

CudaKernel emitSampler(int64_t vocab) {
  constexpr int threads = 512;
  CudaKernel k;
  k.kernel = "sampling.sample";
  k.provenance = "sampling";
  k.entry = entryName(k.kernel);
  k.params = {{ParamKind::Activation, "all_logits", "const float *"},
              {ParamKind::Count, "count", "const int *"},
              {ParamKind::Sampling, "params", "const KilnSampling *"},
              {ParamKind::Tokens, "tokens", "const int *"},
              {ParamKind::RowSequence, "seqs", "const int *"},
              {ParamKind::History, "history", "int *"},
              {ParamKind::LogitBias, "bias", "const float *"},
              {ParamKind::Workspace, "work", "float *"},
              {ParamKind::Tokens, "all_tokens", "int *"}};
  k.grid = {1, 1, 1};
  k.blockThreads = threads;
  k.workspacePerBlock = 2 * vocab;
  k.source = cudaPrelude() + "\n// kernel " + k.kernel + ": sampling from " +
             std::to_string(vocab) +
             " logits\nconstexpr int V = " + std::to_string(vocab) +
             ", THREADS = " + std::to_string(threads) +
             ", CHUNK = (V + THREADS - 1) / THREADS;\n" + R"cuda(
constexpr int SWEEP = 16; // the logits a thread loads at once
// What the runtime asks for; the layout of runtime/Sampling.h's
// SamplingParams.
struct KilnSampling {
  float temperature, top_p;
  int top_k;
  unsigned seed, step;
  float repetition_penalty, presence_penalty, frequency_penalty;
  float min_p, temperature_end;
  unsigned schedule_steps, biased;
};

// The temperature of this step (SamplingParams::temperatureAt: the same
// fmaf, so host and device agree to the bit).
__device__ __forceinline__ float kiln_temperature(const KilnSampling &s) {
  if (s.schedule_steps == 0u || s.step == 0u)
    return s.temperature;
  if (s.step >= s.schedule_steps - 1u)
    return s.temperature_end;
  return fmaf(s.temperature_end - s.temperature,
              (float)s.step / (float)(s.schedule_steps - 1u), s.temperature);
}

// Larger float, larger key; NaN is the smallest.
__device__ __forceinline__ unsigned kiln_key(float x) {
  const unsigned u = __float_as_uint(x);
  if (x != x)
    return 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ unsigned kiln_hash(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// logits [rows, V] f32, count [1] i32, params [sequences], tokens [rows]
// i32 (the step's input tokens), seqs [rows] i32, history [sequences, V]
// i32 (how often each sequence has seen each token), bias [sequences, V]
// f32 (each sequence's logit bias), scratch [grid, 2, V]
// f32, token [grid] i32 (the tokens chosen); grid (1) for a prefill, (rows)
// for a batch; block (THREADS)
// One block a row: the registers are not held to two blocks an SM.
extern "C" __global__ void __launch_bounds__(THREADS, 1) )cuda" +
             k.entry + "(" + kernelParameters(k) + R"cuda() {
  __shared__ unsigned long long best[THREADS / 32]; // [warps]
  __shared__ float scratch[32], chunk_mass[THREADS];
  kiln_launch_dependents();
  const int b = blockIdx.x, n = count[0];
  kiln_wait_previous_grid(); // the logits and the history are earlier kernels'
  if (b >= n)
    return; // a padding row of a batch
  // A prefill's tokens are rows 0 .. n-1 and it samples the last; a
  // batch's row b is a token of its own.
  const bool prefill = gridDim.x == 1;
  const int at = prefill ? n - 1 : b, first = prefill ? 0 : b;
  const float *row = all_logits + (long long)at * V;
  float *logits = work + (long long)b * 2 * V, *probs = logits + V;
  int *const token = all_tokens + b;
  const int t = threadIdx.x;
  const KilnSampling s = params[seqs[at]];
  history += (long long)seqs[at] * V;
  bias += (long long)seqs[at] * V;

  // The step's tokens are seen now (a sampled token counts once it is fed
  // back), then the penalties: repetition (CTRL's: divide a positive logit,
  // multiply a negative one), presence and frequency (subtracted). At their
  // defaults (1, 0, 0) they leave every logit as it is, and the history is
  // not read. The same pass keeps the first index of the largest key,
  // (key, V - 1 - index) maximized, and stores the logits for the draw
  // (greedy needs nothing but the index).
  for (int j = first + t; j <= at; j += THREADS)
    atomicAdd(&history[tokens[j]], 1);
  __syncthreads();
  const float temperature = kiln_temperature(s);
  const bool greedy = !(temperature > 0.0f) || s.top_k == 1;
  const bool penalized = s.repetition_penalty != 1.0f ||
                         s.presence_penalty != 0.0f ||
                         s.frequency_penalty != 0.0f;
  // In batches of SWEEP elements a thread whose loads are all issued
  // before the first is used: one round trip a batch, where a loop that
  // stores each logit before loading the next pays one an element (the
  // compiler cannot move a load past a store that may alias it: 63 round
  // trips, 42 us a step on an H200). Indices past V load V - 1's.
  unsigned long long mine = 0;
  for (int base = t; base < V; base += SWEEP * THREADS) {
    float l[SWEEP], b[SWEEP];
    int seen[SWEEP];
#pragma unroll
    for (int u = 0; u < SWEEP; ++u) {
      const int i = min(base + u * THREADS, V - 1);
      l[u] = row[i];
      b[u] = s.biased ? bias[i] : 0.0f;
      seen[u] = penalized ? history[i] : 0;
    }
#pragma unroll
    for (int u = 0; u < SWEEP; ++u) {
      const int i = base + u * THREADS;
      if (i >= V)
        break;
      float v = s.biased ? l[u] + b[u] : l[u];
      if (seen[u] > 0) {
        v = v > 0.0f ? v / s.repetition_penalty : v * s.repetition_penalty;
        v -= s.presence_penalty + s.frequency_penalty * (float)seen[u];
      }
      if (!greedy)
        logits[i] = v;
      const unsigned long long k =
          ((unsigned long long)kiln_key(v) << 32) | (unsigned)(V - 1 - i);
      mine = k > mine ? k : mine;
    }
  }
  // The block's largest: across each warp by shuffles, then the warps'.
  for (int d = 16; d > 0; d >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, mine, d);
    mine = other > mine ? other : mine;
  }
  if ((t & 31) == 0)
    best[t >> 5] = mine;
  __syncthreads(); // best, and (for the draw) every logit stored
  for (int w = 0; w < THREADS / 32; ++w)
    mine = best[w] > mine ? best[w] : mine;
  const int top = V - 1 - (int)(mine & 0xffffffffu);
  if (greedy) {
    if (t == 0)
      token[0] = top;
    return;
  }
  const float max_logit = logits[top], inv_t = 1.0f / temperature;

  // top-k: the largest key that at least top_k logits reach.
  unsigned kthr = 0;
  if (s.top_k > 1 && s.top_k < V)
    for (int bit = 31; bit >= 0; --bit) {
      const unsigned cand = kthr | (1u << bit);
      float n = 0.0f;
      for (int i = t; i < V; i += THREADS)
        n += kiln_key(logits[i]) >= cand ? 1.0f : 0.0f;
      if (kiln_block_sum(n, scratch) >= (float)s.top_k)
        kthr = cand;
    }
  for (int i = t; i < V; i += THREADS)
    probs[i] = kiln_key(logits[i]) >= kthr
                   ? expf((logits[i] - max_logit) * inv_t)
                   : 0.0f;
  __syncthreads();

  // top-p: the largest key whose candidates' mass reaches top_p of theirs.
  unsigned thr = kthr;
  if (s.top_p < 1.0f) {
    float z = 0.0f;
    for (int i = t; i < V; i += THREADS)
      z += probs[i];
    const float target = s.top_p * kiln_block_sum(z, scratch);
    unsigned pthr = 0;
    for (int bit = 31; bit >= 0; --bit) {
      const unsigned cand = pthr | (1u << bit);
      float m = 0.0f;
      for (int i = t; i < V; i += THREADS)
        m += kiln_key(logits[i]) >= cand ? probs[i] : 0.0f;
      m = kiln_block_sum(m, scratch);
      if (m > 0.0f && m >= target)
        pthr = cand;
    }
    thr = max(thr, pthr);
  }

  // min-p: the likeliest candidate's weight is 1, so the cut is the weight
  // itself; dropped weights become 0.
  if (s.min_p > 0.0f) {
    for (int i = t; i < V; i += THREADS)
      if (probs[i] < s.min_p)
        probs[i] = 0.0f;
    __syncthreads();
  }

  // Where u * mass falls, in index order: chunk masses, then one chunk.
  const int begin = t * CHUNK, end = min(V, begin + CHUNK);
  float mass = 0.0f;
  for (int i = begin; i < end; ++i)
    mass += kiln_key(logits[i]) >= thr ? probs[i] : 0.0f;
  chunk_mass[t] = mass;
  __syncthreads();
  if (t != 0)
    return;
  float total = 0.0f;
  for (int c = 0; c < THREADS; ++c)
    total += chunk_mass[c];
  const float u = (kiln_hash(s.seed ^ kiln_hash(s.step)) >> 8) *
                  (1.0f / 16777216.0f);
  float r = u * total;
  int chunk = -1;
  for (int c = 0; c < THREADS; ++c) {
    if (chunk_mass[c] <= 0.0f)
      continue;
    chunk = c; // the last chunk with candidates, if rounding runs past all
    if (r < chunk_mass[c])
      break;
    r -= chunk_mass[c];
  }
  int pick = top;
  for (int i = chunk * CHUNK; chunk >= 0 && i < min(V, (chunk + 1) * CHUNK);
       ++i) {
    const float p = kiln_key(logits[i]) >= thr ? probs[i] : 0.0f;
    if (p <= 0.0f)
      continue;
    pick = i;
    if (r < p)
      break;
    r -= p;
  }
  token[0] = pick;
}
)cuda";
  return k;
}

} // namespace kiln

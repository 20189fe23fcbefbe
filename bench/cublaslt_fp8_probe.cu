// cuBLASLt's FP8 GEMM with outer-vector scales, probed on a GPU: does the
// heuristic offer an algorithm for kiln's W8A8 shape (TN, e4m3 A and B, an
// f32 scale per row of each, f16 D, optionally + f16 C), is the result
// D[i, j] = sW[j] sA[i] sum_p W[j, p] A[i, p] (+ C), and how fast is it
// beside the f16 GEMM of the same shape. Built and run by the GPU check
// (bench/gpu_check.sh), or by hand:
//   nvcc -O2 -std=c++17 bench/cublaslt_fp8_probe.cu -lcublasLt -o probe
//   ./probe
// Prints one line a case; exits 1 when an answer is wrong.
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CHECK_CUDA(x)                                                          \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, \
                  __LINE__);                                                   \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

namespace {

struct Case {
  int m, n, k; // kiln's rows (tokens), output features, input features
  bool beta;   // + C (o_proj and down add the residual)
  bool fp8;    // e4m3 with outer-vector scales; else f16
};

// A row-major [rows, k] matrix quantized per row to e4m3 (scale amax/448),
// its codes and scales, and the decoded values (for the reference).
struct Quantized {
  std::vector<__nv_fp8_e4m3> codes;
  std::vector<float> scales, decoded;
};

Quantized quantizeRows(const std::vector<float> &x, int rows, int k) {
  Quantized q;
  q.codes.resize(size_t(rows) * k);
  q.decoded.resize(size_t(rows) * k);
  q.scales.resize(rows);
  for (int r = 0; r < rows; ++r) {
    float amax = 0;
    for (int p = 0; p < k; ++p)
      amax = std::fmax(amax, std::fabs(x[size_t(r) * k + p]));
    float s = amax > 0 ? amax / 448.0f : 1.0f;
    q.scales[r] = s;
    for (int p = 0; p < k; ++p) {
      size_t at = size_t(r) * k + p;
      q.codes[at] = __nv_fp8_e4m3(x[at] / s);
      q.decoded[at] = float(q.codes[at]);
    }
  }
  return q;
}

template <typename T> T *toDevice(const std::vector<T> &h) {
  T *d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, h.size() * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T),
                        cudaMemcpyHostToDevice));
  return d;
}

// Runs one case: returns 0 (ok), 1 (wrong answer) or 3 (no algorithm).
int run(cublasLtHandle_t lt, const Case &c, void *workspace,
        size_t workspaceBytes) {
  std::mt19937 rng(c.m * 7 + c.n * 3 + c.k);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(size_t(c.m) * c.k), w(size_t(c.n) * c.k),
      cIn(size_t(c.m) * c.n);
  for (float &x : a)
    x = u(rng);
  for (float &x : w)
    x = u(rng) * 0.05f;
  for (float &x : cIn)
    x = u(rng);
  Quantized qa = quantizeRows(a, c.m, c.k), qw = quantizeRows(w, c.n, c.k);
  std::vector<__half> ha(a.size()), hw(w.size()), hc(cIn.size());
  for (size_t i = 0; i < a.size(); ++i)
    ha[i] = __float2half(a[i]);
  for (size_t i = 0; i < w.size(); ++i)
    hw[i] = __float2half(w[i]);
  for (size_t i = 0; i < cIn.size(); ++i)
    hc[i] = __float2half(cIn[i]);
  // The values the GEMM multiplies: decoded codes, or f16-rounded inputs.
  std::vector<float> af(a.size()), wf(w.size());
  for (size_t i = 0; i < a.size(); ++i)
    af[i] = c.fp8 ? qa.decoded[i] : __half2float(ha[i]);
  for (size_t i = 0; i < w.size(); ++i)
    wf[i] = c.fp8 ? qw.decoded[i] : __half2float(hw[i]);

  void *dA = c.fp8 ? (void *)toDevice(qa.codes) : (void *)toDevice(ha);
  void *dW = c.fp8 ? (void *)toDevice(qw.codes) : (void *)toDevice(hw);
  float *dSA = toDevice(qa.scales), *dSW = toDevice(qw.scales);
  __half *dC = toDevice(hc), *dD = nullptr;
  CHECK_CUDA(cudaMalloc(&dD, hc.size() * sizeof(__half)));

  // Column-major: D^T [n, m] = op_T(W^T [k, n]) . A^T [k, m].
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t,
                                 sizeof t);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn,
                                 sizeof nn);
  if (c.fp8) {
    int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                   &mode, sizeof mode);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                   &mode, sizeof mode);
    // cuBLAS's A is W (its M = n rows), its B is the activation (N = m).
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                   &dSW, sizeof dSW);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                   &dSA, sizeof dSA);
  }
  cudaDataType_t in = c.fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16F;
  cublasLtMatrixLayout_t la, lb, lc, ld;
  cublasLtMatrixLayoutCreate(&la, in, c.k, c.n, c.k);
  cublasLtMatrixLayoutCreate(&lb, in, c.k, c.m, c.k);
  cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, c.n, c.m, c.n);
  cublasLtMatrixLayoutCreate(&ld, CUDA_R_16F, c.n, c.m, c.n);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
      sizeof workspaceBytes);
  cublasLtMatmulHeuristicResult_t heur[4];
  int found = 0;
  cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld,
                                                     pref, 4, heur, &found);
  std::printf("%s m %d n %d k %d%s: ", c.fp8 ? "fp8 outer-vec" : "f16",
              c.m, c.n, c.k, c.beta ? " +C" : "");
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
    std::printf("no algorithm (heuristic status %d, %d found)\n", int(hs),
                found);
    return 3;
  }
  float alpha = 1, beta = c.beta ? 1 : 0;
  auto call = [&] {
    return cublasLtMatmul(lt, desc, &alpha, dW, la, dA, lb, &beta,
                          c.beta ? dC : dD, lc, dD, ld, &heur[0].algo,
                          workspace, workspaceBytes, 0);
  };
  cublasStatus_t s = call();
  CHECK_CUDA(cudaDeviceSynchronize());
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::printf("cublasLtMatmul status %d\n", int(s));
    return 3;
  }
  std::vector<__half> out(hc.size());
  CHECK_CUDA(cudaMemcpy(out.data(), dD, out.size() * sizeof(__half),
                        cudaMemcpyDeviceToHost));
  // The reference on a sample of rows: fp32 sums of the decoded codes (or
  // of f16-rounded values), then the scales, then C.
  double worst = 0, ref = 0;
  for (int i = 0; i < c.m; i += std::max(1, c.m / 16))
    for (int j = 0; j < c.n; ++j) {
      const float *ar = &af[size_t(i) * c.k], *wr = &wf[size_t(j) * c.k];
      double sum = 0;
      for (int p = 0; p < c.k; ++p)
        sum += double(ar[p]) * wr[p];
      if (c.fp8)
        sum *= double(qa.scales[i]) * qw.scales[j];
      if (c.beta)
        sum += __half2float(hc[size_t(i) * c.n + j]);
      double got = __half2float(out[size_t(i) * c.n + j]);
      worst = std::fmax(worst, std::fabs(got - sum));
      ref = std::fmax(ref, std::fabs(sum));
    }
  // f16 rounding of D (|D| up to `ref`) and fp32 sums in another order.
  bool ok = worst <= 2e-3 * ref + 1e-3;
  // Timing: 20 calls after 3 warm-ups.
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int r = 0; r < 3; ++r)
    call();
  cudaEventRecord(e0);
  const int reps = 20;
  for (int r = 0; r < reps; ++r)
    call();
  cudaEventRecord(e1);
  CHECK_CUDA(cudaEventSynchronize(e1));
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  double us = ms * 1e3 / reps;
  std::printf("%s (max abs error %.3g of |D| up to %.3g), %.1f us, %.0f "
              "TFLOP/s, %d algorithms offered\n",
              ok ? "ok" : "WRONG", worst, ref, us,
              2.0 * c.m * c.n * c.k / us / 1e6, found);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  cudaFree(dA);
  cudaFree(dW);
  cudaFree(dSA);
  cudaFree(dSW);
  cudaFree(dC);
  cudaFree(dD);
  return ok ? 0 : 1;
}

} // namespace

int main() {
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, sm_%d%d, cuBLASLt %zu\n", prop.name, prop.major,
              prop.minor, cublasLtGetVersion());
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  size_t workspaceBytes = 32 << 20;
  void *workspace = nullptr;
  CHECK_CUDA(cudaMalloc(&workspace, workspaceBytes));
  // llama2-7b's prefill GEMMs (qkv, o_proj + residual, gate_up, down +
  // residual) at 2048 and 128 rows, each in f16 and in fp8.
  const Case shapes[] = {
      {2048, 12288, 4096, false, false}, {2048, 4096, 4096, true, false},
      {2048, 22016, 4096, false, false}, {2048, 4096, 11008, true, false},
      {128, 12288, 4096, false, false},  {128, 4096, 11008, true, false},
      {16, 4096, 4096, true, false},
  };
  int status = 0;
  for (const Case &shape : shapes)
    for (bool fp8 : {false, true}) {
      Case c = shape;
      c.fp8 = fp8;
      int r = run(lt, c, workspace, workspaceBytes);
      if (r == 1)
        status = 1;
    }
  cudaFree(workspace);
  cublasLtDestroy(lt);
  return status;
}

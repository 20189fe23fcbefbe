//===- BlasMatmul.h - a GEMM as cuBLAS is asked for it ----------*- C++ -*-===//
//
// One description of a matmul in cuBLAS's own terms (column-major, with
// transposes, leading dimensions, batch strides, compute and scale types,
// alpha, beta and an epilogue), made from a GEMM launch by one function.
// The cuda device hands exactly this to cublasGemmEx or cublasLtMatmul; the
// emu device runs it with a scalar stand-in that honours every field and
// refuses what it does not implement, so that the layouts kiln passes are
// tested before a GPU sees them. No CUDA header: the enumerators carry
// cuBLAS's values (checked against cublasLt.h where the cuda device is
// built).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_BLASMATMUL_H
#define KILN_RUNTIME_BLASMATMUL_H

#include "runtime/Program.h"

#include "absl/status/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// cublasOperation_t.
enum class BlasOp { N = 0, T = 1 };
/// cudaDataType_t: CUDA_R_32F, CUDA_R_16F, CUDA_R_8F_E4M3.
enum class BlasType { F32 = 0, F16 = 2, E4M3 = 28 };
/// cublasComputeType_t: CUBLAS_COMPUTE_16F, CUBLAS_COMPUTE_32F.
enum class BlasCompute { F16 = 64, F32 = 68 };
/// cublasLtEpilogue_t: CUBLASLT_EPILOGUE_DEFAULT (D = alpha AB + beta C),
/// CUBLASLT_EPILOGUE_RELU (its max with 0), CUBLASLT_EPILOGUE_BIAS.
enum class BlasEpilogue { Default = 1, Relu = 2, Bias = 4 };

/// A column-major matrix as a cublasLtMatrixLayout describes it: `rows` x
/// `cols` elements of `type`, column j at data + j * ld elements, matrix b
/// of a batch at data + b * batchStride elements.
struct BlasMatrix {
  void *data = nullptr;
  BlasType type = BlasType::F16;
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batchStride = 0;
};

/// D = epilogue(alpha * op(A) . op(B) + beta * C), D [m, n] = rows x cols
/// of D, op(A) [m, k], op(B) [k, n], for each of batchCount matrices;
/// products and sums in `compute`, alpha and beta of `scale` type, the
/// result rounded once to D's type. C and D have the same type and shape;
/// C may be D itself.
struct BlasMatmul {
  BlasOp transA = BlasOp::N, transB = BlasOp::N;
  int64_t m = 0, n = 0, k = 0;
  BlasMatrix a, b, c, d;
  float alpha = 1.0f, beta = 0.0f;
  BlasCompute compute = BlasCompute::F32;
  BlasType scale = BlasType::F32;
  BlasEpilogue epilogue = BlasEpilogue::Default;
  /// FP8 inputs' outer-vector scales
  /// (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F): f32 [m] for A's rows and [n]
  /// for B's columns, D[i, j] = alpha scaleA[i] scaleB[j] (op(A) . op(B))[i, j]
  /// + beta C[i, j]; null: none.
  const void *scaleA = nullptr, *scaleB = nullptr;
  int64_t batchCount = 1;
  /// GemmShape::algo: -1, cublasGemmEx (which takes C as D), else the
  /// heuristic's N-th of cuBLASLt.
  int algo = -1;
  /// Whether the call goes to cublasLtMatmul: an algorithm asked for, a
  /// D that is not C (cublasGemmEx writes C), or scales.
  bool usesLt() const {
    return algo >= 0 || c.data != d.data || scaleA || scaleB;
  }
};

/// The cuBLAS call of GEMM launch `g` in a step of `count` real rows, with
/// its arguments at `a` (A), `w` (W), `d` (D) and `c` (C, beta 1; else
/// null): row-major D[r, n] = A[r, k] . W[n, k]^T over the r rows that
/// GemmShape::rows says is column-major D^T[n, r] = op_T(W^T) . A^T, with W
/// stored [k, n] (ld k) transposed and A [k, r] (ld k) as is, D and C
/// [n, r] (ld n), moved down to the first row the step multiplies. The FP8
/// GEMM's (GemmShape::fp8) scales of A's rows and W's rows are at `aScale`
/// and `wScale`: cuBLAS's B and A scales.
BlasMatmul blasMatmulOf(const GemmShape &g, int64_t count, void *a, void *w,
                        void *d, void *c, void *aScale = nullptr,
                        void *wScale = nullptr);
/// The same of a GEMM launch's arguments at `args`, in its order (A, W, D,
/// C when beta is 1, the FP8 GEMM's A and W scales).
BlasMatmul blasMatmulOf(const GemmShape &g, int64_t count,
                        const std::vector<void *> &args);

/// The emu device's cuBLAS: every field of `mm` honoured, fp32 products and
/// sums in order of k (as one thread of a GEMM would), each element of D
/// rounded once (round to nearest even, as the GPU's conversion). Fails,
/// naming the field, for anything cuBLAS would refuse or kiln does not
/// implement (a compute type other than 32F, mixed input types, a C type
/// other than D's, an epilogue other than DEFAULT, a leading dimension too
/// small for its matrix, e4m3 inputs without both scales or scales of f16
/// inputs). e4m3 codes are exact in fp32; the scales multiply the sum.
absl::Status emuBlasMatmul(const BlasMatmul &mm);

/// A GEMM launch as kiln inspect and errors show it: "[16, 64] . [64, 64]^T
/// + C -> f16, rows < count" (what differs from an f32 D of all m rows).
std::string describeGemm(const GemmShape &g);

/// "D [64, 16] f16 = W^T . A + C (cuBLASLt, algorithm 3)": a call as an
/// error names it.
std::string describeBlasMatmul(const BlasMatmul &mm);

} // namespace kiln

#endif // KILN_RUNTIME_BLASMATMUL_H

//===- BlasMatmul.cpp -----------------------------------------------------===//
#include "runtime/BlasMatmul.h"
#include "runtime/DType.h"
#include "runtime/QuantFormat.h"

#include "absl/strings/str_cat.h"

#include <cmath>
#include <vector>

namespace kiln {

BlasMatmul blasMatmulOf(const GemmShape &g, int64_t count, void *a, void *w,
                        void *d, void *c, void *aScale, void *wScale) {
  int64_t rows = g.rowsFor(count), first = g.firstRowFor(count);
  BlasType out = g.f16Out ? BlasType::F16 : BlasType::F32;
  int64_t outBytes = g.f16Out ? 2 : 4;
  auto down = [](void *p, int64_t bytes) {
    return p ? static_cast<void *>(static_cast<char *>(p) + bytes) : nullptr;
  };
  BlasMatmul mm;
  mm.transA = BlasOp::T;
  mm.transB = BlasOp::N;
  mm.m = g.n;
  mm.n = rows;
  mm.k = g.k;
  BlasType in = g.fp8 ? BlasType::E4M3 : BlasType::F16;
  int64_t inBytes = g.fp8 ? 1 : 2;
  mm.a = {w, in, g.k, g.n, g.k, 0};
  mm.b = {down(a, first * g.k * inBytes), in, g.k, rows, g.k, 0};
  if (g.fp8) {
    mm.scaleA = wScale;
    mm.scaleB = down(aScale, first * 4);
  }
  mm.d = {down(d, first * g.n * outBytes), out, g.n, rows, g.n, 0};
  // Without beta, C is D (cublasGemmEx's C, and never read).
  mm.c =
      g.beta
          ? BlasMatrix{down(c, first * g.n * outBytes), out, g.n, rows, g.n, 0}
          : mm.d;
  mm.alpha = 1.0f;
  mm.beta = float(g.beta);
  mm.algo = g.algo;
  return mm;
}

BlasMatmul blasMatmulOf(const GemmShape &g, int64_t count,
                        const std::vector<void *> &args) {
  auto at = [&](size_t i) { return i < args.size() ? args[i] : nullptr; };
  size_t scales = 3 + g.beta;
  return blasMatmulOf(g, count, at(0), at(1), at(2), g.beta ? at(3) : nullptr,
                      g.fp8 ? at(scales) : nullptr,
                      g.fp8 ? at(scales + 1) : nullptr);
}

namespace {
const char *typeName(BlasType t) {
  return t == BlasType::F16    ? "f16"
         : t == BlasType::F32  ? "f32"
         : t == BlasType::E4M3 ? "e4m3"
                               : "?";
}

float load(const BlasMatrix &x, int64_t at) {
  switch (x.type) {
  case BlasType::F16:
    return halfToFloat(static_cast<const uint16_t *>(x.data)[at]);
  case BlasType::E4M3:
    return e4m3ToFloat(static_cast<const uint8_t *>(x.data)[at]);
  default:
    return static_cast<const float *>(x.data)[at];
  }
}
} // namespace

std::string describeGemm(const GemmShape &g) {
  std::string what = absl::StrCat(g.fp8 ? "e4m3 " : "", "[", g.m, ", ", g.k,
                                  "] . [", g.n, ", ", g.k, "]^T");
  if (g.beta)
    absl::StrAppend(&what, " + C");
  if (g.f16Out)
    absl::StrAppend(&what, " -> f16");
  if (g.rows == GemmRows::Count)
    absl::StrAppend(&what, ", rows < count");
  if (g.rows == GemmRows::Last)
    absl::StrAppend(&what, ", row count - 1");
  return what;
}

std::string describeBlasMatmul(const BlasMatmul &mm) {
  auto op = [](BlasOp o, const char *x) {
    return absl::StrCat(x, o == BlasOp::T ? "^T" : "");
  };
  std::string what = absl::StrCat(
      "D [", mm.m, ", ", mm.n, "] ", typeName(mm.d.type), " = ",
      mm.alpha == 1.0f ? "" : absl::StrCat(mm.alpha, " "), op(mm.transA, "A"),
      " . ", op(mm.transB, "B"), " (k ", mm.k, ")");
  if (mm.scaleA)
    absl::StrAppend(&what, ", ", typeName(mm.a.type),
                    " inputs with outer-vector scales");
  if (mm.beta != 0.0f)
    absl::StrAppend(&what, " + ",
                    mm.beta == 1.0f ? "" : absl::StrCat(mm.beta, " "), "C",
                    mm.c.data == mm.d.data ? " (in place)" : "");
  if (mm.batchCount != 1)
    absl::StrAppend(&what, ", ", mm.batchCount, " batches");
  if (mm.usesLt())
    absl::StrAppend(&what, " (cuBLASLt, ",
                    mm.algo < 0 ? std::string("its heuristic's first")
                                : absl::StrCat("algorithm ", mm.algo),
                    ")");
  else
    absl::StrAppend(&what, " (cublasGemmEx)");
  return what;
}

absl::Status emuBlasMatmul(const BlasMatmul &mm) {
  auto refuse = [&](const std::string &why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "emu device: cuBLAS stand-in: ", why, ", in ", describeBlasMatmul(mm)));
  };
  if (mm.compute != BlasCompute::F32 || mm.scale != BlasType::F32)
    return refuse("only CUBLAS_COMPUTE_32F with f32 alpha and beta");
  if (mm.epilogue != BlasEpilogue::Default)
    return refuse("only CUBLASLT_EPILOGUE_DEFAULT");
  bool fp8 = mm.a.type == BlasType::E4M3;
  if ((mm.a.type != BlasType::F16 && !fp8) || mm.b.type != mm.a.type)
    return refuse("A and B must both be f16 or both e4m3");
  if (fp8 != (mm.scaleA && mm.scaleB) || (!fp8 && (mm.scaleA || mm.scaleB)))
    return refuse("e4m3 inputs take both outer-vector scales, f16 inputs none");
  if (fp8 && (mm.transA != BlasOp::T || mm.transB != BlasOp::N || mm.k % 16 ||
              mm.a.ld % 16 || mm.b.ld % 16))
    return refuse("an FP8 GEMM is TN with k and A's and B's ld multiples "
                  "of 16");
  if ((mm.d.type != BlasType::F16 && mm.d.type != BlasType::F32) ||
      mm.c.type != mm.d.type)
    return refuse("C and D must both be f16 or both f32");
  if (mm.m <= 0 || mm.n <= 0 || mm.k <= 0 || mm.batchCount <= 0)
    return refuse("empty sizes");
  // Each operand's layout must be the shape op() makes of it, and hold it.
  auto shaped = [](const BlasMatrix &x, BlasOp op, int64_t r, int64_t c) {
    if (op == BlasOp::T)
      std::swap(r, c);
    return x.data && x.rows == r && x.cols == c && x.ld >= x.rows;
  };
  if (!shaped(mm.a, mm.transA, mm.m, mm.k))
    return refuse("A's layout is not op(A) [m, k] with ld >= its rows");
  if (!shaped(mm.b, mm.transB, mm.k, mm.n))
    return refuse("B's layout is not op(B) [k, n] with ld >= its rows");
  if (!shaped(mm.d, BlasOp::N, mm.m, mm.n) ||
      (mm.beta != 0.0f && !shaped(mm.c, BlasOp::N, mm.m, mm.n)))
    return refuse("C or D is not [m, n] with ld >= m");
  if (mm.c.data == mm.d.data &&
      (mm.c.ld != mm.d.ld || mm.c.batchStride != mm.d.batchStride))
    return refuse("C in place of D with another layout");
  if (!std::isfinite(mm.alpha) || !std::isfinite(mm.beta))
    return refuse("alpha and beta must be finite");

  // op(X)[i, j] of a column-major layout: element (i, j), or (j, i) of X.
  auto at = [](const BlasMatrix &x, BlasOp op, int64_t i, int64_t j,
               int64_t batch) {
    if (op == BlasOp::T)
      std::swap(i, j);
    return batch * x.batchStride + j * x.ld + i;
  };
  std::vector<float> opA(mm.m * mm.k); // [m, k], op(A) converted once
  std::vector<float> opB(mm.k);        // [k]: column j of op(B)
  for (int64_t batch = 0; batch < mm.batchCount; ++batch) {
    for (int64_t i = 0; i < mm.m; ++i)
      for (int64_t p = 0; p < mm.k; ++p)
        opA[i * mm.k + p] = load(mm.a, at(mm.a, mm.transA, i, p, batch));
    for (int64_t j = 0; j < mm.n; ++j) {
      for (int64_t p = 0; p < mm.k; ++p)
        opB[p] = load(mm.b, at(mm.b, mm.transB, p, j, batch));
      for (int64_t i = 0; i < mm.m; ++i) {
        const float *row = &opA[i * mm.k];
        float acc = 0.0f;
        for (int64_t p = 0; p < mm.k; ++p)
          acc += row[p] * opB[p];
        float y = mm.alpha * acc;
        if (fp8)
          y = mm.alpha * (static_cast<const float *>(mm.scaleA)[i] *
                          static_cast<const float *>(mm.scaleB)[j] * acc);
        // beta 0 reads nothing of C (cuBLAS's rule: C may hold NaNs).
        if (mm.beta != 0.0f)
          y += mm.beta * load(mm.c, at(mm.c, BlasOp::N, i, j, batch));
        int64_t out = at(mm.d, BlasOp::N, i, j, batch);
        if (mm.d.type == BlasType::F16)
          static_cast<uint16_t *>(mm.d.data)[out] = floatToHalf(y);
        else
          static_cast<float *>(mm.d.data)[out] = y;
      }
    }
  }
  return absl::OkStatus();
}

} // namespace kiln

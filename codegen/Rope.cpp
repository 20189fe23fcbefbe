//===- Rope.cpp - RoPE's rotation as the kernels compute it ---------------===//
//
// The kernels that rotate by RoPE (QKV's keys, both attentions' queries)
// share one table and one angle reduction: the angle of pair i at position
// pos is pos * theta^(-2i/DH) radians, which for long contexts is
// thousands of turns. sincosf would reduce it with its Payne-Hanek slow
// path, which walks a table in local memory; here the turns per position
// are a sum of two floats (computed in double), the whole turns of the
// product are dropped exactly, and sincospif takes what is left. A dynamic
// NTK scaling's base depends on the row's sequence length, known only on
// the device: past the original context its turns are computed in double
// there (a few pows a rotated element; rotation is a sliver of any kernel).
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"

#include <cmath>
#include <cstdio>

namespace kiln {

std::string ropePrelude(int64_t dh, std::optional<double> theta,
                        std::optional<llvm::APFloat> linear,
                        RopeDynamicAttr dynamic) {
  // A linear scaling divides the positions: the turns a position makes.
  const double divisor = linear ? linear->convertToDouble() : 1.0;
  // (Declared without RoPE too: a discarded `if constexpr` branch in a
  // non-template function still names it.)
  std::string s = "\n// RoPE: pair i turns pos * (hi + lo) turns, theta^(-2i/" +
                  std::to_string(dh) + ") / (2 pi" +
                  (linear ? " * " + floatLiteral(divisor) : std::string()) +
                  ") as two floats.\n__constant__ float "
                  "kiln_rope_turns[" +
                  std::to_string(theta ? dh / 2 : 1) + "][2] = {";
  for (int64_t i = 0; theta && i < dh / 2; ++i) {
    double turns = std::pow(*theta, -2.0 * double(i) / double(dh)) /
                   (2.0 * M_PI * divisor);
    float hi = float(turns);
    s += (i ? ", {" : "{") + floatLiteral(hi) + ", " +
         floatLiteral(float(turns - double(hi))) + "}";
  }
  s += theta ? "};\n" : "{0.0f, 0.0f}};\n";
  const bool dyn = theta && dynamic;
  s += "constexpr bool KILN_ROPE_DYNAMIC = " +
       std::string(dyn ? "true" : "false") + ";\n";
  s += "constexpr int KILN_ROPE_ORIGINAL = " +
       std::to_string(dyn ? dynamic.getOriginal() : 0) + ";\n";
  auto exact = [](double v) { // a double literal that reads back as v
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v);
    return std::string(text);
  };
  s += "constexpr double KILN_ROPE_THETA = " + exact(theta ? *theta : 0.0) +
       ", KILN_ROPE_FACTOR = " +
       exact(dyn ? dynamic.getFactor().convertToDouble() : 1.0) + ";\n";
  s += "constexpr int KILN_ROPE_DH = " + std::to_string(dh) + ";\n";
  s += R"cuda(
// The sequence length whose base a row at pos rotates with: its own pos + 1,
// or a prefill's whole length, count[1] (transformers' forward sees the
// whole prompt). Only a dynamic scaling reads it.
__device__ __forceinline__ int kiln_rope_length(int pos, const int *count) {
  if constexpr (KILN_ROPE_DYNAMIC)
    return max(pos + 1, count[1]);
  return pos + 1;
}

// sin and cos of RoPE's angle for pair i at position pos of a sequence of
// len tokens: the whole turns of pos * hi dropped exactly (fmaf keeps the
// product's rounding error), then sincospif, which reduces exactly. On emu,
// in double. Past a dynamic scaling's original context the base is
// theta * (factor * len / original - (factor - 1))^(DH / (DH - 2)), the
// turns computed in double.
__device__ __forceinline__ void kiln_rope_sincos(int pos, int len, int i,
                                                 float *s, float *c) {
  float r;
  if (KILN_ROPE_DYNAMIC && len > KILN_ROPE_ORIGINAL) {
    const double base =
        KILN_ROPE_THETA *
        pow(KILN_ROPE_FACTOR * len / KILN_ROPE_ORIGINAL - (KILN_ROPE_FACTOR - 1),
            double(KILN_ROPE_DH) / (KILN_ROPE_DH - 2));
    const double turns = double(pos) * pow(base, -2.0 * i / KILN_ROPE_DH) /
                         6.283185307179586;
    r = float(turns - rint(turns));
  } else {
    const float p = float(pos), hi = p * kiln_rope_turns[i][0];
    r = (hi - rintf(hi)) + fmaf(p, kiln_rope_turns[i][0], -hi) +
        p * kiln_rope_turns[i][1];
  }
#ifdef KILN_CUDA_EMU_H
  const double a = 6.283185307179586 * r;
  *s = float(sin(a));
  *c = float(cos(a));
#else
  sincospif(2.0f * r, s, c);
#endif
}

// Element d of one head's vector [DH] at position pos (of a sequence of len
// tokens), rotated by RoPE: pairs (2i, 2i + 1) when INTERLEAVED (Meta's
// layout), else (i, i + DH / 2). value(e) is element e of the head, as a
// float.
template <int DH, bool INTERLEAVED, class Value>
__device__ __forceinline__ float kiln_rope_rotate(Value value, int d, int pos,
                                                  int len) {
  const bool first = INTERLEAVED ? d % 2 == 0 : d < DH / 2;
  const int i = INTERLEAVED ? d / 2 : (first ? d : d - DH / 2);
  const int partner =
      INTERLEAVED ? (d ^ 1) : (first ? d + DH / 2 : d - DH / 2);
  float s, c;
  kiln_rope_sincos(pos, len, i, &s, &c);
  const float x = value(d), y = value(partner);
  return first ? x * c - y * s : y * s + x * c;
}

// The same, of a head in f16.
template <int DH, bool INTERLEAVED>
__device__ __forceinline__ float kiln_rope_rotated(const __half *head, int d,
                                                   int pos, int len) {
  return kiln_rope_rotate<DH, INTERLEAVED>(
      [&](int e) { return __half2float(head[e]); }, d, pos, len);
}
)cuda";
  return s;
}

} // namespace kiln

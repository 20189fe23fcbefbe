//===- ActivationQuant.cpp - W8A8's rounding of a GEMM's input ------------===//
#include "runtime/ActivationQuant.h"

#include "runtime/QuantFormat.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kiln {

float quantizeActivationRow(const float *x, int64_t k, uint8_t *codes) {
  float amax = 0.0f;
  for (int64_t i = 0; i < k; ++i)
    amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0.0f) {
    std::fill_n(codes, k, uint8_t(0));
    return 0.0f;
  }
  // 448 / amax as torch evaluates it (reciprocal(amax) * 448): two
  // float32 roundings, which the correctly rounded quotient misses by an
  // ulp for about a quarter of all amax.
  const float inv = (1.0f / amax) * 448.0f;
  for (int64_t i = 0; i < k; ++i)
    codes[i] = floatToE4m3(x[i] * inv);
  return amax / 448.0f;
}

void roundTripActivationRow(float *x, int64_t k) {
  std::vector<uint8_t> codes(k); // [k]
  const float scale = quantizeActivationRow(x, k, codes.data());
  for (int64_t i = 0; i < k; ++i)
    x[i] = e4m3ToFloat(codes[i]) * scale;
}

} // namespace kiln

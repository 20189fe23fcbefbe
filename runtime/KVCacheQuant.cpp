//===- KVCacheQuant.cpp - the quantized KV cache's rounding ---------------===//
#include "runtime/KVCacheQuant.h"

#include "runtime/DType.h"
#include "runtime/QuantFormat.h"

#include <algorithm>
#include <cmath>

namespace kiln {

float kvCodeMax(KVCodes codes) {
  return codes == KVCodes::E4M3 ? 448.0f : 127.0f;
}

float kvScale(float amax, KVCodes codes) {
  // f16's largest finite, so that a huge head saturates instead of
  // storing inf.
  return halfToFloat(floatToHalf(std::min(amax / kvCodeMax(codes), 65504.0f)));
}

void roundTripKVHead(float *x, int64_t n, KVCodes codes) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    amax = std::max(amax, std::fabs(x[i]));
  const float scale = kvScale(amax, codes), top = kvCodeMax(codes);
  for (int64_t i = 0; i < n; ++i) {
    if (scale == 0.0f) {
      x[i] = 0.0f;
      continue;
    }
    const float y = std::clamp(x[i] / scale, -top, top);
    const float code = codes == KVCodes::E4M3
                           ? e4m3ToFloat(floatToE4m3(y))
                           : std::nearbyint(y); // the FPU's mode: to even
    x[i] = code * scale;
  }
}

} // namespace kiln

//===- HostCollective.cpp -------------------------------------------------===//
#include "runtime/HostCollective.h"

#include "runtime/DType.h"

#include <cstring>

namespace kiln {

void sumInRankOrder(std::span<const uint16_t *const> inputs,
                    const uint16_t *residual, uint16_t *out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    float acc = 0;
    for (const uint16_t *input : inputs)
      acc += halfToFloat(input[i]);
    if (residual)
      acc += halfToFloat(residual[i]);
    out[i] = floatToHalf(acc);
  }
}

void gatherColumns(std::span<const float *const> inputs, float *out,
                   int64_t rows, int64_t cols) {
  const int64_t ranks = int64_t(inputs.size());
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t s = 0; s < rows; ++s)
      std::memcpy(&out[(s * ranks + r) * cols], inputs[r] + s * cols,
                  cols * sizeof(float));
}

} // namespace kiln

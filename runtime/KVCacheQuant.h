//===- KVCacheQuant.h - the quantized KV cache's rounding -------*- C++ -*-===//
//
// A quantized KV cache (--kv-dtype fp8|int8) stores each head of each
// token's key (and value) as head_dim 8-bit codes and one f16 scale, set
// when the token is written: the scale is the head's largest magnitude over
// the largest code (448 for e4m3, 127 for int8), rounded to f16; each code
// is the element over the scale, rounded to nearest even (int8: an integer
// in -127 ..= 127; e4m3: saturated at +-448). Read back, an element is its
// code times the scale. The kernels (codegen/KVCacheQuant.cpp) and the ref
// device (here) follow the same rules; docs/kv-cache.md has them in full.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_KVCACHEQUANT_H
#define KILN_RUNTIME_KVCACHEQUANT_H

#include <cstdint>
#include <string>

namespace kiln {

enum class KVCodes { E4M3, Int8 };

/// The largest code's magnitude: 448 (e4m3) or 127 (int8).
float kvCodeMax(KVCodes codes);

/// The f16 scale of a head whose largest magnitude is `amax` (0 for a head
/// of zeros: its codes are all 0).
float kvScale(float amax, KVCodes codes);

/// One head's vector x[n] as the cache gives it back: quantized, then
/// dequantized, in place.
void roundTripKVHead(float *x, int64_t n, KVCodes codes);

} // namespace kiln

#endif // KILN_RUNTIME_KVCACHEQUANT_H

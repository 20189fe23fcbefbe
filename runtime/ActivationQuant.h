//===- ActivationQuant.h - W8A8's rounding of a GEMM's input ----*- C++ -*-===//
//
// cuBLASLt's FP8 GEMM (quant-gemm=2) multiplies e4m3 codes, so the input
// of each prefill matmul of an fp8 weight is quantized too, a row (token)
// at a time, with a scale of its own (dynamic per-token scaling, as vLLM's
// fp8 does): amax = max |x|; inv = (1 / amax) * 448 (two float32
// roundings, as torch evaluates 448 / amax) and scale = amax / 448;
// code = e4m3(x * inv), rounded to nearest even (x * inv is within +-448
// by construction; a negative x that rounds to zero is -0, 0x80); a row of
// zeros keeps codes 0 and scale 0. The GEMM's input is then code * scale. The
// kernel (codegen/QuantizeActivationKernel.cpp) and the ref device follow this;
// test/fixtures/make_w8a8_fixture.py is the same rule in torch, and
// docs/quantization.md has it in full.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_ACTIVATIONQUANT_H
#define KILN_RUNTIME_ACTIVATIONQUANT_H

#include <cstdint>

namespace kiln {

/// Row x[k]'s e4m3 codes into codes[k]; returns its scale.
float quantizeActivationRow(const float *x, int64_t k, uint8_t *codes);

/// Row x[k] as the FP8 GEMM sees it: quantized, then code * scale, in
/// place.
void roundTripActivationRow(float *x, int64_t k);

} // namespace kiln

#endif // KILN_RUNTIME_ACTIVATIONQUANT_H

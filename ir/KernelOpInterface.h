//===- KernelOpInterface.h - an op that becomes a kernel --------*- C++ -*-===//
#ifndef KILN_IR_KERNELOPINTERFACE_H
#define KILN_IR_KERNELOPINTERFACE_H

#include "ir/KilnDialect.h"

#include "mlir/IR/OpDefinition.h"

#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

/// The HBM traffic and arithmetic of one kernel, estimated from types:
/// every operand read once, every result written once.
struct KernelCost {
  int64_t weightBytes = 0;     // weights read
  int64_t kvReadBytes = 0;     // cached keys and values read
  int64_t kvWriteBytes = 0;    // keys and values written into the cache
  int64_t activationBytes = 0; // activations read and written
  int64_t flops = 0;

  int64_t bytes() const {
    return weightBytes + kvReadBytes + kvWriteBytes + activationBytes;
  }
  KernelCost &operator+=(const KernelCost &o);
};

/// Dynamic dimensions count as `tokens` new tokens and `context` keys.
struct CostShape {
  int64_t tokens;
  int64_t context;
};

/// KernelOpInterface's default cost: operands read once, results written
/// once, one FLOP per element of the first result.
KernelCost operandsAndResultsCost(mlir::Operation *op, CostShape shape);

/// KernelOpInterface's default name: the innermost Hugging Face module of
/// op's location, shortened ("layers.3.attn"), with the mnemonic after it
/// when `byMnemonic` (or when the location names no module), and "_rope"
/// after that for an op with a rope_theta.
std::string moduleKernelName(mlir::Operation *op, bool byMnemonic);

/// The cost of `op`'s kernel (KernelOpInterface::getKernelCost); zero for an
/// op that is no kernel.
KernelCost estimateCost(mlir::Operation *op, CostShape shape);

/// The templates that are the epilogue of a GEMM of the op's first two
/// operands (x . W^T, cuBLAS's or kiln's own), which runs just before them.
inline bool followsGemm(KernelTemplate t) {
  return t == KernelTemplate::linear_epilogue ||
         t == KernelTemplate::qkv_epilogue;
}

/// Whether `op` multiplies by a quantized weight (its second operand's type
/// has #kiln.quant): it then runs as a quantized GEMM and its epilogue, or
/// in decode a GEMV with the epilogue fused (fused_linear, linear).
bool hasQuantizedWeight(mlir::Operation *op);

/// Whether `op` takes a quantized KV cache (an 8-bit element type).
bool hasQuantizedCache(mlir::Operation *op);

/// Whether decode's kernel of `op`, a matmul into the KV cache (fused_qkv),
/// is its prefill's (a GEMM, then the epilogue): with a quantized cache,
/// whose heads need all their columns at once, and with a quantized weight
/// whose head dim is not a multiple of 32 (the quantized GEMV rotates k
/// in a block of two 16-row tiles, half a head apart).
bool decodesAsPrefill(mlir::Operation *op);

/// The `kiln.phase` of the function that holds `op` (or is it), if any.
std::optional<Phase> phaseOf(mlir::Operation *op);

} // namespace kiln

#include "ir/KernelOpInterface.h.inc"

#endif // KILN_IR_KERNELOPINTERFACE_H

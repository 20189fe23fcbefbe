//===- KernelOpInterface.cpp - the interface's generated code -------------===//
//
// The ops' answers are in KernelCost.cpp (bytes and FLOPs), KernelNames.cpp
// (names) and the ODS (templates).
//
//===----------------------------------------------------------------------===//
#include "ir/KernelOpInterface.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;

#include "ir/KernelOpInterface.cpp.inc"

std::optional<kiln::Phase> kiln::phaseOf(Operation *op) {
  Operation *fn = isa<FunctionOpInterface>(op)
                      ? op
                      : op->getParentOfType<FunctionOpInterface>();
  if (!fn)
    return std::nullopt;
  if (auto phase = fn->getAttrOfType<PhaseAttr>("kiln.phase"))
    return phase.getValue();
  return std::nullopt;
}

bool kiln::hasQuantizedCache(Operation *op) {
  return llvm::any_of(op->getOperandTypes(), [](Type t) {
    auto cache = dyn_cast<KVCacheType>(t);
    return cache && cache.isQuantized();
  });
}

bool kiln::hasQuantizedWeight(Operation *op) {
  // Only weights carry #kiln.quant, and a matmul's is its second operand.
  return op->getNumOperands() >= 2 &&
         weightQuant(op->getOperand(1).getType()).has_value();
}

bool kiln::decodesAsPrefill(Operation *op) {
  if (hasQuantizedCache(op))
    return true;
  if (!hasQuantizedWeight(op))
    return false;
  for (Type t : op->getOperandTypes())
    if (auto cache = dyn_cast<KVCacheType>(t))
      return cache.getHeadDim() % 32 != 0;
  return true;
}

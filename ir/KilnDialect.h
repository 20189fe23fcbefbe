//===- KilnDialect.h - the kiln dialect -------------------------*- C++ -*-===//
#ifndef KILN_IR_KILNDIALECT_H
#define KILN_IR_KILNDIALECT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/TensorEncoding.h"
#include "runtime/QuantFormat.h"
#include "llvm/ADT/Hashing.h"

namespace kiln {
/// For #kiln.quant's storage.
inline llvm::hash_code hash_value(const QuantFormat &f) {
  return llvm::hash_combine(int(f.kind), f.group, f.zeroPoints, f.actOrder,
                            f.mins);
}
} // namespace kiln

#include "ir/KilnDialect.h.inc"

#include "ir/KilnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/KilnAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/KilnTypes.h.inc"

namespace kiln {
/// The #kiln.quant format of a weight's tensor type, if it has one.
std::optional<QuantFormat> weightQuant(mlir::Type type);
} // namespace kiln

#endif // KILN_IR_KILNDIALECT_H

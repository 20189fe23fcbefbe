//===- KilnOps.h - kiln operations ------------------------------*- C++ -*-===//
#ifndef KILN_IR_KILNOPS_H
#define KILN_IR_KILNOPS_H

#include "ir/KilnDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "ir/KilnOps.h.inc"

namespace kiln {
/// True for the ops that become a kernel launch: every kiln op except the
/// weight references and kv_read (a view of the cache that the consuming
/// kernel reads directly).
bool isKernel(mlir::Operation *op);
} // namespace kiln

#endif // KILN_IR_KILNOPS_H

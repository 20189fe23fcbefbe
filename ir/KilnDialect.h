//===- KilnDialect.h - the kiln dialect -------------------------*- C++ -*-===//
#ifndef KILN_IR_KILNDIALECT_H
#define KILN_IR_KILNDIALECT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "ir/KilnDialect.h.inc"

#include "ir/KilnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/KilnAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/KilnTypes.h.inc"

#endif // KILN_IR_KILNDIALECT_H

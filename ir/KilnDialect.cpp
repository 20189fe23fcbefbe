//===- KilnDialect.cpp - the kiln dialect ---------------------------------===//
#include "ir/KilnDialect.h"
#include "ir/KilnOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln;

#include "ir/KilnDialect.cpp.inc"
#include "ir/KilnEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/KilnAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/KilnTypes.cpp.inc"

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/KilnOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "ir/KilnTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/KilnAttrs.cpp.inc"
      >();
}

LogicalResult KVCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t layers, int64_t capacity,
                                  int64_t kvHeads, int64_t headDim,
                                  Type elementType) {
  if (layers <= 0 || capacity <= 0 || kvHeads <= 0 || headDim <= 0)
    return emitError() << "kv_cache: layers, capacity, kv_heads and head_dim "
                          "must be positive";
  if (!llvm::isa<Float16Type, BFloat16Type, Float32Type>(elementType))
    return emitError() << "kv_cache: element type must be f16, bf16 or f32, "
                          "not "
                       << elementType;
  return success();
}

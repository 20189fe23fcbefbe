//===- KilnDialect.cpp - the kiln dialect ---------------------------------===//
#include "ir/KilnDialect.h"
#include "ir/KilnOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

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

std::optional<QuantFormat> kiln::weightQuant(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (auto quant = tensor ? dyn_cast_or_null<QuantAttr>(tensor.getEncoding())
                          : QuantAttr())
    return quant.getFormat();
  return std::nullopt;
}

/// #kiln.quant<int4, group = 128, zero_points, act_order>: the kind, then
/// what it has.
Attribute QuantAttr::parse(AsmParser &parser, Type) {
  QuantFormat f;
  StringRef kind;
  SMLoc at = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeyword(&kind))
    return {};
  if (kind == "int4")
    f.kind = QuantKind::Int4;
  else if (kind == "fp8")
    f.kind = QuantKind::FP8;
  else if (kind != "int8")
    return parser.emitError(at, "expected int8, int4 or fp8, not ") << kind,
           Attribute();
  while (succeeded(parser.parseOptionalComma())) {
    if (succeeded(parser.parseOptionalKeyword("zero_points"))) {
      f.zeroPoints = true;
      continue;
    }
    if (succeeded(parser.parseOptionalKeyword("mins"))) {
      f.mins = true;
      continue;
    }
    if (succeeded(parser.parseOptionalKeyword("act_order"))) {
      f.actOrder = true;
      continue;
    }
    if (parser.parseKeyword("group") || parser.parseEqual() ||
        parser.parseInteger(f.group))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return QuantAttr::getChecked([&] { return parser.emitError(at); },
                               parser.getContext(), f);
}

void QuantAttr::print(AsmPrinter &printer) const {
  const QuantFormat &f = getFormat();
  printer << "<"
          << (f.kind == QuantKind::Int4  ? "int4"
              : f.kind == QuantKind::FP8 ? "fp8"
                                         : "int8");
  if (f.group)
    printer << ", group = " << f.group;
  if (f.zeroPoints)
    printer << ", zero_points";
  if (f.mins)
    printer << ", mins";
  if (f.actOrder)
    printer << ", act_order";
  printer << ">";
}

LogicalResult QuantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                QuantFormat f) {
  if (f.group < 0)
    return emitError() << "#kiln.quant: the group must be positive";
  if (f.actOrder && !f.group)
    return emitError() << "#kiln.quant: act_order needs a group";
  if (f.kind == QuantKind::FP8 && (f.group || f.zeroPoints))
    return emitError() << "#kiln.quant: fp8 has one scale per row and no "
                          "zero points";
  if (f.mins &&
      (f.kind == QuantKind::FP8 || !f.group || f.zeroPoints || f.actOrder))
    return emitError() << "#kiln.quant: mins go with int8 or int4 codes in "
                          "groups, in column order, without zero points";
  return success();
}

LogicalResult
QuantAttr::verifyEncoding(ArrayRef<int64_t> shape, Type elementType,
                          function_ref<InFlightDiagnostic()> emitError) const {
  if (shape.size() != 2 || ShapedType::isDynamic(shape[1]))
    return emitError() << "#kiln.quant: a quantized weight is a matrix of "
                          "static columns";
  if (!llvm::isa<Float16Type, BFloat16Type, Float32Type>(elementType))
    return emitError() << "#kiln.quant: a quantized weight dequantizes to "
                          "f16, bf16 or f32";
  int64_t group = getFormat().group;
  if (group && shape[1] % group)
    return emitError() << "#kiln.quant: group " << group
                       << " does not divide the " << shape[1] << " columns";
  return success();
}

/// #kiln.rope_dynamic<factor = 2.000000e+00, original = 4096>
Attribute RopeDynamicAttr::parse(AsmParser &parser, Type) {
  double factor = 0;
  int64_t original = 0;
  if (parser.parseLess() || parser.parseKeyword("factor") ||
      parser.parseEqual() || parser.parseFloat(factor) || parser.parseComma() ||
      parser.parseKeyword("original") || parser.parseEqual() ||
      parser.parseInteger(original) || parser.parseGreater())
    return {};
  return parser.getChecked<RopeDynamicAttr>(parser.getContext(),
                                            APFloat(factor), original);
}

void RopeDynamicAttr::print(AsmPrinter &printer) const {
  printer << "<factor = ";
  printer.printFloat(getFactor());
  printer << ", original = " << getOriginal() << ">";
}

LogicalResult
RopeDynamicAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        APFloat factor, int64_t original) {
  if (!(factor.convertToDouble() >= 1))
    return emitError() << "#kiln.rope_dynamic: the factor must be at least 1, "
                          "not "
                       << factor.convertToDouble();
  if (original <= 0)
    return emitError() << "#kiln.rope_dynamic: the original context must be "
                          "positive";
  return success();
}

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t axis, int64_t parts) {
  if (axis != 0 && axis != 1)
    return emitError() << "#kiln.shard: the axis is 0 (rows) or 1 (columns), "
                          "not "
                       << axis;
  if (parts < 1)
    return emitError() << "#kiln.shard: needs at least one part, not " << parts;
  return success();
}

double RopeDynamicAttr::base(double theta, int64_t headDim,
                             int64_t length) const {
  if (length <= getOriginal())
    return theta;
  const double f = getFactor().convertToDouble();
  return theta * std::pow(f * double(length) / double(getOriginal()) - (f - 1),
                          double(headDim) / double(headDim - 2));
}

LogicalResult KVCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t layers, int64_t capacity,
                                  int64_t kvHeads, int64_t headDim,
                                  Type elementType) {
  if (layers <= 0 || capacity <= 0 || kvHeads <= 0 || headDim <= 0)
    return emitError() << "kv_cache: layers, capacity, kv_heads and head_dim "
                          "must be positive";
  if (!llvm::isa<Float16Type, BFloat16Type, Float32Type, Float8E4M3FNType>(
          elementType) &&
      !elementType.isSignlessInteger(8))
    return emitError() << "kv_cache: element type must be f16, bf16 or f32, "
                          "or f8E4M3FN or i8 (quantized), not "
                       << elementType;
  return success();
}

/// The discardable attributes of the kiln namespace: what each is, where it
/// may stand, and its value's kind. Passes and emitters may then read a
/// present attribute without checking its kind (they still check presence:
/// an attribute is there only after the pass that sets it).
LogicalResult KilnDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  Attribute value = attr.getValue();
  auto fail = [&](const Twine &what) {
    return op->emitError() << "'" << name << "' " << what;
  };
  auto nonNegative = [](Attribute a) {
    auto i = dyn_cast<IntegerAttr>(a);
    return i && i.getType().isInteger(64) && i.getInt() >= 0;
  };
  bool onModule = isa<ModuleOp>(op), onFunction = isa<FunctionOpInterface>(op);
  if (name == "kiln.model") {
    if (!onModule || !isa<StringAttr>(value))
      return fail("must be a string on the module");
  } else if (name == "kiln.config") {
    if (!onModule || !isa<DictionaryAttr>(value))
      return fail("must be a dictionary on the module");
  } else if (name == "kiln.kv_pool") {
    auto pool = dyn_cast<KVPoolAttr>(value);
    if (!onModule || !pool)
      return fail("must be a #kiln.kv_pool on the module");
    if (pool.getBlockSize() <= 0 || pool.getBlocks() <= 0 ||
        pool.getBlockBytes() <= 0 || pool.getLayerBytes() <= 0 ||
        pool.getBytes() <= 0 || pool.getSequences() <= 0 ||
        pool.getTableBlocks() <= 0)
      return fail("must have positive sizes");
    if (pool.getLayerBytes() < 2 * pool.getBlocks() * pool.getBlockBytes())
      return fail("holds less than a layer's keys and values (layer_bytes < "
                  "2 * blocks * block_bytes)");
  } else if (name == "kiln.tensor_parallel") {
    auto ranks = dyn_cast<IntegerAttr>(value);
    if (!onModule || !nonNegative(value) || ranks.getInt() < 2)
      return fail("must be an i64 of at least 2 ranks on the module");
  } else if (name == "kiln.phase") {
    if (!onFunction || !isa<PhaseAttr>(value))
      return fail("must be a #kiln.phase on a function");
  } else if (name == "kiln.arena_bytes" || name == "kiln.arena_peak_bytes") {
    if (!(onModule || onFunction) || !nonNegative(value))
      return fail("must be a non-negative i64 on the module or a function");
  } else if (name == "kiln.arena_tokens") {
    if (!onFunction || !nonNegative(value))
      return fail("must be a non-negative i64 on a function");
  } else if (name == "kiln.arena_offsets") {
    auto offsets = dyn_cast<DenseI64ArrayAttr>(value);
    if (!offsets || int64_t(offsets.size()) != op->getNumResults())
      return fail("must be an array of one offset per result");
    for (int64_t o : offsets.asArrayRef())
      if (o < -1)
        return fail("must hold offsets of 0 and up (-1: not in the arena)");
  } else if (name == "kiln.kernel" || name == "kiln.name") {
    auto text = dyn_cast<StringAttr>(value);
    if (!isa<KernelOpInterface>(op) || !text || text.empty())
      return fail("must be a non-empty string on a kernel op");
  } else {
    return op->emitError() << "unknown attribute '" << name
                           << "' in the kiln namespace";
  }
  return success();
}

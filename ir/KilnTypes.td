//===- KilnTypes.td - kiln types ---------------------------*- tablegen -*-===//

#ifndef KILN_TYPES_TD
#define KILN_TYPES_TD

include "ir/KilnDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Kiln_KVCacheType : TypeDef<Kiln_Dialect, "KVCache"> {
  let mnemonic = "kv_cache";
  let summary = "the keys and values of every layer for one sequence";
  let description = [{
    A value standing for the KV cache of one sequence: for each of `layers`
    decoder layers, `capacity` token slots of keys and of values, each slot
    `kv_heads * head_dim` elements of `element_type`. kiln.kv_write returns
    the updated cache, so the order of writes and reads is plain data flow.

    An 8-bit `element_type` (`f8E4M3FN` or `i8`) is a quantized cache: each
    head of each token slot is stored as `head_dim` codes and one f16 scale,
    its largest magnitude over the code's (448 for e4m3, 127 for int8).
    Writes take and reads give the model's floats; docs/kv-cache.md has the
    rounding rules.

    Example: `!kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2,
    head_dim = 16, element_type = f16>`
  }];
  let parameters = (ins "int64_t":$layers, "int64_t":$capacity,
                        "int64_t":$kv_heads, "int64_t":$head_dim,
                        "::mlir::Type":$element_type);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Elements of one token slot: kv_heads * head_dim.
    int64_t getSlotWidth() const { return getKvHeads() * getHeadDim(); }
    /// An 8-bit cache: codes with a scale per head of a slot.
    bool isQuantized() const {
      return getElementType().getIntOrFloatBitWidth() == 8;
    }
    /// Bytes of one element's code or value.
    int64_t getElementBytes() const {
      return getElementType().getIntOrFloatBitWidth() / 8;
    }
    /// Bytes of a slot's scales: an f16 a head when quantized, else none.
    int64_t getSlotScaleBytes() const {
      return isQuantized() ? 2 * getKvHeads() : 0;
    }
    /// Bytes one token slot of keys (or of values) takes, scales included.
    int64_t getSlotBytes() const {
      return getSlotWidth() * getElementBytes() + getSlotScaleBytes();
    }
  }];
}

#endif // KILN_TYPES_TD

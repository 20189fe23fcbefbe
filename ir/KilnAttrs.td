//===- KilnAttrs.td - kiln attributes ----------------------*- tablegen -*-===//

#ifndef KILN_ATTRS_TD
#define KILN_ATTRS_TD

include "ir/KilnDialect.td"
include "mlir/IR/EnumAttr.td"

// Which dimensions of a head RoPE rotates together. Hugging Face checkpoints
// pair (i, i + head_dim/2); Meta's original checkpoints pair (2i, 2i + 1).
def Kiln_RopeLayout : I32EnumAttr<"RopeLayout", "pairing of the rotated dimensions", [
    I32EnumAttrCase<"rotate_half", 0>,
    I32EnumAttrCase<"interleaved", 1>
  ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_RopeLayoutAttr : EnumAttr<Kiln_Dialect, Kiln_RopeLayout, "rope_layout"> {
  let assemblyFormat = "$value";
}

#endif // KILN_ATTRS_TD

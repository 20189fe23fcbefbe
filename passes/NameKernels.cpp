//===- NameKernels.cpp - kiln-name-kernels --------------------------------===//
//
// Provenance names for kernels (each op's KernelOpInterface::getKernelName:
// the Hugging Face module names the frontend put in the locations and the
// fusions each op carries), and one kernel per distinct structure, so 32
// identical layers compile once.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "llvm/ADT/StringMap.h"

namespace kiln {
#define GEN_PASS_DEF_KILNNAMEKERNELS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// "layers.3.attn.norm_qkv_rope" -> "attn.norm_qkv_rope".
std::string withoutLayer(StringRef name) {
  if (!name.consume_front("layers."))
    return name.str();
  return name.drop_until([](char c) { return c == '.'; }).drop_front().str();
}

/// What makes two ops the same kernel: the op, its operand and result types
/// and its attributes other than the layer index and the discardable kiln.*
/// ones. Types and attributes are uniqued, so equality is structural.
struct KernelStructure {
  OperationName op;
  SmallVector<Type> types; // operands, then results
  DictionaryAttr attrs;

  explicit KernelStructure(Operation *o)
      : op(o->getName()), attrs(structuralAttrs(o)) {
    llvm::append_range(types, o->getOperandTypes());
    llvm::append_range(types, o->getResultTypes());
  }
  bool operator==(const KernelStructure &o) const {
    return op == o.op && types == o.types && attrs == o.attrs;
  }

private:
  static DictionaryAttr structuralAttrs(Operation *o) {
    NamedAttrList kept;
    for (NamedAttribute a : o->getAttrs())
      if (a.getName() != "layer" && !a.getName().strref().starts_with("kiln."))
        kept.push_back(a);
    return kept.getDictionary(o->getContext());
  }
};

struct KilnNameKernels : kiln::impl::KilnNameKernelsBase<KilnNameKernels> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    Builder b(&getContext());
    // kernel name -> the structures seen under it, in order of appearance.
    llvm::StringMap<std::vector<KernelStructure>> kinds;
    fn.walk([&](KernelOpInterface op) {
      std::string name = op.getKernelName();
      std::string kernel = fn.getName().str() + "." + withoutLayer(name);
      std::vector<KernelStructure> &seen = kinds[kernel];
      KernelStructure structure(op);
      size_t index =
          std::find(seen.begin(), seen.end(), structure) - seen.begin();
      if (index == seen.size())
        seen.push_back(std::move(structure));
      if (index > 0)
        kernel += "#" + std::to_string(index + 1);
      op->setAttr("kiln.name", b.getStringAttr(name));
      op->setAttr("kiln.kernel", b.getStringAttr(kernel));
    });
  }
};

} // namespace

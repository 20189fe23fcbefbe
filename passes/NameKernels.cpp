//===- NameKernels.cpp - kiln-name-kernels --------------------------------===//
//
// Provenance names for kernels, from the Hugging Face module names the
// frontend put in the locations and the fusions each op carries, and one
// kernel per distinct piece of code, so 32 identical layers compile once.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/AsmState.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {
#define GEN_PASS_DEF_KILNNAMEKERNELS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// "model.layers.3.self_attn.q_proj.weight" -> "layers.3.attn.q_proj".
std::string shorten(StringRef name) {
  name.consume_back(".weight");
  name.consume_front("model.");
  std::string s = name.str();
  if (size_t at = s.find("self_attn"); at != std::string::npos)
    s.replace(at, 9, "attn");
  return s;
}

/// The innermost Hugging Face module holding every name in a (possibly
/// fused) location: attention's parts and its rotary_emb -> self_attn.
std::string commonModule(Location loc) {
  std::optional<std::string> common;
  loc->walk([&](Location l) {
    auto name = dyn_cast<NameLoc>(l);
    if (!name)
      return WalkResult::advance();
    std::string n = name.getName().str();
    if (!common) {
      common = n;
    } else {
      size_t i = 0;
      while (i < common->size() && i < n.size() && (*common)[i] == n[i])
        ++i;
      // Whole components only: cut at the last dot both names share.
      if (i < common->size() || (i < n.size() && n[i] != '.'))
        i = common->rfind('.', i) == std::string::npos ? 0
                                                       : common->rfind('.', i);
      common->resize(i);
    }
    return WalkResult::advance();
  });
  return common.value_or("");
}

/// "layers.3.mlp.gate_proj+up_proj" -> "layers.3.mlp.gate_up".
std::string matmulName(Value weight) {
  std::string name;
  if (auto w = weight.getDefiningOp<WeightOp>())
    name = shorten(w.getName());
  else if (auto p = weight.getDefiningOp<PackedWeightOp>())
    name = shorten(p.getName());
  else
    return "linear";
  for (auto [from, to] : {std::pair{"q_proj+k_proj+v_proj", "qkv"},
                          std::pair{"gate_proj+up_proj", "gate_up"}})
    if (size_t at = name.find(from); at != std::string::npos)
      name.replace(at, strlen(from), to);
  return name;
}

/// `base` with a "norm_" prologue before its last component and epilogue
/// suffixes after: "layers.3.attn.qkv" -> "layers.3.attn.norm_qkv_rope".
std::string decorate(std::string base, bool norm,
                     ArrayRef<StringRef> epilogues) {
  if (norm) {
    size_t dot = base.rfind('.');
    base.insert(dot == std::string::npos ? 0 : dot + 1, "norm_");
  }
  for (StringRef e : epilogues)
    base += "_" + e.str();
  return base;
}

std::string provenance(Operation *op) {
  if (auto f = dyn_cast<FusedLinearOp>(op)) {
    SmallVector<StringRef> epilogues;
    if (f.getSwiglu())
      epilogues.push_back("swiglu");
    if (f.getResidual())
      epilogues.push_back("residual");
    return decorate(matmulName(f.getWeight()), f.getNormEpsilon().has_value(),
                    epilogues);
  }
  if (auto q = dyn_cast<FusedQKVOp>(op)) {
    SmallVector<StringRef> epilogues;
    if (q.getRopeTheta())
      epilogues.push_back("rope");
    return decorate(matmulName(q.getWeight()), q.getNormEpsilon().has_value(),
                    epilogues);
  }
  std::string base = shorten(commonModule(op->getLoc()));
  std::string what = op->getName().stripDialect().str();
  if (auto a = dyn_cast<AttentionOp>(op); a && a.getRopeTheta())
    what += "_rope";
  if (auto w = dyn_cast<KVWriteOp>(op); w && w.getRopeTheta())
    what += "_rope";
  // Ops whose module name does not say what they do get their mnemonic.
  if (base.empty() || isa<AttentionOp, KVWriteOp, QKOp, CausalMaskOp, SoftmaxOp,
                          PVOp, AddOp, MulOp>(op))
    return base.empty() ? what : base + "." + what;
  return base;
}

/// "layers.3.attn.norm_qkv_rope" -> "attn.norm_qkv_rope".
std::string withoutLayer(StringRef name) {
  if (!name.consume_front("layers."))
    return name.str();
  return name.drop_until([](char c) { return c == '.'; }).drop_front().str();
}

/// What makes two ops the same kernel: the op, its types and its
/// attributes other than the layer index and the naming ones.
std::string signature(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getName();
  for (Type t : op->getOperandTypes())
    os << " " << t;
  os << " ->";
  for (Type t : op->getResultTypes())
    os << " " << t;
  for (NamedAttribute a : op->getAttrs())
    if (a.getName() != "layer" && !a.getName().strref().starts_with("kiln."))
      os << " " << a.getName() << "=" << a.getValue();
  return s;
}

struct KilnNameKernels : kiln::impl::KilnNameKernelsBase<KilnNameKernels> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    Builder b(&getContext());
    // kernel name -> the signatures seen under it, in order of appearance.
    llvm::StringMap<std::vector<std::string>> kinds;
    fn.walk([&](Operation *op) {
      if (!isKernel(op))
        return;
      std::string name = provenance(op);
      std::string kernel = fn.getName().str() + "." + withoutLayer(name);
      std::vector<std::string> &seen = kinds[kernel];
      std::string sig = signature(op);
      size_t index = std::find(seen.begin(), seen.end(), sig) - seen.begin();
      if (index == seen.size())
        seen.push_back(sig);
      if (index > 0)
        kernel += "#" + std::to_string(index + 1);
      op->setAttr("kiln.name", b.getStringAttr(name));
      op->setAttr("kiln.kernel", b.getStringAttr(kernel));
    });
  }
};

} // namespace

//===- KernelNames.cpp - each kernel op's provenance name -----------------===//
//
// KernelOpInterface::getKernelName: from the Hugging Face module names the
// frontend put in the locations (fused ops carry every fused op's), and for
// the matmuls from the weights they multiply by and what is fused around
// them.
//
//===----------------------------------------------------------------------===//
#include "ir/KilnOps.h"

using namespace mlir;

namespace kiln {
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
} // namespace

std::string moduleKernelName(Operation *op, bool byMnemonic) {
  std::string base = shorten(commonModule(op->getLoc()));
  std::string what = op->getName().stripDialect().str();
  if (op->hasAttr("rope_theta"))
    what += "_rope";
  if (base.empty())
    return what;
  return byMnemonic ? base + "." + what : base;
}

// A matmul left alone (a rank's O or down projection, whose sum is a
// kiln.all_reduce): named after its weight, as the fused ones are.
std::string LinearOp::getKernelName() { return matmulName(getWeight()); }

std::string FusedLinearOp::getKernelName() {
  SmallVector<StringRef> epilogues;
  if (getSwiglu())
    epilogues.push_back("swiglu");
  if (getResidual())
    epilogues.push_back("residual");
  return decorate(matmulName(getWeight()), getNormEpsilon().has_value(),
                  epilogues);
}

std::string FusedQKVOp::getKernelName() {
  SmallVector<StringRef> epilogues;
  if (getRopeTheta())
    epilogues.push_back("rope");
  return decorate(matmulName(getWeight()), getNormEpsilon().has_value(),
                  epilogues);
}

} // namespace kiln

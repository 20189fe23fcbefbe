//===- KernelGraph.cpp ----------------------------------------------------===//
#include "inspect/KernelGraph.h"

#include "ir/KilnOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <map>
#include <set>

using namespace mlir;

namespace kiln {
namespace {

std::string human(double n, const char *unit) {
  const char *prefixes[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (n >= 1000 && i < 4) {
    n /= 1000;
    ++i;
  }
  return llvm::formatv("{0:F1} {1}{2}", n, prefixes[i], unit).str();
}

std::string shapeText(Type t) {
  auto type = dyn_cast<RankedTensorType>(t);
  if (!type)
    return "cache";
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(type.getShape()))
    s += (i ? "," : "") +
         (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d));
  std::string elem;
  llvm::raw_string_ostream os(elem);
  os << type.getElementType();
  return s + "] " + elem;
}

/// The decoder layer an op belongs to (from kiln.name "layers.N."), or -1.
int64_t layerOf(Operation *op) {
  auto name = op->getAttrOfType<StringAttr>("kiln.name");
  StringRef rest = name ? name.getValue() : "";
  int64_t layer;
  if (!rest.consume_front("layers.") ||
      rest.take_until([](char c) { return c == '.'; }).getAsInteger(10, layer))
    return -1;
  return layer;
}

std::string kernelOf(Operation *op) {
  auto k = op->getAttrOfType<StringAttr>("kiln.kernel");
  return k ? k.str() : op->getName().getStringRef().str();
}

/// The kernel whose output `v` is: through kv_read to the cache writer.
Operation *producer(Value v) {
  Operation *def = v.getDefiningOp();
  while (def && !isa<KernelOpInterface>(def)) {
    if (auto read = dyn_cast<KVReadOp>(def))
      def = read.getCache().getDefiningOp();
    else
      return nullptr; // a weight or an argument
  }
  return def;
}
} // namespace

std::string kernelGraphDot(func::FuncOp fn, CostShape shape) {
  SmallVector<Operation *> kernels;
  std::map<int64_t, SmallVector<Operation *>> layers;
  fn.walk([&](Operation *op) {
    if (!isa<KernelOpInterface>(op))
      return;
    kernels.push_back(op);
    if (int64_t l = layerOf(op); l >= 0)
      layers[l].push_back(op);
  });

  // Fold when every layer runs the same kernels in the same order.
  bool fold = layers.size() > 1;
  for (auto &[l, ops] : layers)
    fold = fold && ops.size() == layers.begin()->second.size() &&
           llvm::all_of(llvm::zip(ops, layers.begin()->second), [](auto p) {
             return kernelOf(std::get<0>(p)) == kernelOf(std::get<1>(p));
           });
  // Each kernel's node: itself, or its twin in the first layer when folded.
  llvm::DenseMap<Operation *, Operation *> node;
  for (Operation *op : kernels)
    node[op] = op;
  if (fold)
    for (auto &[l, ops] : layers)
      for (auto [op, first] : llvm::zip(ops, layers.begin()->second))
        node[op] = first;

  llvm::DenseMap<Operation *, int> id;
  for (Operation *op : kernels)
    if (node[op] == op)
      id[op] = int(id.size());

  std::string dot;
  llvm::raw_string_ostream os(dot);
  os << "digraph \"" << fn.getName() << "\" {\n";
  os << "  label=\"@" << fn.getName() << ": " << shape.tokens
     << " new token(s), " << shape.context << " keys\";\n";
  os << "  labelloc=t; rankdir=TB; fontname=\"Helvetica\";\n";
  os << "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#eef3fb\", "
        "fontname=\"Helvetica\", fontsize=10];\n";
  os << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  os << "  tokens [shape=oval, fillcolor=\"#ffffff\"];\n";

  auto emitNode = [&](Operation *op, StringRef indent) {
    KernelCost c = estimateCost(op, shape);
    auto name = op->getAttrOfType<StringAttr>("kiln.name");
    std::string label = name ? name.str() : "";
    if (fold && layerOf(op) >= 0) // "layers.0.attn.x" -> "attn.x"
      label = StringRef(label).split('.').second.split('.').second.str();
    std::string shapes;
    for (Value v : op->getOperands())
      if (isa<RankedTensorType>(v.getType()) &&
          !isa_and_nonnull<WeightOp, PackedWeightOp>(v.getDefiningOp())) {
        shapes = shapeText(v.getType());
        break;
      }
    shapes += " -> " + shapeText(op->getResultTypes()[0]);
    os << indent << "n" << id[op] << " [label=\"" << label << "\\n"
       << op->getName() << "\\n"
       << shapes << "\\n"
       << human(double(c.bytes()), "B") << " moved, "
       << human(double(c.flops), "FLOP") << "\"];\n";
  };

  std::set<Operation *> inCluster;
  if (fold) {
    auto &first = layers.begin()->second;
    KernelCost layerCost;
    for (Operation *op : first)
      layerCost += estimateCost(op, shape);
    os << "  subgraph cluster_layers {\n";
    os << "    label=\"decoder layer \u00d7" << layers.size() << " ("
       << human(double(layerCost.bytes()), "B") << ", "
       << human(double(layerCost.flops), "FLOP") << " each)\";\n";
    os << "    style=\"rounded,dashed\"; color=\"#7a8ca8\";\n";
    for (Operation *op : first) {
      emitNode(op, "    ");
      inCluster.insert(op);
    }
    os << "  }\n";
  }
  for (Operation *op : kernels)
    if (node[op] == op && !inCluster.count(op))
      emitNode(op, "  ");

  // Edges between nodes, once each; an edge that goes from a layer's last
  // kernels back to its first is the step to the next layer.
  std::set<std::pair<int, int>> edges;
  for (Operation *op : kernels) {
    int to = id[node[op]];
    bool fromTokens = false;
    for (Value v : op->getOperands()) {
      if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getArgNumber() == 0)
        fromTokens = true;
      if (isa<KVCacheType>(v.getType()))
        continue; // the cache threads through the writes; reads show it
      Operation *from = producer(v);
      if (!from)
        continue;
      int f = id[node[from]];
      if (!edges.insert({f, to}).second)
        continue;
      bool cache = isa_and_nonnull<KVReadOp>(v.getDefiningOp());
      bool back = fold && layerOf(from) >= 0 && layerOf(op) > layerOf(from);
      os << "  n" << f << " -> n" << to;
      if (back)
        os << " [style=dashed, label=\"next layer\"]";
      else if (cache)
        os << " [label=\"kv cache\"]";
      os << ";\n";
    }
    if (fromTokens)
      os << "  tokens -> n" << to << ";\n";
  }
  os << "}\n";
  return dot;
}

absl::StatusOr<std::string> renderSvg(const std::string &dot) {
  // One Graphviz context for the whole process, never freed: Graphviz
  // 2.42's pango plugin keeps a pointer to the last font name it measured,
  // and freeing a context frees that name, so the next context's first
  // label compared against freed memory (found by the sanitized build with
  // --dump-ir-after-all, which renders once per pass).
  static GVC_t *gvc = gvContext();
  Agraph_t *g = agmemread(dot.c_str());
  if (!g)
    return absl::InternalError("graphviz could not read the kernel graph");
  std::string svg;
  char *data = nullptr;
  unsigned int length = 0;
  bool ok = gvLayout(gvc, g, "dot") == 0 &&
            gvRenderData(gvc, g, "svg", &data, &length) == 0;
  if (ok)
    svg.assign(data, length);
  if (data)
    gvFreeRenderData(data);
  gvFreeLayout(gvc, g);
  agclose(g);
  if (!ok)
    return absl::InternalError("graphviz could not lay out the kernel graph "
                               "(is the dot layout plugin installed?)");
  return svg;
}

} // namespace kiln

//===- InspectLlama2c.cpp - kiln inspect MODEL.bin: a llama2.c checkpoint -===//
#include "runtime/Llama2cCheckpoint.h"
#include "tools/kiln/Commands.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {

int inspectLlama2c(const std::string &path) {
  auto opened = Llama2cCheckpoint::open(path, /*tensors=*/false);
  if (!opened.ok())
    return fail(opened.status());
  const Llama2cCheckpoint &file = **opened;
  const LlamaConfig &c = file.config();
  auto &os = llvm::outs();
  os << "kiln llama2.c checkpoint " << path << ": " << file.describe()
     << ", header " << file.header().headerBytes << " bytes\n";
  os << llvm::formatv("  model     llama, {0} layers, hidden {1}, {2} heads "
                      "({3} kv), ffn {4}, vocab {5}, context {6}, {7} "
                      "classifier, q/k rows in Meta's interleaved order\n",
                      c.numLayers, c.hiddenSize, c.numHeads, c.numKVHeads,
                      c.intermediateSize, c.vocabSize, c.maxPositions,
                      c.tieWordEmbeddings ? "shared" : "separate");
  // The tensors themselves (version 2's dequantized) once the file is read.
  auto full = Llama2cCheckpoint::open(path);
  if (!full.ok())
    return fail(full.status());
  os << "  tensors   (run.c's name, row-major shape, the Hugging Face name)\n";
  for (const auto &[name, view] : (*full)->tensors())
    os << llvm::formatv("    {0,-24} {1,-14} {2}\n", view.name,
                        shapeString(view.shape), name);
  return 0;
}

} // namespace kiln

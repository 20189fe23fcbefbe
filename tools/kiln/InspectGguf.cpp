//===- InspectGguf.cpp - kiln inspect FILE.gguf: a GGUF file, readably ----===//
#include "runtime/GgufFile.h"
#include "runtime/GgufModel.h"
#include "runtime/SafeTensors.h"
#include "tools/kiln/Commands.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {
namespace {
/// Keys and names come from the file: no control characters reach the
/// terminal.
std::string printable(std::string_view text) {
  std::string out(text);
  for (char &c : out)
    if (uint8_t(c) < 0x20 || c == 0x7f)
      c = '?';
  return out;
}
} // namespace

int inspectGguf(const std::string &path) {
  auto opened = GgufFile::open(path);
  if (!opened.ok())
    return fail(opened.status());
  const GgufFile &file = **opened;
  auto &os = llvm::outs();
  os << llvm::formatv("kiln GGUF {0}: version {1}, alignment {2}, {3} "
                      "metadata keys, {4} tensors, {5} bytes (data from {6})\n",
                      path, file.version(), file.alignment(),
                      file.metadata().size(), file.tensors().size(),
                      file.fileBytes(), file.dataOffset());
  if (auto c = ggufLlamaConfig(file); c.ok()) {
    os << llvm::formatv("  model     llama, {0} layers, hidden {1}, {2} heads "
                        "({3} kv), ffn {4}, vocab {5}, context {6}, rope "
                        "base {7}, q/k rows in Meta's interleaved order\n",
                        c->numLayers, c->hiddenSize, c->numHeads, c->numKVHeads,
                        c->intermediateSize, c->vocabSize, c->maxPositions,
                        c->ropeTheta);
    std::string types = ggufProjectionBlockTypes(file);
    if (auto f = ggufProjectionFormats(file); f && !f->empty())
      os << "  kiln      projections kept as " << describeFormats(*f) << " ("
         << types << ": exact)\n";
    else if (!types.empty())
      os << "  kiln      projections dequantized to f16 at load (" << types
         << " beside float projections)\n";
    else
      os << "  kiln      float projections (f16 at load)\n";
  } else {
    os << "  model     not one kiln runs: " << std::string(c.status().message())
       << "\n";
  }
  os << "  metadata\n";
  for (const auto &[key, value] : file.metadata())
    os << llvm::formatv("    {0,-42} {1}\n", printable(key), value.describe());
  os << "  tensors   (type, row-major shape, bytes, data offset, the Hugging "
        "Face name)\n";
  for (const GgufTensor &t : file.tensors())
    os << llvm::formatv("    {0,-28} {1,-5} {2,-14} {3,10} at {4,-10} {5}\n",
                        printable(t.name), ggmlTypeInfo(t.type).name,
                        shapeString(t.shape()), t.bytes, t.offset,
                        ggufToHuggingFaceName(t.name));
  return 0;
}

} // namespace kiln

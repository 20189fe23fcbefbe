//===- GgufFuzzer.cpp - the GGUF reader on any bytes ----------------------===//
//
// Whatever the bytes, open() either refuses them with a status or returns
// metadata and tensors whose every byte lies inside the file: describing
// each value and dequantizing each tensor touches all of them, and the
// llama reading (config, names, the projections' format) and the tokenizer
// rebuilt from the metadata (loaded by libsentencepiece) run on them
// (AddressSanitizer watches).
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzInput.h"
#include "runtime/GgufFile.h"
#include "runtime/GgufModel.h"
#include "tokenizer/Tokenizer.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = kiln::inputPath("gguf");
  auto file = kiln::GgufFile::open(kiln::writeInput(path, data, size));
  if (!file.ok())
    return 0;
  for (const auto &[key, value] : (*file)->metadata()) {
    (void)value.describe();
    for (uint64_t i = 0; i < value.count && i < 4096; ++i)
      (void)value.number(i);
  }
  (void)kiln::ggufLlamaConfig(**file);
  std::string error;
  if (auto t = kiln::Tokenizer::open(path, int64_t(1) << 30, error))
    (void)t->decode(t->encode("a b\n\xe4\xbd\xa0"));
  (void)kiln::ggufProjectionFormats(**file);
  for (const kiln::GgufTensor &t : (*file)->tensors()) {
    (void)kiln::ggufToHuggingFaceName(t.name);
    if (!kiln::dtypeOfGgml(t.type) || t.elements() > (1 << 20))
      continue; // unread types, or a large but valid tensor
    std::vector<float> out(t.elements());
    kiln::ggmlDequantize(t.type, t.data, t.elements(), out.data());
    if (kiln::ggmlCanonicalFormat(t.type) && t.dims.size() == 2)
      (void)kiln::ggmlToCanonical(t.type, t.data, t.dims[1], t.dims[0],
                                  *kiln::ggmlCanonicalFormat(t.type));
  }
  return 0;
}

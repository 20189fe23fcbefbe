//===- Llama2cFuzzer.cpp - the llama2.c readers on any bytes --------------===//
//
// Whatever the bytes, the checkpoint reader either refuses them with a
// status or returns a config and tensors whose every byte lies inside the
// file (or, version 2, inside its dequantized buffers): each tensor is
// converted to float, which touches all of them (AddressSanitizer
// watches). The same bytes go to the tokenizer.bin reader, whose pieces, if
// it takes them, are serialized as a SentencePiece model.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzInput.h"
#include "runtime/Llama2cCheckpoint.h"
#include "tokenizer/Llama2cVocab.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = kiln::inputPath("llama2c");
  kiln::writeInput(path, data, size);
  if (auto file = kiln::Llama2cCheckpoint::open(path); file.ok()) {
    const kiln::LlamaConfig &c = (*file)->config();
    (void)c.headDim();
    for (const auto &[name, view] : (*file)->tensors()) {
      std::vector<float> out(view.numElements()); // [elements]
      view.toFloat(out.data());
    }
  }
  kiln::SentencePieceSpec spec;
  std::string error;
  if (kiln::readLlama2cVocab(path, spec, error))
    (void)kiln::serializeSentencePieceModel(spec);
  return 0;
}

//===- TokenizerFuzzer.cpp - the runtime's tokenizer on any model ---------===//
//
// SentencePieceBpe::fromProto refuses what it cannot read with a status; a
// model it accepts encodes any text to ids among its pieces and decodes any
// ids (its pieces or not) without fault. The input is the model, and its
// own bytes serve as the text.
//
//===----------------------------------------------------------------------===//
#include "runtime/SentencePieceBpe.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string bytes(reinterpret_cast<const char *>(data), size);
  auto t = kiln::SentencePieceBpe::fromProto(bytes, "fuzz");
  if (!t.ok())
    return 0;
  for (const std::string &text :
       {std::string("Hello world, the model reads"), bytes.substr(0, 64)}) {
    std::vector<int32_t> ids = (*t)->encodeText(text);
    for (int32_t id : ids)
      if (id < 0 || id >= (*t)->pieces())
        std::abort();
    (*t)->decode(ids);
  }
  std::vector<int32_t> any;
  for (size_t i = 0; i + 1 < size && i < 32; i += 2)
    any.push_back(int32_t(data[i]) << 8 | data[i + 1]);
  (*t)->decode(any);
  return 0;
}

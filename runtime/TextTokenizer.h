//===- TextTokenizer.h - text to token ids and back -------------*- C++ -*-===//
//
// What chat prompts and streamed text need of a tokenizer: kiln's
// Tokenizer (libsentencepiece, tokenizer/) and the runtime's own
// SentencePieceBpe both are one.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TEXTTOKENIZER_H
#define KILN_RUNTIME_TEXTTOKENIZER_H

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

class TextTokenizer {
public:
  virtual ~TextTokenizer() = default;
  /// The ids of `text` alone (no beginning-of-sequence id).
  virtual std::vector<int32_t> encodeText(const std::string &text) const = 0;
  /// The text of `ids`; ids past the tokenizer's pieces decode to nothing.
  virtual std::string decode(const std::vector<int32_t> &ids) const = 0;
  virtual int32_t bos() const = 0;
  virtual int32_t eos() const = 0;
};

} // namespace kiln

#endif // KILN_RUNTIME_TEXTTOKENIZER_H

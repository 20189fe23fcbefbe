//===- TextStream.h - a generation's text as it comes -----------*- C++ -*-===//
#ifndef KILN_RUNTIME_TEXTSTREAM_H
#define KILN_RUNTIME_TEXTSTREAM_H

#include "runtime/TextTokenizer.h"

#include <functional>
#include <string>
#include <vector>

namespace kiln {

/// Prints a generation's text as its tokens arrive: each token decodes the
/// prompt and the continuation again and writes what is new, so that a
/// word's leading space survives and pieces that only make a character
/// together (bytes of UTF-8) come out whole. With stop strings, the text
/// ends before the first one, and text that may be the start of one is
/// held back until it is known not to be.
class TextStream {
public:
  using Sink = std::function<void(const std::string &)>;
  TextStream(const TextTokenizer &tokenizer, std::vector<int32_t> prompt,
             Sink sink, std::vector<std::string> stops = {});
  /// False once the continuation holds a stop string: generation ends.
  bool add(int32_t token);
  /// Writes what was held back (generation ended without a stop string).
  void finish();

private:
  void emit(const std::string &continuation, size_t end);
  const TextTokenizer &tokenizer_;
  Sink sink_;
  std::vector<std::string> stops_;
  std::vector<int32_t> ids_;
  size_t promptChars_ = 0; // decoded prompt, in bytes
  size_t emitted_ = 0;     // of the continuation, in bytes
  std::string continuation_;
  bool stopped_ = false;
};

} // namespace kiln

#endif // KILN_RUNTIME_TEXTSTREAM_H

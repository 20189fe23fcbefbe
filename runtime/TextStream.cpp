//===- TextStream.cpp - a generation's text as it comes -------------------===//
#include "runtime/TextStream.h"

namespace kiln {

TextStream::TextStream(const TextTokenizer &tokenizer,
                       std::vector<int32_t> prompt, Sink sink,
                       std::vector<std::string> stops)
    : tokenizer_(tokenizer), sink_(std::move(sink)), stops_(std::move(stops)),
      ids_(std::move(prompt)) {
  promptChars_ = tokenizer_.decode(ids_).size();
}

void TextStream::emit(const std::string &continuation, size_t end) {
  if (end > emitted_) {
    sink_(continuation.substr(emitted_, end - emitted_));
    emitted_ = end;
  }
}

bool TextStream::add(int32_t token) {
  if (stopped_)
    return false;
  ids_.push_back(token);
  std::string text = tokenizer_.decode(ids_);
  // A partial UTF-8 character decodes to U+FFFD until its last byte comes.
  if (text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0)
    return true;
  continuation_ = text.size() > promptChars_ ? text.substr(promptChars_) : "";
  size_t stopAt = std::string::npos;
  for (const std::string &stop : stops_)
    stopAt = std::min(stopAt, continuation_.find(stop));
  if (stopAt != std::string::npos) {
    emit(continuation_, stopAt);
    stopped_ = true;
    return false;
  }
  // Hold back the longest end of the text that begins a stop string.
  size_t hold = 0;
  for (const std::string &stop : stops_)
    for (size_t k = std::min(stop.size() - 1, continuation_.size()); k > hold;
         --k)
      if (continuation_.compare(continuation_.size() - k, k, stop, 0, k) == 0) {
        hold = k;
        break;
      }
  emit(continuation_, continuation_.size() - hold);
  return true;
}

void TextStream::finish() {
  if (!stopped_)
    emit(continuation_, continuation_.size());
}

} // namespace kiln

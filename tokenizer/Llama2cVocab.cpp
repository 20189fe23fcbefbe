//===- Llama2cVocab.cpp - a SentencePiece model from tokenizer.bin --------===//
#include "tokenizer/Llama2cVocab.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <unordered_map>

namespace kiln {
namespace {
// Llama 2's is 430 KB; a larger file is not a tokenizer.bin.
constexpr uint64_t kMaxBytes = uint64_t(1) << 28;
const std::string kSpace = "\xE2\x96\x81"; // U+2581, SentencePiece's space

template <typename T> T load(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T)); // the hosts kiln runs on are LE
  return v;
}

/// "<0x0A>": SentencePiece's spelling of a byte piece (hex in capitals).
bool isBytePiece(const std::string &s) {
  auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
  };
  return s.size() == 6 && s.compare(0, 3, "<0x") == 0 && hex(s[3]) &&
         hex(s[4]) && s[5] == '>';
}
} // namespace

bool readLlama2cVocab(const std::string &path, SentencePieceSpec &spec,
                      std::string &error) {
  auto fail = [&](const std::string &what) {
    error = path + ": " + what;
    return false;
  };
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return fail("cannot be read");
  const std::streamoff end = in.tellg();
  if (end < 0 || uint64_t(end) > kMaxBytes)
    return fail("is not a llama2.c tokenizer.bin (" + std::to_string(end) +
                " bytes)");
  std::string b(size_t(end), '\0');
  in.seekg(0);
  if (!in.read(b.data(), end))
    return fail("cannot be read");
  if (b.size() < 4)
    return fail("truncated: " + std::to_string(b.size()) +
                " bytes, shorter than tokenizer.bin's max_token_length (4 "
                "bytes)");
  const uint32_t maxLength = load<uint32_t>(b.data());
  spec = SentencePieceSpec();
  spec.unk = 0; // tokenizer.py exports Llama 2's ids: unk 0, bos 1, eos 2
  spec.bos = 1;
  spec.eos = 2;
  spec.dummyPrefix = true;
  std::unordered_map<std::string, size_t> seen; // piece -> id
  for (size_t at = 4; at < b.size();) {
    const size_t id = spec.pieces.size();
    const std::string where = "piece " + std::to_string(id);
    if (b.size() - at < 8)
      return fail("truncated: the file ends inside " + where +
                  "'s score and length");
    const float score = load<float>(&b[at]);
    const int32_t length = load<int32_t>(&b[at + 4]);
    at += 8;
    if (!std::isfinite(score))
      return fail(where + "'s score is not a finite number");
    if (length <= 0)
      return fail(where + "'s length is " + std::to_string(length) +
                  " (run.c reads no empty piece)");
    if (uint32_t(length) > maxLength)
      return fail(where + "'s length " + std::to_string(length) +
                  " is more than max_token_length (" +
                  std::to_string(maxLength) + ")");
    if (uint64_t(length) > b.size() - at)
      return fail(where + "'s length " + std::to_string(length) +
                  " runs past the end of the file");
    std::string text = b.substr(at, size_t(length));
    at += size_t(length);
    Piece p{"", score, PieceType::Normal};
    if (id == 0) {
      p.type = PieceType::Unknown;
    } else if (id == 1 || id == 2) {
      p.type = PieceType::Control;
      // tokenizer.py writes "\n<s>\n" and "\n</s>\n" for run.c's output.
      if (text.size() >= 2 && text.front() == '\n' && text.back() == '\n')
        text = text.substr(1, text.size() - 2);
    } else if (isBytePiece(text)) {
      p.type = PieceType::Byte;
    }
    // tokenizer.py turned SentencePiece's U+2581 into spaces.
    for (char c : text)
      p.text += c == ' ' ? kSpace : std::string(1, c);
    if (auto [it, fresh] = seen.emplace(p.text, id); !fresh)
      return fail("pieces " + std::to_string(it->second) + " and " +
                  std::to_string(id) +
                  " are the same text (a garbled file, "
                  "or one written before tokenizer.py kept byte pieces "
                  "as <0xXX>)");
    spec.pieces.push_back(std::move(p));
  }
  // SentencePiece insists on these (three pieces at least).
  if (std::string e = sentencePieceSpecError(spec); !e.empty())
    return fail(e);
  return true;
}

bool llama2cSentencePieceModel(const std::string &path, int64_t vocab,
                               std::string &proto, std::string &error) {
  SentencePieceSpec spec;
  if (!readLlama2cVocab(path, spec, error))
    return false;
  if (int64_t(spec.pieces.size()) != vocab) {
    error = path + ": " + std::to_string(spec.pieces.size()) +
            " pieces, but the model's vocab_size is " + std::to_string(vocab) +
            " (llama2.c reads exactly vocab_size pieces: a tokenizer of "
            "another model?)";
    return false;
  }
  proto = serializeSentencePieceModel(spec);
  return true;
}

} // namespace kiln

//===- Tokenizer.h - text to token ids and back -----------------*- C++ -*-===//
//
// The tokenizer of Hugging Face Llama 2 folders: `tokenizer.model`, a
// SentencePiece model, through Debian's libsentencepiece. Kept out of
// runtime/ so that the runtime still builds on machines with nothing but a
// compiler and CUDA. No Abseil here: sentencepiece's headers declare their
// own `absl::string_view`, which clashes with Abseil's in one translation
// unit, so errors come back as text.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TOKENIZER_TOKENIZER_H
#define KILN_TOKENIZER_TOKENIZER_H

#include "runtime/TextStream.h"
#include "runtime/TextTokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace kiln {

class Tokenizer : public TextTokenizer {
public:
  /// FOLDER/tokenizer.model, or a GGUF file's tokenizer metadata
  /// (GgufVocab.h), checked to fit a vocabulary of `vocab` ids; null with
  /// `error` set when it cannot be used (a llama2.c checkpoint has none:
  /// openFile reads its tokenizer.bin).
  static std::unique_ptr<Tokenizer> open(const std::string &folder,
                                         int64_t vocab, std::string &error);
  /// A tokenizer named on its own (`kiln run --tokenizer FILE`): a
  /// SentencePiece model (FILE.model), else llama2.c's tokenizer.bin
  /// (Llama2cVocab.h), which must hold exactly `vocab` pieces.
  static std::unique_ptr<Tokenizer> openFile(const std::string &path,
                                             int64_t vocab, std::string &error);
  static bool present(const std::string &folder);
  ~Tokenizer() override;

  /// The ids of `text`, after the beginning-of-sequence id (as Llama 2's
  /// generation does; a GGUF file may say not to: add_bos_token).
  std::vector<int32_t> encode(const std::string &text) const;
  /// The ids of `text` alone (no beginning-of-sequence id).
  std::vector<int32_t> encodeText(const std::string &text) const override;
  /// Ids past the tokenizer's pieces (a model vocabulary larger than the
  /// tokenizer's) decode to nothing.
  std::string decode(const std::vector<int32_t> &ids) const override;
  int32_t eos() const override;
  int32_t bos() const override;

private:
  Tokenizer();
  // Each false with `error` naming `path`.
  bool loadModel(const std::string &path, std::string &error);
  bool loadPieces(const std::string &proto, const std::string &path,
                  std::string &error);
  bool fits(const std::string &path, int64_t vocab, std::string &error) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  bool addBos_ = true;
};

} // namespace kiln

#endif // KILN_TOKENIZER_TOKENIZER_H

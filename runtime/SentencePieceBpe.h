//===- SentencePieceBpe.h - Llama's tokenizer without libsentencepiece -*-===//
//
// SentencePiece's BPE model (bpe_model.cc and the processor around it),
// read from a tokenizer.model (the ModelProto's wire format) and run with
// nothing but the standard library: the runtime alone (kiln-run, built for
// machines without Debian's libsentencepiece) tokenizes text with it. It
// does what Llama's tokenizer needs: BPE merges by score (ties to the
// left), byte fallback, user-defined symbols, unused pieces resegmented,
// the identity normalizer with its dummy prefix and whitespace rules; a
// model that needs more (unigram, a precompiled normalization charsmap) is
// refused by name. test/unit/SentencePieceBpeTest.cpp holds it to
// libsentencepiece id for id.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_SENTENCEPIECEBPE_H
#define KILN_RUNTIME_SENTENCEPIECEBPE_H

#include "runtime/TextTokenizer.h"

#include "absl/status/statusor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class SentencePieceBpe : public TextTokenizer {
public:
  /// A serialized ModelProto (`what` names it in errors).
  static absl::StatusOr<std::unique_ptr<SentencePieceBpe>>
  fromProto(const std::string &proto, const std::string &what);
  /// FILE (a tokenizer.model).
  static absl::StatusOr<std::unique_ptr<SentencePieceBpe>>
  open(const std::string &path);

  std::vector<int32_t> encodeText(const std::string &text) const override;
  std::string decode(const std::vector<int32_t> &ids) const override;
  int32_t bos() const override { return bos_; }
  int32_t eos() const override { return eos_; }
  int64_t pieces() const { return int64_t(pieces_.size()); }

private:
  enum Type {
    Normal = 1,
    Unknown = 2,
    Control = 3,
    User = 4,
    Unused = 5,
    Byte = 6
  };
  struct Piece {
    std::string text;
    float score = 0;
    int type = Normal;
  };
  std::string normalize(const std::string &text) const;
  int32_t idOf(const std::string &piece) const;

  std::vector<Piece> pieces_;
  std::map<std::string, int32_t> mergeable_; // normal, user, unused
  std::map<std::string, int32_t> reserved_;  // control, unknown, byte
  std::vector<std::string> userSymbols_;
  int32_t unk_ = 0, bos_ = 1, eos_ = 2;
  bool byteFallback_ = false, dummyPrefix_ = true, removeSpaces_ = true,
       escapeSpaces_ = true;
  std::string unkSurface_ = " \xE2\x81\x87 "; // " ⁇ "
};

} // namespace kiln

#endif // KILN_RUNTIME_SENTENCEPIECEBPE_H

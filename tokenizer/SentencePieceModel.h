//===- SentencePieceModel.h - a SentencePiece model from pieces -*- C++ -*-===//
//
// Model files that carry their tokenizer as a list of pieces (GGUF's
// metadata, llama2.c's tokenizer.bin) rather than as tokenizer.model: the
// pieces become the serialized ModelProto that libsentencepiece loads
// (sentencepiece_model.proto's field numbers), as Llama 2's: BPE with byte
// fallback, the identity normalizer, a dummy prefix, whitespace kept.
// No Abseil here (Tokenizer.h says why).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TOKENIZER_SENTENCEPIECEMODEL_H
#define KILN_TOKENIZER_SENTENCEPIECEMODEL_H

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// SentencePiece's piece types (GGUF's token_type uses the same numbers).
enum class PieceType : int {
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

struct Piece {
  std::string text; // with U+2581 for spaces, as SentencePiece spells them
  float score = 0;
  PieceType type = PieceType::Normal;
};

struct SentencePieceSpec {
  std::vector<Piece> pieces;
  int unk = 0, bos = 1, eos = 2;
  bool dummyPrefix = true; // add_dummy_prefix
};

/// The serialized ModelProto; byte_fallback is on when a piece is a Byte.
std::string serializeSentencePieceModel(const SentencePieceSpec &spec);

/// Empty, or what SentencePiece would refuse in `spec` (the unknown id not
/// the one Unknown piece, bos or eos not Control pieces, ids out of range),
/// naming the piece.
std::string sentencePieceSpecError(const SentencePieceSpec &spec);

} // namespace kiln

#endif // KILN_TOKENIZER_SENTENCEPIECEMODEL_H
